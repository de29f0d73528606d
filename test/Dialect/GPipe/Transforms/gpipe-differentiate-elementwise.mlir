// gpipe-differentiate's rules for the general element-wise ops: a gradient op
// reading the op's input (silu, log) or result (exp, sigmoid), general ops
// where the derivative is one (mul, div for its dividend, sub), both
// operands for pow, max and min (the rhs by swapping them); and the cost
// model's FLOPs per element (1 for arithmetic, 12 for a transcendental).
// RUN: gpipe-opt %s -gpipe-estimate-cost -gpipe-partition -gpipe-form-stages -gpipe-differentiate | FileCheck %s
// RUN: gpipe-opt %s -gpipe-estimate-cost | FileCheck %s --check-prefix=COST

// COST: gpipe.silu {{.*}}flops = 72,
// COST: gpipe.mul {{.*}}flops = 6,
// COST: gpipe.exp {{.*}}flops = 72,
// COST: gpipe.div {{.*}}flops = 6,

// CHECK-LABEL: gpipe.stage_backward @stage0
// CHECK: %[[A:.*]] = gpipe.dense {{.*}}{gpipe.recompute}
// CHECK: %[[B:.*]] = gpipe.dense {{.*}}{gpipe.recompute}
// CHECK: %[[S:.*]] = gpipe.silu %[[A]] {gpipe.recompute}
// CHECK: %[[M:.*]] = gpipe.mul %[[S]], %[[B]] {gpipe.recompute}
// CHECK: %[[E:.*]] = gpipe.exp %[[B]] {gpipe.recompute}
// CHECK: %[[D:.*]] = gpipe.div %[[M]], %[[E]] {gpipe.recompute}
// CHECK: %[[P:.*]] = gpipe.pow %[[D]], %[[A]] {gpipe.recompute}
// CHECK: %[[MX:.*]] = gpipe.max %[[P]], %[[B]] {gpipe.recompute}
// CHECK: %[[SG:.*]] = gpipe.sigmoid %[[MX]] {gpipe.recompute}
// CHECK: %[[LG:.*]] = gpipe.log %[[SG]] {gpipe.recompute}
// CHECK: %[[Z:.*]] = gpipe.sub %[[LG]], %[[A]] {gpipe.recompute}
// CHECK: %[[DZ:.*]] = gpipe.mse_loss_grad %[[Z]]
// CHECK-NEXT: %[[DA1:.*]] = gpipe.neg %[[DZ]]
// CHECK-NEXT: %[[DLG:.*]] = gpipe.log_grad %[[DZ]], %[[SG]]
// CHECK-NEXT: %[[DSG:.*]] = gpipe.sigmoid_grad %[[DLG]], %[[SG]]
// CHECK-NEXT: %[[DP:.*]] = gpipe.max_lhs_grad %[[DSG]], %[[P]], %[[B]]
// CHECK-NEXT: %[[DB1:.*]] = gpipe.max_lhs_grad %[[DSG]], %[[B]], %[[P]]
// CHECK-NEXT: %[[DD:.*]] = gpipe.pow_lhs_grad %[[DP]], %[[D]], %[[A]]
// CHECK-NEXT: %[[DA2:.*]] = gpipe.pow_rhs_grad %[[DP]], %[[D]], %[[A]]
// CHECK-NEXT: %[[SA1:.*]] = gpipe.add %[[DA1]], %[[DA2]]
// CHECK-NEXT: %[[DM:.*]] = gpipe.div %[[DD]], %[[E]]
// CHECK-NEXT: %[[DE:.*]] = gpipe.div_rhs_grad %[[DD]], %[[D]], %[[E]]
// CHECK-NEXT: %[[DB2:.*]] = gpipe.exp_grad %[[DE]], %[[E]]
// CHECK-NEXT: %[[SB1:.*]] = gpipe.add %[[DB1]], %[[DB2]]
// CHECK-NEXT: %[[DS:.*]] = gpipe.mul %[[DM]], %[[B]]
// CHECK-NEXT: %[[DB3:.*]] = gpipe.mul %[[DM]], %[[S]]
// CHECK-NEXT: %[[SB2:.*]] = gpipe.add %[[SB1]], %[[DB3]]
// CHECK-NEXT: %[[DA3:.*]] = gpipe.silu_grad %[[DS]], %[[A]]
// CHECK-NEXT: %[[SA2:.*]] = gpipe.add %[[SA1]], %[[DA3]]
// CHECK-NEXT: gpipe.dense_grad %[[SB2]]
// CHECK: gpipe.dense_grad %[[SA2]]

gpipe.model @chain batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %y = gpipe.input "y" : tensor<2x3xf32>
  %z = gpipe.layer "ops" -> tensor<2x3xf32> {
    %wa = gpipe.param "wa" normal : tensor<3x3xf32>
    %wb = gpipe.param "wb" normal : tensor<3x3xf32>
    %a = gpipe.dense %x, %wa : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    %b = gpipe.dense %x, %wb : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    %s = gpipe.silu %a : tensor<2x3xf32>
    %m = gpipe.mul %s, %b : tensor<2x3xf32>
    %e = gpipe.exp %b : tensor<2x3xf32>
    %d = gpipe.div %m, %e : tensor<2x3xf32>
    %p = gpipe.pow %d, %a : tensor<2x3xf32>
    %mx = gpipe.max %p, %b : tensor<2x3xf32>
    %sg = gpipe.sigmoid %mx : tensor<2x3xf32>
    %lg = gpipe.log %sg : tensor<2x3xf32>
    %r = gpipe.sub %lg, %a : tensor<2x3xf32>
    gpipe.yield %r : tensor<2x3xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %z, %y : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
