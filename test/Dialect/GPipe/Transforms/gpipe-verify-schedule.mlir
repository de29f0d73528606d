// gpipe-verify-schedule accepts sound schedules and leaves them unchanged:
// those gpipe-unroll-schedule writes and a hand-written one in another order.
// The hand-written case sits in a nested module so that gpipe-unroll-schedule,
// which schedules the models of the top-level module only, leaves it alone.
// RUN: gpipe-opt %s -split-input-file -gpipe-unroll-schedule=num-microbatches=4 -o %t
// RUN: gpipe-opt %t -split-input-file --pass-pipeline='builtin.module(gpipe-verify-schedule, builtin.module(gpipe-verify-schedule))' -o %t.verified
// RUN: diff %t %t.verified
// RUN: FileCheck %s < %t.verified

// Two stages, a batch of 8 in 4 micro-batches.
// CHECK-LABEL: gpipe.schedule @two_schedule model @two microbatches 4 rows [2, 2, 2, 2] {
// CHECK:         gpipe.program device 0 {
// CHECK:         gpipe.program device 1 {
gpipe.model @two batch 8 {
  %x = gpipe.input "x" : tensor<8x4xf32>
  %labels = gpipe.input "labels" : tensor<8xi32>
  %0 = gpipe.stage @stage0 index 0 (%x) : (tensor<8x4xf32>) -> tensor<8x4xf32> {
  ^bb0(%arg0: tensor<8x4xf32>):
    %1 = gpipe.layer "act" -> tensor<8x4xf32> {
      %2 = gpipe.relu %arg0 : tensor<8x4xf32>
      gpipe.yield %2 : tensor<8x4xf32>
    }
    gpipe.yield %1 : tensor<8x4xf32>
  }
  gpipe.send %0 from 0 to 1 channel 0 : tensor<8x4xf32>
  %r = gpipe.recv from 0 to 1 channel 0 : tensor<8x4xf32>
  %3 = gpipe.stage @stage1 index 1 (%r, %labels) : (tensor<8x4xf32>, tensor<8xi32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<8x4xf32>, %arg1: tensor<8xi32>):
    %1 = gpipe.layer "loss" -> tensor<f32> {
      %2 = gpipe.softmax_cross_entropy %arg0, %arg1 : (tensor<8x4xf32>, tensor<8xi32>) -> tensor<f32>
      gpipe.yield %2 : tensor<f32>
    }
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %3 : tensor<f32>
}

// -----

