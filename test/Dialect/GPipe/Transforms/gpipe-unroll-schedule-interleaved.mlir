// schedule=interleaved with num-virtual-stages=2: four stages on K = 2
// devices, round-robin (device 0 runs stages 0 and 2, device 1 stages 1 and
// 3). Megatron-LM's order, written out by hand for M = 2: the micro-batches
// go through a device's stages in groups of K, forwards through stages 0..V-1
// and backwards through V-1..0; device d warms up with 2(K-d-1) + (V-1)K
// forwards (4 on device 0: all of them; 2 on device 1), then alternates:
//   device 0: F0@0 F1@0 F0@2 F1@2 B0@2 B1@2 B0@0 B1@0
//   device 1: F0@1 F1@1 F0@3 B0@3 F1@3 B1@3 B0@1 B1@1
// Loads and transfers name the stage they serve, and each transfer has the
// type of its own boundary (4, 8 and 3 columns). The same order written as a
// schedule file gives the same programs; so does another order that runs,
// one micro-batch at a time.
// RUN: gpipe-opt %s -gpipe-unroll-schedule="num-microbatches=2 schedule=interleaved num-virtual-stages=2" -gpipe-verify-schedule | FileCheck %s
// RUN: gpipe-opt %s -gpipe-unroll-schedule="num-microbatches=2 schedule-file=%S/Inputs/interleaved-k2-v2-m2.sched num-virtual-stages=2" -gpipe-verify-schedule | FileCheck %s
// RUN: gpipe-opt %s -gpipe-unroll-schedule="num-microbatches=2 schedule-file=%S/Inputs/interleaved-one-at-a-time.sched num-virtual-stages=2" -gpipe-verify-schedule | FileCheck %s --check-prefix=SEQUENTIAL
// The round trip through the printer and parser keeps every stage.
// RUN: gpipe-opt %s -gpipe-unroll-schedule="num-microbatches=2 schedule=interleaved num-virtual-stages=2" | gpipe-opt -gpipe-verify-schedule | FileCheck %s

// CHECK-LABEL:   gpipe.schedule @mlp_schedule model @mlp microbatches 2 rows [2, 2] virtual_stages 2 {
// CHECK-NEXT:     gpipe.program device 0 {
// CHECK-NEXT:       gpipe.load_input "x" mb 0 rows 2 stage 0
// CHECK-NEXT:       gpipe.forward @stage0 mb 0 rows 2
// CHECK-NEXT:       gpipe.send_activation to 1 mb 0 channel 0 stage 0 : tensor<2x4xf32>
// CHECK-NEXT:       gpipe.load_input "x" mb 1 rows 2 stage 0
// CHECK-NEXT:       gpipe.forward @stage0 mb 1 rows 2
// CHECK-NEXT:       gpipe.recv_activation from 1 mb 0 channel 0 stage 2 : tensor<2x8xf32>
// CHECK-NEXT:       gpipe.send_activation to 1 mb 1 channel 0 stage 0 : tensor<2x4xf32>
// CHECK-NEXT:       gpipe.forward @stage2 mb 0 rows 2
// CHECK-NEXT:       gpipe.recv_activation from 1 mb 1 channel 0 stage 2 : tensor<2x8xf32>
// CHECK-NEXT:       gpipe.send_activation to 1 mb 0 channel 0 stage 2 : tensor<2x3xf32>
// CHECK-NEXT:       gpipe.forward @stage2 mb 1 rows 2
// CHECK-NEXT:       gpipe.send_activation to 1 mb 1 channel 0 stage 2 : tensor<2x3xf32>
// CHECK-NEXT:       gpipe.recv_gradient from 1 mb 0 channel 0 stage 2 : tensor<2x3xf32>
// CHECK-NEXT:       gpipe.backward @stage2 mb 0 rows 2
// CHECK-NEXT:       gpipe.send_gradient to 1 mb 0 channel 0 stage 2 : tensor<2x8xf32>
// CHECK-NEXT:       gpipe.recv_gradient from 1 mb 1 channel 0 stage 2 : tensor<2x3xf32>
// CHECK-NEXT:       gpipe.backward @stage2 mb 1 rows 2
// CHECK-NEXT:       gpipe.send_gradient to 1 mb 1 channel 0 stage 2 : tensor<2x8xf32>
// CHECK-NEXT:       gpipe.recv_gradient from 1 mb 0 channel 0 stage 0 : tensor<2x4xf32>
// CHECK-NEXT:       gpipe.backward @stage0 mb 0 rows 2
// CHECK-NEXT:       gpipe.recv_gradient from 1 mb 1 channel 0 stage 0 : tensor<2x4xf32>
// CHECK-NEXT:       gpipe.backward @stage0 mb 1 rows 2
// CHECK-NEXT:       gpipe.optimizer_step
// CHECK-NEXT:     }
// CHECK-NEXT:     gpipe.program device 1 {
// CHECK-NEXT:       gpipe.recv_activation from 0 mb 0 channel 0 stage 1 : tensor<2x4xf32>
// CHECK-NEXT:       gpipe.forward @stage1 mb 0 rows 2
// CHECK-NEXT:       gpipe.send_activation to 0 mb 0 channel 0 stage 1 : tensor<2x8xf32>
// CHECK-NEXT:       gpipe.recv_activation from 0 mb 1 channel 0 stage 1 : tensor<2x4xf32>
// CHECK-NEXT:       gpipe.forward @stage1 mb 1 rows 2
// CHECK-NEXT:       gpipe.send_activation to 0 mb 1 channel 0 stage 1 : tensor<2x8xf32>
// CHECK-NEXT:       gpipe.recv_activation from 0 mb 0 channel 0 stage 3 : tensor<2x3xf32>
// CHECK-NEXT:       gpipe.load_input "labels" mb 0 rows 2 stage 3
// CHECK-NEXT:       gpipe.forward @stage3 mb 0 rows 2
// CHECK-NEXT:       gpipe.backward @stage3 mb 0 rows 2
// CHECK-NEXT:       gpipe.recv_activation from 0 mb 1 channel 0 stage 3 : tensor<2x3xf32>
// CHECK-NEXT:       gpipe.send_gradient to 0 mb 0 channel 0 stage 3 : tensor<2x3xf32>
// CHECK-NEXT:       gpipe.load_input "labels" mb 1 rows 2 stage 3
// CHECK-NEXT:       gpipe.forward @stage3 mb 1 rows 2
// CHECK-NEXT:       gpipe.backward @stage3 mb 1 rows 2
// CHECK-NEXT:       gpipe.recv_gradient from 0 mb 0 channel 0 stage 1 : tensor<2x8xf32>
// CHECK-NEXT:       gpipe.send_gradient to 0 mb 1 channel 0 stage 3 : tensor<2x3xf32>
// CHECK-NEXT:       gpipe.backward @stage1 mb 0 rows 2
// CHECK-NEXT:       gpipe.recv_gradient from 0 mb 1 channel 0 stage 1 : tensor<2x8xf32>
// CHECK-NEXT:       gpipe.send_gradient to 0 mb 0 channel 0 stage 1 : tensor<2x4xf32>
// CHECK-NEXT:       gpipe.backward @stage1 mb 1 rows 2
// CHECK-NEXT:       gpipe.send_gradient to 0 mb 1 channel 0 stage 1 : tensor<2x4xf32>
// CHECK-NEXT:       gpipe.optimizer_step
// CHECK-NEXT:     }
// CHECK-NEXT:   }

