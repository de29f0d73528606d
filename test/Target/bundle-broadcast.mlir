// Broadcasting and reductions become kernels over merged iteration spaces
// (KernelRegions.h): the position table added to every example is a rank-2
// kernel ([batch, positions x features] with the table lacking dimension 0);
// RMSNorm's square and mean over the features fuse into one reduction; the
// gain's gradient sums over the batch and positions (dimension 0 reduced);
// the mean square's gradient is one row kernel: a leading sum over each
// row's features, then its rsqrt and mean gradients.
// Each kernel op carries its space at the full batch and whether dimension
// 0 holds the batch. The general ops need no --gpipe-codegen=native.
// RUN: gpipe-opt %s -gpipe-compile="num-stages=1 num-microbatches=2" | gpipe-translate --gpipe-to-bundle | FileCheck %s

// CHECK: "kernels": [
// CHECK: "ops": "rank 2: in0(0,1) in1(1) -> out(0,1); add(in0,in1)->out",
// CHECK: "ops": "rank 2: in0(0,1) -> out(0); mul(in0,in0)->t0; reduce_mean[count=8](t0)->out",
// CHECK: "ops": "rank 3: in0(0,1,2) -> out(0,2); reduce_max(in0)->out",
// CHECK: "ops": "rank 3: in0(0,1,2) in1(0,2) -> out(0,2); max_tie(in0,in1)->t0; reduce_sum(t0)->out",
// CHECK: "ops": "rank 3: in0(0,2) in1(0,1,2) in2(0,2) in3(0,2) -> out(0,1,2); reduce_max_grad(in0,in1,in2,in3)->out",
// CHECK: "ops": "rank 2: in0(0,1) in1(0,1) -> out(1); mul(in0,in1)->t0; reduce_sum(t0)->out",
// CHECK: "ops": "rank 2 rows 1: in0(0,1) in1(0,1) in2(0) -> out(0,1); mul(in0,in1)->t0; reduce_sum(t0)->t1; rsqrt_grad(t1,in2)->t2; reduce_mean_grad[count=8](t2)->out",

// CHECK: "forward": [
// CHECK: "batched": true,
// CHECK-NEXT: "kernel": 0,
// CHECK-NEXT: "op": "kernel",
// CHECK-NEXT: "operands": [
// CHECK-NEXT: 0,
// CHECK-NEXT: 2
// CHECK-NEXT: ],
// CHECK-NEXT: "results": [
// CHECK-NEXT: 3
// CHECK-NEXT: ],
// CHECK-NEXT: "space": [
// CHECK-NEXT: 2,
// CHECK-NEXT: 32
// CHECK-NEXT: ]
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
