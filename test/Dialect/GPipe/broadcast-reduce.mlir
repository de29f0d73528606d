// Broadcasting binary ops print their three types only when they differ;
// the reductions print their axes and result type (keepdims or not); the
// layout ops their result type (and a transpose its permutation). All
// parse, verify and round-trip (generic form too).
// RUN: gpipe-opt %s --verify-roundtrip | FileCheck %s
// RUN: gpipe-opt %s --mlir-print-op-generic | gpipe-opt | FileCheck %s

// CHECK-LABEL: gpipe.model @broadcasting batch 2 {
// CHECK: %[[S:.*]] = gpipe.mul %{{.*}}, %{{.*}} : tensor<2x4x8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>
// CHECK: %[[T:.*]] = gpipe.add %[[S]], %{{.*}} : tensor<2x4x8xf32>, tensor<4x1xf32> -> tensor<2x4x8xf32>
// CHECK: gpipe.add %[[T]], %[[T]] : tensor<2x4x8xf32>
// CHECK: gpipe.sub %{{.*}}, %{{.*}} : tensor<2x4x1xf32>, tensor<2x1x8xf32> -> tensor<2x4x8xf32>
// CHECK: gpipe.reduce_sum %{{.*}} axes [2] : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
// CHECK: gpipe.reduce_mean %{{.*}} axes [1, 2] : tensor<2x4x8xf32> -> tensor<2xf32>
// CHECK: gpipe.reduce_max %{{.*}} axes [1] : tensor<2x4x8xf32> -> tensor<2x1x8xf32>
// CHECK: gpipe.broadcast_to %{{.*}} : tensor<2x1x8xf32> -> tensor<2x4x8xf32>
// CHECK: gpipe.broadcast_to %{{.*}} batch : tensor<1x4x8xf32> -> tensor<2x4x8xf32>
// CHECK: gpipe.sum_to %{{.*}} : tensor<2x4x8xf32> -> tensor<4x8xf32>
// CHECK: gpipe.reshape %{{.*}} : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
// CHECK: gpipe.transpose %{{.*}} perm [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
gpipe.model @broadcasting batch 2 {
  %x = gpipe.input "x" : tensor<2x4x8xf32>
  %y = gpipe.layer "ops" -> tensor<2x4x8xf32> {
    %scale = gpipe.param "scale" ones : tensor<8xf32>
    %shift = gpipe.param "shift" zeros : tensor<4x1xf32>
    %0 = gpipe.mul %x, %scale : tensor<2x4x8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>
    %1 = gpipe.add %0, %shift : tensor<2x4x8xf32>, tensor<4x1xf32> -> tensor<2x4x8xf32>
    %2 = gpipe.add %1, %1 : tensor<2x4x8xf32>
    %3 = gpipe.reduce_sum %2 axes [2] : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
    %4 = gpipe.reduce_max %2 axes [1] : tensor<2x4x8xf32> -> tensor<2x1x8xf32>
    %5 = gpipe.sub %3, %4 : tensor<2x4x1xf32>, tensor<2x1x8xf32> -> tensor<2x4x8xf32>
    %6 = gpipe.reduce_sum %5 axes [2] : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
    %7 = gpipe.reduce_mean %5 axes [1, 2] : tensor<2x4x8xf32> -> tensor<2xf32>
    %8 = gpipe.reduce_max %5 axes [1] : tensor<2x4x8xf32> -> tensor<2x1x8xf32>
    %9 = gpipe.broadcast_to %8 : tensor<2x1x8xf32> -> tensor<2x4x8xf32>
    %token = gpipe.sum_to %9 : tensor<2x4x8xf32> -> tensor<1x4x8xf32>
    %tokens = gpipe.broadcast_to %token batch : tensor<1x4x8xf32> -> tensor<2x4x8xf32>
    %10 = gpipe.sum_to %9 : tensor<2x4x8xf32> -> tensor<4x8xf32>
    %11 = gpipe.add %9, %10 : tensor<2x4x8xf32>, tensor<4x8xf32> -> tensor<2x4x8xf32>
    %12 = gpipe.reshape %11 : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
    %13 = gpipe.transpose %12 perm [0, 2, 1, 3] : tensor<2x4x2x4xf32> -> tensor<2x2x4x4xf32>
    %14 = gpipe.transpose %13 perm [0, 2, 1, 3] : tensor<2x2x4x4xf32> -> tensor<2x4x2x4xf32>
    %15 = gpipe.reshape %14 : tensor<2x4x2x4xf32> -> tensor<2x4x8xf32>
    gpipe.yield %15 : tensor<2x4x8xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
