// A model whose tensors each fit below 2^63 bytes but whose stage does not -- a hidden width of 2^58: parameters with
// their gradients and Adam state, 3 x 2^58 floats x 4 copies -- is refused by name, never planned with wrapped byte
// counts (which once gave a negative plan that the runtime then blamed on the bundle).
// RUN: not gpipe-opt %s -gpipe-compile="num-stages=1 num-microbatches=1" 2>&1 | FileCheck %s

// CHECK: error: 'gpipe.stage' op needs 2^63 bytes or more for its parameters (with their gradients and optimizer state) or for one value with its saved state; the model is too large to plan
gpipe.model @m batch 1 {
  %x = gpipe.input "x" : tensor<1x3xf32>
  %y = gpipe.input "y" : tensor<1xi32>
  %h = gpipe.layer "fc" -> tensor<1x288230376151711744xf32> {
    %w = gpipe.param "w" glorot_uniform : tensor<3x288230376151711744xf32>
    %0 = gpipe.dense %x, %w : (tensor<1x3xf32>, tensor<3x288230376151711744xf32>) -> tensor<1x288230376151711744xf32>
    gpipe.yield %0 : tensor<1x288230376151711744xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.softmax_cross_entropy %h, %y : (tensor<1x288230376151711744xf32>, tensor<1xi32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
