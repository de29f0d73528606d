// schedule=1f1b: device 0 warms up with K-1 = 1 forward, then each device runs
// one forward and one backward in turn. Transfers are placed where a
// simulation of the devices puts them: device 1 receives activation 1 before
// it sends gradient 0, so even blocking sends cannot deadlock. A hand-written
// schedule file with the same order gives the same programs.
// RUN: gpipe-opt %s -gpipe-unroll-schedule="num-microbatches=3 schedule=1f1b" -gpipe-verify-schedule | FileCheck %s
// RUN: gpipe-opt %s -gpipe-unroll-schedule="num-microbatches=3 schedule-file=%S/Inputs/1f1b-k2-m3.sched" -gpipe-verify-schedule | FileCheck %s

// CHECK-LABEL: gpipe.schedule @mlp_schedule model @mlp microbatches 3 rows [3, 2, 2] {
// CHECK-NEXT:    gpipe.program device 0 {
// CHECK-NEXT:      gpipe.load_input "x" mb 0 rows 3
// CHECK-NEXT:      gpipe.forward @stage0 mb 0 rows 3
// CHECK-NEXT:      gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
// CHECK-NEXT:      gpipe.load_input "x" mb 1 rows 2
// CHECK-NEXT:      gpipe.forward @stage0 mb 1 rows 2
// CHECK-NEXT:      gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
// CHECK-NEXT:      gpipe.backward @stage0 mb 0 rows 3
// CHECK-NEXT:      gpipe.load_input "x" mb 2 rows 2
// CHECK-NEXT:      gpipe.forward @stage0 mb 2 rows 2
// CHECK-NEXT:      gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.send_activation to 1 mb 2 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.backward @stage0 mb 1 rows 2
// CHECK-NEXT:      gpipe.recv_gradient from 1 mb 2 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.backward @stage0 mb 2 rows 2
// CHECK-NEXT:      gpipe.optimizer_step
// CHECK-NEXT:    }
// CHECK-NEXT:    gpipe.program device 1 {
// CHECK-NEXT:      gpipe.recv_activation from 0 mb 0 channel 0 : tensor<3x4xf32>
// CHECK-NEXT:      gpipe.load_input "labels" mb 0 rows 3
// CHECK-NEXT:      gpipe.forward @stage1 mb 0 rows 3
// CHECK-NEXT:      gpipe.backward @stage1 mb 0 rows 3
// CHECK-NEXT:      gpipe.recv_activation from 0 mb 1 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
// CHECK-NEXT:      gpipe.load_input "labels" mb 1 rows 2
// CHECK-NEXT:      gpipe.forward @stage1 mb 1 rows 2
// CHECK-NEXT:      gpipe.backward @stage1 mb 1 rows 2
// CHECK-NEXT:      gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.recv_activation from 0 mb 2 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.load_input "labels" mb 2 rows 2
// CHECK-NEXT:      gpipe.forward @stage1 mb 2 rows 2
// CHECK-NEXT:      gpipe.backward @stage1 mb 2 rows 2
// CHECK-NEXT:      gpipe.send_gradient to 0 mb 2 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.optimizer_step
// CHECK-NEXT:    }
// CHECK-NEXT:  }
// CHECK-NEXT:}
gpipe.model @mlp batch 7 {
  %x = gpipe.input "x" : tensor<7x4xf32>
  %labels = gpipe.input "labels" : tensor<7xi32>
  %0 = gpipe.stage @stage0 index 0 (%x) : (tensor<7x4xf32>) -> tensor<7x4xf32> {
  ^bb0(%arg0: tensor<7x4xf32>):
    %1 = gpipe.layer "fc1" -> tensor<7x4xf32> {
      %w = gpipe.param "fc1.w" glorot_uniform : tensor<4x4xf32>
      %2 = gpipe.dense %arg0, %w : (tensor<7x4xf32>, tensor<4x4xf32>) -> tensor<7x4xf32>
      gpipe.yield %2 : tensor<7x4xf32>
    }
    gpipe.yield %1 : tensor<7x4xf32>
  }
  gpipe.send %0 from 0 to 1 channel 0 : tensor<7x4xf32>
  %r = gpipe.recv from 0 to 1 channel 0 : tensor<7x4xf32>
  %3 = gpipe.stage @stage1 index 1 (%r, %labels) : (tensor<7x4xf32>, tensor<7xi32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<7x4xf32>, %arg1: tensor<7xi32>):
    %1 = gpipe.layer "loss" -> tensor<f32> {
      %2 = gpipe.softmax_cross_entropy %arg0, %arg1 : (tensor<7x4xf32>, tensor<7xi32>) -> tensor<f32>
      gpipe.yield %2 : tensor<f32>
    }
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %3 : tensor<f32>
}
