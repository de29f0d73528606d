// A parameter that no gradient reaches (read only by a comparison) gets a
// zero one, as PyTorch's: the runtime requires a gradient of every trained
// parameter. A frozen parameter and a batch norm's running statistics get
// none.
// RUN: gpipe-opt %s -gpipe-estimate-cost -gpipe-partition -gpipe-form-stages -gpipe-differentiate | FileCheck %s

// CHECK-LABEL: gpipe.stage_backward @stage0
// CHECK: gpipe.accumulate_grad "w",
// CHECK: %[[Z:.*]] = gpipe.zeros : tensor<4xf32>
// CHECK-NEXT: gpipe.accumulate_grad "threshold", %[[Z]] : tensor<4xf32>
// CHECK-NOT: gpipe.accumulate_grad "offset"
// CHECK: gpipe.yield
gpipe.model @gate batch 2 {
  %x = gpipe.input "x" : tensor<2x4xf32>
  %y = gpipe.layer "l" -> tensor<2x4xf32> {
    %w = gpipe.param "w" normal : tensor<4xf32>
    %t = gpipe.param "threshold" normal : tensor<4xf32>
    %o = gpipe.param "offset" zeros frozen : tensor<4xf32>
    %c = gpipe.gt %x, %t : tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xi1>
    %s = gpipe.add %x, %o : tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xf32>
    %m = gpipe.mul %s, %w : tensor<2x4xf32>, tensor<4xf32> -> tensor<2x4xf32>
    %z = gpipe.where %c, %m, %x : tensor<2x4xi1>, tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
    gpipe.yield %z : tensor<2x4xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
