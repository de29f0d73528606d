// gpipe-differentiate through masks: where sends dy to lhs where the
// condition holds and to rhs elsewhere (where_lhs_grad, where_rhs_grad,
// each summed back to its operand's shape); comparisons, logic and casts
// to or from integers pass no gradient (only an f32 to f32 cast would).
// RUN: gpipe-opt %S/../logic.mlir -gpipe-estimate-cost -gpipe-partition -gpipe-form-stages -gpipe-differentiate | FileCheck %s

// CHECK-LABEL: gpipe.stage_backward @stage0
// CHECK: %[[N:.*]] = gpipe.not %{{.*}} {gpipe.recompute} : tensor<2x4x8xi1>
// CHECK: %[[DY:.*]] = gpipe.mse_loss_grad
// CHECK-NEXT: %[[DL:.*]] = gpipe.where_lhs_grad %[[DY]], %[[N]] : tensor<2x4x8xf32>, tensor<2x4x8xi1>
// CHECK-NEXT: %[[DR:.*]] = gpipe.where_rhs_grad %[[DY]], %[[N]] : tensor<2x4x8xf32>, tensor<2x4x8xi1>
// CHECK-NEXT: %[[DP:.*]] = gpipe.sum_to %[[DR]] : tensor<2x4x8xf32> -> tensor<8xf32>
// CHECK-NEXT: gpipe.accumulate_grad "p", %[[DP]]
// CHECK-NEXT: %[[DM:.*]] = gpipe.mul %[[DL]], %arg0
// CHECK-NEXT: %[[DQ:.*]] = gpipe.sum_to %[[DM]] : tensor<2x4x8xf32> -> tensor<4x1xf32>
// CHECK-NEXT: gpipe.accumulate_grad "q", %[[DQ]]
// CHECK-NEXT: gpipe.yield
