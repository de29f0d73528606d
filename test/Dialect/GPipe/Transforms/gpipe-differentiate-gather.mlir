// gpipe-differentiate through gathers: the input's gradient adds dy into the
// positions read (gpipe.gather_grad, with the forward's indices, axis and
// `batched`); the i32 indices get none. A parameter read through a gather
// gets its rows' gradient summed over the batch.
// RUN: gpipe-opt %s -gpipe-estimate-cost -gpipe-partition -gpipe-form-stages -gpipe-differentiate | FileCheck %s
// RUN: gpipe-opt %s -gpipe-estimate-cost | FileCheck %s --check-prefix=COST

// A gather costs per element it writes, not per element of its input.
// COST: gpipe.gather {{.*}}flops = 48,

// CHECK-LABEL: gpipe.stage_backward @stage0
// CHECK: %[[DY:.*]] = gpipe.mse_loss_grad
// CHECK: %[[DG:.*]] = gpipe.gather_grad %[[DY]][%{{.*}}] axis 2 batched : tensor<2x3x3xf32>, tensor<2x3xi32> -> tensor<2x3x8xf32>
// CHECK: %[[DE:.*]] = gpipe.sum_to %[[DG]] : tensor<2x3x8xf32> -> tensor<3x8xf32>
// CHECK: %[[DW1:.*]] = gpipe.gather_grad %[[DE]][%[[I:.*]]] axis 0 : tensor<3x8xf32>, tensor<3xi32> -> tensor<4x8xf32>
// CHECK: gpipe.accumulate_grad "w", %[[DW1]]
// CHECK: %[[DM:.*]] = gpipe.gather_grad %[[DG]][%[[I]]] axis 1 : tensor<2x3x8xf32>, tensor<3xi32> -> tensor<2x4x8xf32>
// CHECK: %[[DW2:.*]] = gpipe.mul %[[DM]], %arg0 : tensor<2x4x8xf32>
// CHECK: %[[DW3:.*]] = gpipe.sum_to %[[DW2]] : tensor<2x4x8xf32> -> tensor<4x8xf32>
// CHECK: gpipe.accumulate_grad "w", %[[DW3]]
// CHECK-NOT: gpipe.accumulate_grad "positions"
gpipe.model @gathers batch 2 {
  %x = gpipe.input "x" : tensor<2x4x8xf32>
  %ids = gpipe.input "ids" : tensor<2x3xi32>
  %t = gpipe.input "t" : tensor<2x3x3xf32>
  %y = gpipe.layer "pick" -> tensor<2x3x3xf32> {
    %w = gpipe.param "w" normal : tensor<4x8xf32>
    %p = gpipe.param "positions" zeros frozen : tensor<3xf32>
    %0 = gpipe.mul %x, %w : tensor<2x4x8xf32>, tensor<4x8xf32> -> tensor<2x4x8xf32>
    %i = gpipe.cast %p : tensor<3xf32> -> tensor<3xi32>
    %g = gpipe.gather %0[%i] axis 1 : tensor<2x4x8xf32>, tensor<3xi32> -> tensor<2x3x8xf32>
    %e = gpipe.gather %w[%i] axis 0 : tensor<4x8xf32>, tensor<3xi32> -> tensor<3x8xf32>
    %s = gpipe.add %g, %e : tensor<2x3x8xf32>, tensor<3x8xf32> -> tensor<2x3x8xf32>
    %b = gpipe.gather %s[%ids] axis 2 batched : tensor<2x3x8xf32>, tensor<2x3xi32> -> tensor<2x3x3xf32>
    gpipe.yield %b : tensor<2x3x3xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %t : (tensor<2x3x3xf32>, tensor<2x3x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