// Three stages with two channels on the second boundary (a skip connection)
// and the labels read by the last stage; a batch of 6 in 4 uneven micro-batches.
// CHECK-LABEL: gpipe.schedule @skip_schedule model @skip microbatches 4 rows [2, 2, 1, 1] {
// CHECK:         gpipe.send_activation to 2 mb 3 channel 1 : tensor<1x8xf32>
// CHECK:         gpipe.program device 2 {
// CHECK:         gpipe.load_input "labels" mb 0 rows 2
gpipe.model @skip batch 6 {
  %x = gpipe.input "x" : tensor<6x4xf32>
  %labels = gpipe.input "labels" : tensor<6xi32>
  %0 = gpipe.stage @stage0 index 0 (%x) : (tensor<6x4xf32>) -> tensor<6x4xf32> {
  ^bb0(%arg0: tensor<6x4xf32>):
    %1 = gpipe.layer "fc1" -> tensor<6x4xf32> {
      %w = gpipe.param "fc1.w" glorot_uniform : tensor<4x4xf32>
      %2 = gpipe.dense %arg0, %w : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
      gpipe.yield %2 : tensor<6x4xf32>
    }
    gpipe.yield %1 : tensor<6x4xf32>
  }
  gpipe.send %0 from 0 to 1 channel 0 : tensor<6x4xf32>
  %r0 = gpipe.recv from 0 to 1 channel 0 : tensor<6x4xf32>
  %3:2 = gpipe.stage @stage1 index 1 (%r0) : (tensor<6x4xf32>) -> (tensor<6x4xf32>, tensor<6x8xf32>) {
  ^bb0(%arg0: tensor<6x4xf32>):
    %1 = gpipe.layer "fc2" -> tensor<6x8xf32> {
      %w = gpipe.param "fc2.w" glorot_uniform : tensor<4x8xf32>
      %2 = gpipe.dense %arg0, %w : (tensor<6x4xf32>, tensor<4x8xf32>) -> tensor<6x8xf32>
      gpipe.yield %2 : tensor<6x8xf32>
    }
    gpipe.yield %arg0, %1 : tensor<6x4xf32>, tensor<6x8xf32>
  }
  gpipe.send %3#0 from 1 to 2 channel 0 : tensor<6x4xf32>
  gpipe.send %3#1 from 1 to 2 channel 1 : tensor<6x8xf32>
  %r1 = gpipe.recv from 1 to 2 channel 0 : tensor<6x4xf32>
  %r2 = gpipe.recv from 1 to 2 channel 1 : tensor<6x8xf32>
  %4 = gpipe.stage @stage2 index 2 (%r1, %r2, %labels) : (tensor<6x4xf32>, tensor<6x8xf32>, tensor<6xi32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<6x4xf32>, %arg1: tensor<6x8xf32>, %arg2: tensor<6xi32>):
    %1 = gpipe.layer "loss" -> tensor<f32> {
      %w = gpipe.param "fc3.w" glorot_uniform : tensor<8x4xf32>
      %2 = gpipe.dense %arg1, %w : (tensor<6x8xf32>, tensor<8x4xf32>) -> tensor<6x4xf32>
      %5 = gpipe.add %2, %arg0 : tensor<6x4xf32>
      %6 = gpipe.softmax_cross_entropy %5, %arg2 : (tensor<6x4xf32>, tensor<6xi32>) -> tensor<f32>
      gpipe.yield %6 : tensor<f32>
    }
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %4 : tensor<f32>
}

// -----

// One stage: no transfers to check.
// CHECK-LABEL: gpipe.schedule @single_schedule model @single microbatches 4 rows [1, 1, 1, 1] {
// CHECK:         gpipe.program device 0 {
gpipe.model @single batch 4 {
  %x = gpipe.input "x" : tensor<4x2xf32>
  %labels = gpipe.input "labels" : tensor<4xi32>
  %0 = gpipe.stage @stage0 index 0 (%x, %labels) : (tensor<4x2xf32>, tensor<4xi32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<4x2xf32>, %arg1: tensor<4xi32>):
    %1 = gpipe.layer "loss" -> tensor<f32> {
      %2 = gpipe.softmax_cross_entropy %arg0, %arg1 : (tensor<4x2xf32>, tensor<4xi32>) -> tensor<f32>
      gpipe.yield %2 : tensor<f32>
    }
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %0 : tensor<f32>
}

// -----

