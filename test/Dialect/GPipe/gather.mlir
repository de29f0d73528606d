// gather prints its input and indices in brackets, its axis, `batched` when
// the indices are per example, and the types; gather_grad (a backward op)
// alike. All parse, verify and round-trip (generic form too).
// RUN: gpipe-opt %s --verify-roundtrip | FileCheck %s
// RUN: gpipe-opt %s --mlir-print-op-generic | gpipe-opt | FileCheck %s

// CHECK-LABEL: gpipe.model @gathers batch 2 {
// CHECK: %[[I:.*]] = gpipe.cast %{{.*}} : tensor<3xf32> -> tensor<3xi32>
// CHECK: %[[G:.*]] = gpipe.gather %{{.*}}[%[[I]]] axis 1 : tensor<2x4x8xf32>, tensor<3xi32> -> tensor<2x3x8xf32>
// CHECK: gpipe.gather %[[G]][%{{.*}}] axis 2 batched : tensor<2x3x8xf32>, tensor<2x5xi32> -> tensor<2x3x5xf32>
// CHECK-LABEL: gpipe.stage_backward @s
// CHECK: gpipe.gather_grad %{{.*}}[%{{.*}}] axis 1 : tensor<2x3xf32>, tensor<3xi32> -> tensor<2x6xf32>
// CHECK: gpipe.gather_grad %{{.*}}[%{{.*}}] axis 1 batched : tensor<2x3xf32>, tensor<2x3xi32> -> tensor<2x6xf32>
gpipe.model @gathers batch 2 {
  %x = gpipe.input "x" : tensor<2x4x8xf32>
  %ids = gpipe.input "ids" : tensor<2x5xi32>
  %y = gpipe.layer "l" -> tensor<2x3x5xf32> {
    %p = gpipe.param "positions" zeros frozen : tensor<3xf32>
    %i = gpipe.cast %p : tensor<3xf32> -> tensor<3xi32>
    %g = gpipe.gather %x[%i] axis 1 : tensor<2x4x8xf32>, tensor<3xi32> -> tensor<2x3x8xf32>
    %b = gpipe.gather %g[%ids] axis 2 batched : tensor<2x3x8xf32>, tensor<2x5xi32> -> tensor<2x3x5xf32>
    gpipe.yield %b : tensor<2x3x5xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %y : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

gpipe.model @grad batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %ids = gpipe.input "ids" : tensor<2x3xi32>
  %s = gpipe.stage @s index 0 (%x, %ids) : (tensor<2x3xf32>, tensor<2x3xi32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<2x3xf32>, %arg1: tensor<2x3xi32>):
    %a = gpipe.layer "a" -> tensor<f32> {
      %0 = gpipe.mse_loss %arg0, %arg0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.yield %a : tensor<f32>
  }
  gpipe.stage_backward @s : (tensor<2x3xf32>, tensor<2x3xi32>) -> () {
  ^bb0(%arg0: tensor<2x3xf32>, %arg1: tensor<2x3xi32>):
    %r = gpipe.reduce_sum %arg0 axes [0] : tensor<2x3xf32> -> tensor<3xf32>
    %i = gpipe.cast %r : tensor<3xf32> -> tensor<3xi32>
    %g = gpipe.gather_grad %arg0[%i] axis 1 : tensor<2x3xf32>, tensor<3xi32> -> tensor<2x6xf32>
    %h = gpipe.gather_grad %arg0[%arg1] axis 1 batched : tensor<2x3xf32>, tensor<2x3xi32> -> tensor<2x6xf32>
    gpipe.yield
  }
  gpipe.return %s : tensor<f32>
}
