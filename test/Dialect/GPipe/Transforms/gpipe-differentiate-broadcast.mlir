// gpipe-differentiate with broadcasting and reductions: each operand that a
// broadcasting op stretched gets its gradient summed back to its shape
// (gpipe.sum_to: a position table's over the batch, a gain's over batch and
// positions, a row statistic's over the row); reduce_sum's and reduce_mean's
// gradients stretch dy along the axes; reduce_max's shares dy among the
// ties (reduce_max_count, reduce_max_grad), as torch.amax.
// RUN: gpipe-opt %s -gpipe-estimate-cost -gpipe-partition -gpipe-form-stages -gpipe-differentiate | FileCheck %s
// RUN: gpipe-opt %s -gpipe-estimate-cost | FileCheck %s --check-prefix=COST

// A reduction costs per element it reads, a broadcast per element it writes.
// COST: gpipe.add {{.*}}flops = 64,
// COST: gpipe.reduce_mean {{.*}}flops = 64,
// COST: gpipe.rsqrt {{.*}}flops = 96,

// CHECK-LABEL: gpipe.stage_backward @stage0
// CHECK-DAG: %[[GAIN:.*]] = gpipe.param_ref "gain" : tensor<8xf32>
// CHECK-DAG: %[[X0:.*]] = gpipe.add %arg0, %{{.*}} {gpipe.recompute} : tensor<2x4x8xf32>, tensor<4x8xf32> -> tensor<2x4x8xf32>
// CHECK: %[[MS:.*]] = gpipe.reduce_mean %{{.*}} axes [2] {gpipe.recompute}
// CHECK: %[[R:.*]] = gpipe.rsqrt %[[MS]] {gpipe.recompute}
// CHECK: %[[N:.*]] = gpipe.mul %[[X0]], %[[R]] {gpipe.recompute}
// CHECK: %[[G:.*]] = gpipe.mul %[[N]], %[[GAIN]] {gpipe.recompute}
// CHECK: %[[MX:.*]] = gpipe.reduce_max %[[G]] axes [1] {gpipe.recompute}
// CHECK: %[[DY:.*]] = gpipe.mse_loss_grad
// CHECK: %[[NEG:.*]] = gpipe.neg %[[DY]] : tensor<2x4x8xf32>
// CHECK: %[[DSUM:.*]] = gpipe.sum_to %[[NEG]] : tensor<2x4x8xf32> -> tensor<2x1x1xf32>
// CHECK: %[[DMAX:.*]] = gpipe.reduce_sum_grad %[[DSUM]] axes [2] : tensor<2x1x1xf32> -> tensor<2x1x8xf32>
// CHECK: %[[TIES:.*]] = gpipe.reduce_max_count %[[G]], %[[MX]] axes [1] : tensor<2x4x8xf32>, tensor<2x1x8xf32> -> tensor<2x1x8xf32>
// CHECK: gpipe.reduce_max_grad %[[DMAX]], %[[G]], %[[MX]], %[[TIES]] axes [1] : tensor<2x1x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
// CHECK: %[[DG:.*]] = gpipe.add %[[DY]], %{{.*}} : tensor<2x4x8xf32>
// CHECK: %[[DN:.*]] = gpipe.mul %[[DG]], %[[GAIN]] : tensor<2x4x8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>
// CHECK: %[[GG:.*]] = gpipe.mul %[[DG]], %[[N]] : tensor<2x4x8xf32>
// CHECK: %[[DGAIN:.*]] = gpipe.sum_to %[[GG]] : tensor<2x4x8xf32> -> tensor<8xf32>
// CHECK: gpipe.accumulate_grad "gain", %[[DGAIN]] : tensor<8xf32>
// CHECK: %[[RR:.*]] = gpipe.mul %[[DN]], %[[X0]] : tensor<2x4x8xf32>
// CHECK: %[[DR:.*]] = gpipe.sum_to %[[RR]] : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
// CHECK: %[[DMS:.*]] = gpipe.rsqrt_grad %[[DR]], %[[R]] : tensor<2x4x1xf32>
// CHECK: gpipe.reduce_mean_grad %[[DMS]] axes [2] : tensor<2x4x1xf32> -> tensor<2x4x8xf32>
// CHECK: %[[DPOS:.*]] = gpipe.sum_to %{{.*}} : tensor<2x4x8xf32> -> tensor<4x8xf32>
// CHECK: gpipe.accumulate_grad "pos", %[[DPOS]] : tensor<4x8xf32>
gpipe.model @rms batch 2 {
  %x = gpipe.input "x" : tensor<2x4x8xf32>
  %y = gpipe.layer "norm" -> tensor<2x4x8xf32> {
    %gain = gpipe.param "gain" ones : tensor<8xf32>
    %pos = gpipe.param "pos" normal : tensor<4x8xf32>
    %0 = gpipe.add %x, %pos : tensor<2x4x8xf32>, tensor<4x8xf32> -> tensor<2x4x8xf32>
    %1 = gpipe.mul %0, %0 : tensor<2x4x8xf32>
    %2 = gpipe.reduce_mean %1 axes [2] : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
    %3 = gpipe.rsqrt %2 : tensor<2x4x1xf32>
    %4 = gpipe.mul %0, %3 : tensor<2x4x8xf32>, tensor<2x4x1xf32> -> tensor<2x4x8xf32>
    %5 = gpipe.mul %4, %gain : tensor<2x4x8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>
    %6 = gpipe.reduce_max %5 axes [1] : tensor<2x4x8xf32> -> tensor<2x1x8xf32>
    %7 = gpipe.reduce_sum %6 axes [2] : tensor<2x1x8xf32> -> tensor<2x1x1xf32>
    %8 = gpipe.sub %5, %7 : tensor<2x4x8xf32>, tensor<2x1x1xf32> -> tensor<2x4x8xf32>
    gpipe.yield %8 : tensor<2x4x8xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
