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