// SEQUENTIAL: gpipe.schedule @mlp_schedule model @mlp microbatches 2 rows [2, 2] virtual_stages 2

gpipe.model @mlp batch 4 {
  %x = gpipe.input "x" : tensor<4x4xf32>
  %labels = gpipe.input "labels" : tensor<4xi32>
  %0 = gpipe.stage @stage0 index 0 (%x) : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%arg0: tensor<4x4xf32>):
    %1 = gpipe.layer "fc1" -> tensor<4x4xf32> {
      %w = gpipe.param "fc1.w" glorot_uniform : tensor<4x4xf32>
      %2 = gpipe.dense %arg0, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
      gpipe.yield %2 : tensor<4x4xf32>
    }
    gpipe.yield %1 : tensor<4x4xf32>
  }
  gpipe.send %0 from 0 to 1 channel 0 : tensor<4x4xf32>
  %r0 = gpipe.recv from 0 to 1 channel 0 : tensor<4x4xf32>
  %3 = gpipe.stage @stage1 index 1 (%r0) : (tensor<4x4xf32>) -> tensor<4x8xf32> {
  ^bb0(%arg0: tensor<4x4xf32>):
    %1 = gpipe.layer "fc2" -> tensor<4x8xf32> {
      %w = gpipe.param "fc2.w" glorot_uniform : tensor<4x8xf32>
      %2 = gpipe.dense %arg0, %w : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
      gpipe.yield %2 : tensor<4x8xf32>
    }
    gpipe.yield %1 : tensor<4x8xf32>
  }
  gpipe.send %3 from 1 to 2 channel 0 : tensor<4x8xf32>
  %r1 = gpipe.recv from 1 to 2 channel 0 : tensor<4x8xf32>
  %4 = gpipe.stage @stage2 index 2 (%r1) : (tensor<4x8xf32>) -> tensor<4x3xf32> {
  ^bb0(%arg0: tensor<4x8xf32>):
    %1 = gpipe.layer "fc3" -> tensor<4x3xf32> {
      %w = gpipe.param "fc3.w" glorot_uniform : tensor<8x3xf32>
      %2 = gpipe.dense %arg0, %w : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
      gpipe.yield %2 : tensor<4x3xf32>
    }
    gpipe.yield %1 : tensor<4x3xf32>
  }
  gpipe.send %4 from 2 to 3 channel 0 : tensor<4x3xf32>
  %r2 = gpipe.recv from 2 to 3 channel 0 : tensor<4x3xf32>
  %5 = gpipe.stage @stage3 index 3 (%r2, %labels) : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<4x3xf32>, %arg1: tensor<4xi32>):
    %1 = gpipe.layer "loss" -> tensor<f32> {
      %2 = gpipe.softmax_cross_entropy %arg0, %arg1 : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32>
      gpipe.yield %2 : tensor<f32>
    }
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %5 : tensor<f32>
}