// A hand-written 1F1B-style schedule (device 1 runs each backward right after
// its forward) with a split of its own choosing, rows [2, 3]: any order that
// cannot deadlock under rendezvous sends and respects the dependences is sound.
// CHECK-LABEL: gpipe.schedule @hand_schedule model @hand microbatches 2 rows [2, 3] {
// CHECK-NEXT:    gpipe.program device 0 {
// CHECK-NEXT:      gpipe.load_input "x" mb 0 rows 2
// CHECK-NEXT:      gpipe.forward @stage0 mb 0 rows 2
// CHECK-NEXT:      gpipe.send_activation to 1 mb 0 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.load_input "x" mb 1 rows 3
// CHECK-NEXT:      gpipe.forward @stage0 mb 1 rows 3
// CHECK-NEXT:      gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.send_activation to 1 mb 1 channel 0 : tensor<3x4xf32>
// CHECK-NEXT:      gpipe.backward @stage0 mb 0 rows 2
// CHECK-NEXT:      gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<3x4xf32>
// CHECK-NEXT:      gpipe.backward @stage0 mb 1 rows 3
// CHECK-NEXT:      gpipe.optimizer_step
// CHECK-NEXT:    }
// CHECK-NEXT:    gpipe.program device 1 {
// CHECK-NEXT:      gpipe.recv_activation from 0 mb 0 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.load_input "labels" mb 0 rows 2
// CHECK-NEXT:      gpipe.forward @stage1 mb 0 rows 2
// CHECK-NEXT:      gpipe.backward @stage1 mb 0 rows 2
// CHECK-NEXT:      gpipe.send_gradient to 0 mb 0 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.recv_activation from 0 mb 1 channel 0 : tensor<3x4xf32>
// CHECK-NEXT:      gpipe.load_input "labels" mb 1 rows 3
// CHECK-NEXT:      gpipe.forward @stage1 mb 1 rows 3
// CHECK-NEXT:      gpipe.backward @stage1 mb 1 rows 3
// CHECK-NEXT:      gpipe.send_gradient to 0 mb 1 channel 0 : tensor<3x4xf32>
// CHECK-NEXT:      gpipe.optimizer_step
// CHECK-NEXT:    }
// CHECK-NEXT:  }
module {
  module @nested {
    gpipe.model @hand batch 5 {
      %x = gpipe.input "x" : tensor<5x4xf32>
      %labels = gpipe.input "labels" : tensor<5xi32>
      %0 = gpipe.stage @stage0 index 0 (%x) : (tensor<5x4xf32>) -> tensor<5x4xf32> {
      ^bb0(%arg0: tensor<5x4xf32>):
        %1 = gpipe.layer "act" -> tensor<5x4xf32> {
          %2 = gpipe.relu %arg0 : tensor<5x4xf32>
          gpipe.yield %2 : tensor<5x4xf32>
        }
        gpipe.yield %1 : tensor<5x4xf32>
      }
      gpipe.send %0 from 0 to 1 channel 0 : tensor<5x4xf32>
      %r = gpipe.recv from 0 to 1 channel 0 : tensor<5x4xf32>
      %3 = gpipe.stage @stage1 index 1 (%r, %labels) : (tensor<5x4xf32>, tensor<5xi32>) -> tensor<f32> {
      ^bb0(%arg0: tensor<5x4xf32>, %arg1: tensor<5xi32>):
        %1 = gpipe.layer "loss" -> tensor<f32> {
          %2 = gpipe.softmax_cross_entropy %arg0, %arg1 : (tensor<5x4xf32>, tensor<5xi32>) -> tensor<f32>
          gpipe.yield %2 : tensor<f32>
        }
        gpipe.yield %1 : tensor<f32>
      }
      gpipe.return %3 : tensor<f32>
    }
    gpipe.schedule @hand_schedule model @hand microbatches 2 rows [2, 3] {
      gpipe.program device 0 {
        gpipe.load_input "x" mb 0 rows 2
        gpipe.forward @stage0 mb 0 rows 2
        gpipe.send_activation to 1 mb 0 channel 0 : tensor<2x4xf32>
        gpipe.load_input "x" mb 1 rows 3
        gpipe.forward @stage0 mb 1 rows 3
        gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<2x4xf32>
        gpipe.send_activation to 1 mb 1 channel 0 : tensor<3x4xf32>
        gpipe.backward @stage0 mb 0 rows 2
        gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<3x4xf32>
        gpipe.backward @stage0 mb 1 rows 3
        gpipe.optimizer_step
      }
      gpipe.program device 1 {
        gpipe.recv_activation from 0 mb 0 channel 0 : tensor<2x4xf32>
        gpipe.load_input "labels" mb 0 rows 2
        gpipe.forward @stage1 mb 0 rows 2
        gpipe.backward @stage1 mb 0 rows 2
        gpipe.send_gradient to 0 mb 0 channel 0 : tensor<2x4xf32>
        gpipe.recv_activation from 0 mb 1 channel 0 : tensor<3x4xf32>
        gpipe.load_input "labels" mb 1 rows 3
        gpipe.forward @stage1 mb 1 rows 3
        gpipe.backward @stage1 mb 1 rows 3
        gpipe.send_gradient to 0 mb 1 channel 0 : tensor<3x4xf32>
        gpipe.optimizer_step
      }
    }
  }
}
