// The general element-wise ops and their gradient ops parse, verify, print as
// checked here and round-trip (generic form too).
// RUN: gpipe-opt %s --verify-roundtrip | FileCheck %s
// RUN: gpipe-opt %s --mlir-print-op-generic | gpipe-opt | FileCheck %s

// CHECK-LABEL: gpipe.model @general batch 2 {
// CHECK: gpipe.neg %[[X:.*]] : tensor<2x3xf32>
// CHECK: gpipe.abs %[[X]] : tensor<2x3xf32>
// CHECK: gpipe.exp %[[X]] : tensor<2x3xf32>
// CHECK: gpipe.log %[[X]] : tensor<2x3xf32>
// CHECK: gpipe.sqrt %[[X]] : tensor<2x3xf32>
// CHECK: gpipe.rsqrt %[[X]] : tensor<2x3xf32>
// CHECK: gpipe.reciprocal %[[X]] : tensor<2x3xf32>
// CHECK: gpipe.sigmoid %[[X]] : tensor<2x3xf32>
// CHECK: gpipe.silu %[[X]] : tensor<2x3xf32>
// CHECK: gpipe.erf %[[X]] : tensor<2x3xf32>
// CHECK: gpipe.sin %[[X]] : tensor<2x3xf32>
// CHECK: gpipe.cos %[[X]] : tensor<2x3xf32>
// CHECK: gpipe.clip %[[X]] min 0.000000e+00 max 6.000000e+00 : tensor<2x3xf32>
// CHECK: gpipe.sub %[[X]], %[[X]] : tensor<2x3xf32>
// CHECK: gpipe.mul %[[X]], %[[X]] : tensor<2x3xf32>
// CHECK: gpipe.div %[[X]], %[[X]] : tensor<2x3xf32>
// CHECK: gpipe.pow %[[X]], %[[X]] : tensor<2x3xf32>
// CHECK: gpipe.max %[[X]], %[[X]] : tensor<2x3xf32>
// CHECK: gpipe.min %[[X]], %[[X]] {cost = #gpipe.cost<flops = 6, param_bytes = 0, activation_bytes = 24>} : tensor<2x3xf32>
gpipe.model @general batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %y = gpipe.layer "ops" -> tensor<2x3xf32> {
    %0 = gpipe.neg %x : tensor<2x3xf32>
    %1 = gpipe.abs %x : tensor<2x3xf32>
    %2 = gpipe.exp %x : tensor<2x3xf32>
    %3 = gpipe.log %x : tensor<2x3xf32>
    %4 = gpipe.sqrt %x : tensor<2x3xf32>
    %5 = gpipe.rsqrt %x : tensor<2x3xf32>
    %6 = gpipe.reciprocal %x : tensor<2x3xf32>
    %7 = gpipe.sigmoid %x : tensor<2x3xf32>
    %8 = gpipe.silu %x : tensor<2x3xf32>
    %9 = gpipe.erf %x : tensor<2x3xf32>
    %10 = gpipe.sin %x : tensor<2x3xf32>
    %11 = gpipe.cos %x : tensor<2x3xf32>
    %c = gpipe.clip %x min 0.0 max 6.0 : tensor<2x3xf32>
    %12 = gpipe.sub %x, %x : tensor<2x3xf32>
    %13 = gpipe.mul %x, %x : tensor<2x3xf32>
    %14 = gpipe.div %x, %x : tensor<2x3xf32>
    %15 = gpipe.pow %x, %x : tensor<2x3xf32>
    %16 = gpipe.max %x, %x : tensor<2x3xf32>
    %17 = gpipe.min %x, %x {cost = #gpipe.cost<flops = 6, param_bytes = 0, activation_bytes = 24>} : tensor<2x3xf32>
    gpipe.yield %17 : tensor<2x3xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
