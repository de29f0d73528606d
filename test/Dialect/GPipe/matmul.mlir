// gpipe.matmul: numpy.matmul over batch dimensions that broadcast, either
// operand's matrix transposed in place. It parses, verifies and round-trips;
// its cost is 2 M N K per result matrix.
// RUN: gpipe-opt %s --verify-roundtrip | FileCheck %s
// RUN: gpipe-opt %s --mlir-print-op-generic | gpipe-opt | FileCheck %s
// RUN: gpipe-opt %s -gpipe-estimate-cost | FileCheck %s --check-prefix=COST

// CHECK-LABEL: gpipe.model @attention batch 2 {
// CHECK: %[[S:.*]] = gpipe.matmul %{{.*}}, %{{.*}} transpose_rhs : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
// CHECK: gpipe.matmul %[[S]], %{{.*}} : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
// CHECK-LABEL: gpipe.model @broadcast batch 2 {
// CHECK: gpipe.matmul %{{.*}}, %{{.*}} transpose_lhs transpose_rhs : (tensor<2x4x16x8xf32>, tensor<4x3x16xf32>) -> tensor<2x4x8x3xf32>

// COST: gpipe.matmul {{.*}}flops = 16384,
// COST: gpipe.matmul {{.*}}flops = 16384,
// COST: gpipe.matmul {{.*}}flops = 6144,
gpipe.model @attention batch 2 {
  %q = gpipe.input "q" : tensor<2x4x8x16xf32>
  %y = gpipe.layer "l" -> tensor<2x4x8x16xf32> {
    %s = gpipe.matmul %q, %q transpose_rhs : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
    %c = gpipe.matmul %s, %q : (tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
    gpipe.yield %c : tensor<2x4x8x16xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %q : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

gpipe.model @broadcast batch 2 {
  %t = gpipe.input "t" : tensor<2x4x16x8xf32>
  %u = gpipe.input "u" : tensor<2x4x8x3xf32>
  %z = gpipe.layer "m" -> tensor<2x4x8x3xf32> {
    %w = gpipe.param "w" normal : tensor<4x3x16xf32>
    %0 = gpipe.matmul %t, %w transpose_lhs transpose_rhs : (tensor<2x4x16x8xf32>, tensor<4x3x16xf32>) -> tensor<2x4x8x3xf32>
    gpipe.yield %0 : tensor<2x4x8x3xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %z, %u : (tensor<2x4x8x3xf32>, tensor<2x4x8x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
