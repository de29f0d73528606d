// A general element-wise op may not mix a per-example operand with one that
// is not: a parameter shaped like the batch has all of the batch's rows,
// while each micro-batch's activations have only its own.
// RUN: gpipe-opt %s -gpipe-compile="num-microbatches=2" | not gpipe-translate --gpipe-to-bundle 2>&1 | FileCheck %s

// CHECK: error: 'gpipe.mul' op mixes per-example operands with one that is not (a parameter, or a value computed from parameters alone, shaped like the batch): each micro-batch has its own rows of the one but all rows of the other, and broadcasting is not supported yet
gpipe.model @mixed batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %y = gpipe.layer "l" -> tensor<2x3xf32> {
    %p = gpipe.param "p" normal : tensor<2x3xf32>
    %0 = gpipe.mul %x, %p : tensor<2x3xf32>
    gpipe.yield %0 : tensor<2x3xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
