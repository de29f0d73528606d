// gpipe-compile runs cost estimation, partitioning, stage formation, channel insertion, unrolling and verification in one pipeline.
// RUN: gpipe-opt %s -gpipe-compile="num-stages=2 num-microbatches=3" | FileCheck %s
// RUN: gpipe-opt %s -gpipe-compile="num-stages=2 num-microbatches=2 objective=bottleneck memory-cap=1MiB remat=none" | FileCheck %s --check-prefix=OPTS

// Batch 6 in 3 micro-batches of 2 rows; two dense layers of equal cost, one per stage, the loss with the second.
// CHECK-LABEL: gpipe.model @two
// CHECK-SAME: objective = "variance"
// CHECK: %[[X:.*]] = gpipe.input "x"
// CHECK: %[[Y:.*]] = gpipe.input "y"
// CHECK: %[[S0:.*]] = gpipe.stage @stage0 index 0 (%[[X]])
// CHECK: gpipe.layer "fc1"
// CHECK: gpipe.send %[[S0]] from 0 to 1 channel 0 : tensor<6x4xf32>
// CHECK: %[[R:.*]] = gpipe.recv from 0 to 1 channel 0 : tensor<6x4xf32>
// CHECK: gpipe.stage @stage1 index 1 (%[[R]], %[[Y]])
// CHECK: gpipe.layer "fc2"
// CHECK: gpipe.layer "loss"
// CHECK: gpipe.schedule @two_schedule model @two microbatches 3 rows [2, 2, 2] send_window 2 {
// CHECK: gpipe.program device 0 attributes {gpipe.memory = {{{.*}}peak_bytes{{.*}}} {
// CHECK-NEXT: gpipe.load_input "x" mb 0 rows 2
// CHECK-NEXT: gpipe.forward @stage0 mb 0 rows 2
// CHECK-NEXT: gpipe.send_activation to 1 mb 0 channel 0 : tensor<2x4xf32>
// CHECK-COUNT-2: gpipe.forward @stage0
// CHECK: gpipe.recv_gradient from 1 mb 2 channel 0 : tensor<2x4xf32>
// CHECK-NEXT: gpipe.backward @stage0 mb 2 rows 2
// CHECK-COUNT-2: gpipe.backward @stage0
// CHECK-NEXT: gpipe.wait_send_activation to 1 mb 1 channel 0
// CHECK-NEXT: gpipe.wait_send_activation to 1 mb 2 channel 0
// CHECK-NEXT: gpipe.optimizer_step
// CHECK: gpipe.program device 1 attributes {gpipe.memory = {{{.*}}peak_bytes{{.*}}} {
// CHECK-NEXT: gpipe.recv_activation from 0 mb 0 channel 0 : tensor<2x4xf32>
// CHECK-NEXT: gpipe.load_input "y" mb 0 rows 2
// CHECK-NEXT: gpipe.forward @stage1 mb 0 rows 2
// CHECK: gpipe.forward @stage1 mb 2 rows 2
// CHECK-NEXT: gpipe.backward @stage1 mb 2 rows 2
// CHECK-NEXT: gpipe.send_gradient to 0 mb 2 channel 0 : tensor<2x4xf32>
// CHECK: gpipe.optimizer_step

// OPTS: objective = "bottleneck"
// OPTS-SAME: remat = "none"
// OPTS: gpipe.schedule @two_schedule model @two microbatches 2 rows [3, 3]

gpipe.model @two batch 6 {
  %x = gpipe.input "x" : tensor<6x4xf32>
  %y = gpipe.input "y" : tensor<6x4xf32>
  %h = gpipe.layer "fc1" -> tensor<6x4xf32> {
    %w = gpipe.param "fc1.w" glorot_uniform : tensor<4x4xf32>
    %0 = gpipe.dense %x, %w : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
    gpipe.yield %0 : tensor<6x4xf32>
  }
  %o = gpipe.layer "fc2" -> tensor<6x4xf32> {
    %w = gpipe.param "fc2.w" glorot_uniform : tensor<4x4xf32>
    %0 = gpipe.dense %h, %w : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
    gpipe.yield %0 : tensor<6x4xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %o, %y : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
