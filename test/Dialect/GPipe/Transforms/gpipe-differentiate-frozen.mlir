// A frozen parameter is a constant of the model: ops read it (here a
// position table added to every example), and gpipe-differentiate gives it
// no gradient (no accumulate_grad), while the trained one gets its own.
// RUN: gpipe-opt %s -gpipe-estimate-cost -gpipe-partition -gpipe-form-stages -gpipe-differentiate | FileCheck %s
// RUN: gpipe-opt %s --verify-roundtrip | FileCheck %s --check-prefix=PRINT

// PRINT: gpipe.param "pos" normal scale 5.000000e-01 frozen : tensor<4x8xf32>

// CHECK-LABEL: gpipe.stage_backward @stage0
// CHECK-NOT: accumulate_grad "pos"
// CHECK: gpipe.accumulate_grad "gain"
// CHECK-NOT: accumulate_grad "pos"
// CHECK: gpipe.yield
gpipe.model @frozen batch 2 {
  %x = gpipe.input "x" : tensor<2x4x8xf32>
  %y = gpipe.layer "embed" -> tensor<2x4x8xf32> {
    %pos = gpipe.param "pos" normal scale 0.5 frozen : tensor<4x8xf32>
    %gain = gpipe.param "gain" ones : tensor<8xf32>
    %0 = gpipe.add %x, %pos : tensor<2x4x8xf32>, tensor<4x8xf32> -> tensor<2x4x8xf32>
    %1 = gpipe.mul %0, %gain : tensor<2x4x8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>
    gpipe.yield %1 : tensor<2x4x8xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
