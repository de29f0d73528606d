// gpipe-rematerialize needs stage backwards (a backward with no recompute ops, one whose gradients read only
// its inputs, is valid: gpipe-rematerialize.mlir).
// RUN: gpipe-opt %s -split-input-file -gpipe-rematerialize -verify-diagnostics

// expected-error @+1 {{'gpipe.model' op has no stage backwards; run gpipe-differentiate first}}
gpipe.model @undifferentiated batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %s = gpipe.stage @stage0 index 0 (%x) : (tensor<2x3xf32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<2x3xf32>):
    %a = gpipe.layer "a" -> tensor<f32> {
      %0 = gpipe.mse_loss %arg0, %arg0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.yield %a : tensor<f32>
  }
  gpipe.return %s : tensor<f32>
}

