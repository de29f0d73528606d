// gpipe-estimate-cost reports an op it has no cost model for instead of guessing.
// RUN: gpipe-opt %s -split-input-file -allow-unregistered-dialect -gpipe-estimate-cost -verify-diagnostics

gpipe.model @foreign batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %a = gpipe.layer "a" -> tensor<f32> {
    // expected-error @+1 {{'foreign.op' op has no cost model; write its cost by hand}}
    %0 = "foreign.op"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %1 = gpipe.mse_loss %0, %0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %a : tensor<f32>
}

// -----

// A GEMM of 2^77 FLOPs: every tensor fits below 2^63 bytes, the cost does not.
gpipe.model @huge batch 1073741824 {
  %x = gpipe.input "x" : tensor<1073741824x65536xf32>
  %y = gpipe.input "y" : tensor<1073741824xi32>
  %h = gpipe.layer "fc" -> tensor<1073741824x1073741824xf32> {
    %w = gpipe.param "w" glorot_uniform : tensor<65536x1073741824xf32>
    // expected-error @+1 {{'gpipe.dense' op costs 2^63 FLOPs or bytes or more; the model is too large}}
    %0 = gpipe.dense %x, %w : (tensor<1073741824x65536xf32>, tensor<65536x1073741824xf32>) -> tensor<1073741824x1073741824xf32>
    gpipe.yield %0 : tensor<1073741824x1073741824xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.softmax_cross_entropy %h, %y : (tensor<1073741824x1073741824xf32>, tensor<1073741824xi32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
