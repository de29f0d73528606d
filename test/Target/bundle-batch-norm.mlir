// batch_norm through the compiler: its gradient (none for the running statistics, which are parameters the backward never accumulates into), its cost, and its bundle op with epsilon and momentum.
// RUN: gpipe-opt %s -gpipe-estimate-cost | FileCheck %s --check-prefix=COST
// RUN: gpipe-opt %s -gpipe-compile="num-stages=2 num-microbatches=2" | FileCheck %s --check-prefix=GRAD
// RUN: gpipe-opt %s -gpipe-compile="num-stages=2 num-microbatches=2" | gpipe-translate --gpipe-to-bundle | FileCheck %s --check-prefix=BUNDLE

// 8 x 6 x 6 x 4 = 1152 elements at 8 FLOPs; gamma, beta and both running statistics 4 x 16 B = 64 B; the result
// 4608 B plus the kept mean, rstd and gradient sums, 4 x 16 B.
// COST: gpipe.batch_norm {{.*}}cost = #gpipe.cost<flops = 9216, param_bytes = 64, activation_bytes = 4672>

// GRAD: gpipe.stage_backward @stage0
// GRAD: %[[Y:.*]] = gpipe.batch_norm %[[X:.*]], %[[G:.*]], %{{.*}}, %{{.*}}, %{{.*}} {gpipe.recompute, momentum = 2.000000e-01 : f64}
// GRAD: %{{.*}}, %[[DG:.*]], %[[DB:.*]] = gpipe.batch_norm_grad %{{.*}}, %[[Y]], %[[X]], %[[G]] : (tensor<8x6x6x4xf32>, tensor<8x6x6x4xf32>, tensor<8x6x6x4xf32>, tensor<4xf32>) -> (tensor<8x6x6x4xf32>, tensor<4xf32>, tensor<4xf32>)
// GRAD-DAG: gpipe.accumulate_grad "bn.gamma", %[[DG]]
// GRAD-DAG: gpipe.accumulate_grad "bn.beta", %[[DB]]
// GRAD-NOT: accumulate_grad "bn.mean"
// GRAD-NOT: accumulate_grad "bn.var"
// GRAD: gpipe.stage_backward @stage1

// BUNDLE: "epsilon": 1.0000000000000001e-05,
// BUNDLE-NEXT: "momentum": 0.20000000000000001,
// BUNDLE-NEXT: "op": "batch_norm",
gpipe.model @bn batch 8 {
  %x = gpipe.input "x" : tensor<8x6x6x1xf32>
  %labels = gpipe.input "labels" : tensor<8xi32>
  %h = gpipe.layer "conv" -> tensor<8x6x6x4xf32> {
    %w = gpipe.param "conv.w" glorot_uniform : tensor<3x3x1x4xf32>
    %g = gpipe.param "bn.gamma" ones : tensor<4xf32>
    %b = gpipe.param "bn.beta" zeros : tensor<4xf32>
    %mean = gpipe.param "bn.mean" zeros : tensor<4xf32>
    %var = gpipe.param "bn.var" ones : tensor<4xf32>
    %0 = gpipe.conv2d %x, %w stride [1, 1] padding [1, 1] : (tensor<8x6x6x1xf32>, tensor<3x3x1x4xf32>) -> tensor<8x6x6x4xf32>
    %1 = gpipe.batch_norm %0, %g, %b, %mean, %var {momentum = 0.2 : f64} : (tensor<8x6x6x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<8x6x6x4xf32>
    %2 = gpipe.relu %1 : tensor<8x6x6x4xf32>
    gpipe.yield %2 : tensor<8x6x6x4xf32>
  }
  %logits = gpipe.layer "head" -> tensor<8x10xf32> {
    %0 = gpipe.global_avg_pool %h : (tensor<8x6x6x4xf32>) -> tensor<8x4xf32>
    %w = gpipe.param "fc.w" glorot_uniform : tensor<4x10xf32>
    %1 = gpipe.dense %0, %w : (tensor<8x4xf32>, tensor<4x10xf32>) -> tensor<8x10xf32>
    gpipe.yield %1 : tensor<8x10xf32>
  }
  %loss = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.softmax_cross_entropy %logits, %labels : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %loss : tensor<f32>
}
