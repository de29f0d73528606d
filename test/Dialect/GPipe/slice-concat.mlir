// slice prints its starts, steps and result type, concat its axis and the
// inputs' types; slice_grad (a backward op) its starts and steps. All parse,
// verify and round-trip (generic form too).
// RUN: gpipe-opt %s --verify-roundtrip | FileCheck %s
// RUN: gpipe-opt %s --mlir-print-op-generic | gpipe-opt | FileCheck %s

// CHECK-LABEL: gpipe.model @layout batch 2 {
// CHECK: %[[LO:.*]] = gpipe.slice %{{.*}} starts [0, 0, 0] steps [1, 1, 1] : tensor<2x4x8xf32> -> tensor<2x4x4xf32>
// CHECK: %[[EV:.*]] = gpipe.slice %{{.*}} starts [0, 1, 4] steps [1, 2, 1] : tensor<2x4x8xf32> -> tensor<2x2x4xf32>
// CHECK: gpipe.concat %[[LO]], %{{.*}}, %[[LO]] axis 1 : tensor<2x4x4xf32>, tensor<2x2x4xf32>, tensor<2x4x4xf32> -> tensor<2x10x4xf32>
// CHECK-LABEL: gpipe.stage_backward @s
// CHECK: gpipe.slice_grad %{{.*}} starts [0, 3] steps [1, 2] : tensor<2x2xf32> -> tensor<2x6xf32>
gpipe.model @layout batch 2 {
  %x = gpipe.input "x" : tensor<2x4x8xf32>
  %y = gpipe.layer "l" -> tensor<2x10x4xf32> {
    %lo = gpipe.slice %x starts [0, 0, 0] steps [1, 1, 1] : tensor<2x4x8xf32> -> tensor<2x4x4xf32>
    %ev = gpipe.slice %x starts [0, 1, 4] steps [1, 2, 1] : tensor<2x4x8xf32> -> tensor<2x2x4xf32>
    %c = gpipe.concat %lo, %ev, %lo axis 1 : tensor<2x4x4xf32>, tensor<2x2x4xf32>, tensor<2x4x4xf32> -> tensor<2x10x4xf32>
    gpipe.yield %c : tensor<2x10x4xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %y : (tensor<2x10x4xf32>, tensor<2x10x4xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

gpipe.model @grad batch 2 {
  %x = gpipe.input "x" : tensor<2x2xf32>
  %s = gpipe.stage @s index 0 (%x) : (tensor<2x2xf32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<2x2xf32>):
    %a = gpipe.layer "a" -> tensor<f32> {
      %0 = gpipe.mse_loss %arg0, %arg0 : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.yield %a : tensor<f32>
  }
  gpipe.stage_backward @s : (tensor<2x2xf32>) -> () {
  ^bb0(%arg0: tensor<2x2xf32>):
    %g = gpipe.slice_grad %arg0 starts [0, 3] steps [1, 2] : tensor<2x2xf32> -> tensor<2x6xf32>
    gpipe.yield
  }
  gpipe.return %s : tensor<f32>
}
