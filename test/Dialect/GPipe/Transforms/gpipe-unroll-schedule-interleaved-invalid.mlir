// Interleaving that cannot run is refused before anything is unrolled: a
// schedule that runs one stage per device, virtual stages that do not divide
// the stages or leave one device, a schedule file that deadlocks (the cycle
// names each stage), that names a stage its device does not run, or that is
// written for fewer devices than stages without num-virtual-stages.
// RUN: not gpipe-opt %s -gpipe-unroll-schedule="num-microbatches=2 schedule=1f1b num-virtual-stages=2" 2>&1 | FileCheck %s --check-prefix=ONE
// RUN: not gpipe-opt %s -gpipe-unroll-schedule="num-microbatches=2 schedule=interleaved num-virtual-stages=3" 2>&1 | FileCheck %s --check-prefix=DIVIDE
// RUN: not gpipe-opt %s -gpipe-unroll-schedule="num-microbatches=2 schedule=interleaved num-virtual-stages=4" 2>&1 | FileCheck %s --check-prefix=DEVICES
// RUN: not gpipe-opt %s -gpipe-unroll-schedule="num-microbatches=2 schedule=interleaved num-virtual-stages=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not gpipe-opt %s -gpipe-unroll-schedule="num-microbatches=2 schedule-file=%S/Inputs/interleaved-deadlock.sched num-virtual-stages=2" 2>&1 | FileCheck %s --check-prefix=DEADLOCK
// RUN: printf 'device 0: F0@1\ndevice 1: F0@1\n' > %t.wrong-stage.sched
// RUN: not gpipe-opt %s -gpipe-unroll-schedule="num-microbatches=2 schedule-file=%t.wrong-stage.sched num-virtual-stages=2" 2>&1 | FileCheck %s --check-prefix=STAGE
// RUN: not gpipe-opt %s -gpipe-unroll-schedule="num-microbatches=2 schedule-file=%S/Inputs/interleaved-k2-v2-m2.sched" 2>&1 | FileCheck %s --check-prefix=HINT

// ONE: error: 'gpipe.model' op cannot be scheduled: the 1f1b schedule runs one stage per device, got 2 virtual stages (only the interleaved schedule runs more)
// DIVIDE: error: 'gpipe.model' op cannot be scheduled: 4 stages cannot be split into 3 virtual stages per device: 3 must divide the stages
// DEVICES: error: 'gpipe.model' op cannot be scheduled: interleaving needs at least 2 devices, got 1 for 4 stages in 4 virtual stages
// ZERO: error: 'gpipe.model' op cannot be scheduled: the number of virtual stages must be at least 1
// DEADLOCK: error: 'gpipe.model' op cannot run the schedule in '{{.*}}interleaved-deadlock.sched': the schedule deadlocks: device 0 action #1 (backward of micro-batch 0 in stage 0) waits for device 1's backward of micro-batch 0 in stage 1 (its action #3); device 1 action #1 (forward of micro-batch 0 in stage 3) waits for device 0's forward of micro-batch 0 in stage 2 (its action #2)
// STAGE: error: schedule file '{{.*}}wrong-stage.sched', line 1: device 0 does not run stage 1: 2 devices run the stages round-robin, device 0 runs stages 0, 2, ...
// HINT: error: 'gpipe.model' op cannot run the schedule in '{{.*}}interleaved-k2-v2-m2.sched': the schedule has 2 device(s), expected 4 (one per stage), or virtual-stages=2 for 2 devices running 2 stages each

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
