// Comparisons give i1 tensors (broadcasting their f32 operands), and/or/not
// combine them, where selects between two f32 operands (the three
// broadcasting), cast converts between f32, i32 and i1. All parse, verify
// and round-trip (generic form too).
// RUN: gpipe-opt %s --verify-roundtrip | FileCheck %s
// RUN: gpipe-opt %s --mlir-print-op-generic | gpipe-opt | FileCheck %s

// CHECK-LABEL: gpipe.model @mask batch 2 {
// CHECK: %[[C:.*]] = gpipe.gt %{{.*}}, %{{.*}} : tensor<2x4x8xf32>, tensor<8xf32> -> tensor<2x4x8xi1>
// CHECK: %[[D:.*]] = gpipe.le %{{.*}}, %{{.*}} : tensor<4x1xf32>, tensor<8xf32> -> tensor<4x8xi1>
// CHECK: gpipe.eq
// CHECK: gpipe.lt
// CHECK: gpipe.ge
// CHECK: %[[E:.*]] = gpipe.and %[[C]], %[[D]] : tensor<2x4x8xi1>, tensor<4x8xi1> -> tensor<2x4x8xi1>
// CHECK: gpipe.or
// CHECK: %[[N:.*]] = gpipe.not %[[E]] : tensor<2x4x8xi1>
// CHECK: %[[W:.*]] = gpipe.where %[[N]], %{{.*}}, %{{.*}} : tensor<2x4x8xi1>, tensor<2x4x8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>
// CHECK: %[[I:.*]] = gpipe.cast %[[W]] : tensor<2x4x8xf32> -> tensor<2x4x8xi32>
// CHECK: gpipe.cast %[[I]] : tensor<2x4x8xi32> -> tensor<2x4x8xf32>
// CHECK: gpipe.cast %[[N]] : tensor<2x4x8xi1> -> tensor<2x4x8xf32>
gpipe.model @mask batch 2 {
  %x = gpipe.input "x" : tensor<2x4x8xf32>
  %y = gpipe.layer "l" -> tensor<2x4x8xf32> {
    %p = gpipe.param "p" normal : tensor<8xf32>
    %q = gpipe.param "q" normal : tensor<4x1xf32>
    %c = gpipe.gt %x, %p : tensor<2x4x8xf32>, tensor<8xf32> -> tensor<2x4x8xi1>
    %d = gpipe.le %q, %p : tensor<4x1xf32>, tensor<8xf32> -> tensor<4x8xi1>
    %e0 = gpipe.eq %x, %x : tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xi1>
    %e1 = gpipe.lt %x, %x : tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xi1>
    %e2 = gpipe.ge %x, %x : tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xi1>
    %e = gpipe.and %c, %d : tensor<2x4x8xi1>, tensor<4x8xi1> -> tensor<2x4x8xi1>
    %o = gpipe.or %e0, %e1 : tensor<2x4x8xi1>, tensor<2x4x8xi1> -> tensor<2x4x8xi1>
    %n = gpipe.not %e : tensor<2x4x8xi1>
    %m = gpipe.mul %x, %q : tensor<2x4x8xf32>, tensor<4x1xf32> -> tensor<2x4x8xf32>
    %w = gpipe.where %n, %m, %p : tensor<2x4x8xi1>, tensor<2x4x8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>
    %i = gpipe.cast %w : tensor<2x4x8xf32> -> tensor<2x4x8xi32>
    %f = gpipe.cast %i : tensor<2x4x8xi32> -> tensor<2x4x8xf32>
    %b = gpipe.cast %n : tensor<2x4x8xi1> -> tensor<2x4x8xf32>
    %g = gpipe.add %f, %b : tensor<2x4x8xf32>
    %z = gpipe.add %g, %w : tensor<2x4x8xf32>
    gpipe.yield %z : tensor<2x4x8xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
