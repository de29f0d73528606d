// A schedule file that cannot run is refused before anything is unrolled,
// naming the device, its action and the micro-batch; for a deadlock, every
// device of the wait cycle.
// RUN: not gpipe-opt %s -gpipe-unroll-schedule="num-microbatches=3 schedule-file=%S/Inputs/deadlock.sched" 2>&1 | FileCheck %s --check-prefix=DEADLOCK
// RUN: not gpipe-opt %s -gpipe-unroll-schedule="num-microbatches=3 schedule-file=%S/Inputs/twice.sched" 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not gpipe-opt %s -gpipe-unroll-schedule="num-microbatches=3 schedule-file=%S/Inputs/three-devices.sched" 2>&1 | FileCheck %s --check-prefix=DEVICES
// RUN: not gpipe-opt %s -gpipe-unroll-schedule="num-microbatches=2 schedule-file=%S/Inputs/1f1b-k2-m3.sched" 2>&1 | FileCheck %s --check-prefix=RANGE
// RUN: not gpipe-opt %s -gpipe-unroll-schedule="num-microbatches=3 schedule-file=%S/Inputs/bad-action.sched" 2>&1 | FileCheck %s --check-prefix=PARSE
// RUN: not gpipe-opt %s -gpipe-unroll-schedule="num-microbatches=3 schedule-file=%S/Inputs/weights-early.sched" 2>&1 | FileCheck %s --check-prefix=EARLY
// RUN: not gpipe-opt %s -gpipe-unroll-schedule="num-microbatches=3 schedule-file=%t.missing" 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not gpipe-opt %s -gpipe-unroll-schedule="num-microbatches=3 schedule=1f1b schedule-file=%S/Inputs/1f1b-k2-m3.sched" 2>&1 | FileCheck %s --check-prefix=BOTH
// RUN: not gpipe-opt %s -gpipe-unroll-schedule="num-microbatches=3 schedule=pipedream" 2>&1 | FileCheck %s --check-prefix=KIND

// DEADLOCK: error: 'gpipe.model' op cannot run the schedule in '{{.*}}deadlock.sched': the schedule deadlocks: device 0 action #1 (backward of micro-batch 0) waits for device 1's backward of micro-batch 0 (its action #2); device 1 action #1 (forward of micro-batch 1) waits for device 0's forward of micro-batch 1 (its action #2)
// TWICE: error: 'gpipe.model' op cannot run the schedule in '{{.*}}twice.sched': device 1 action #4 (forward of micro-batch 1) repeats action #2: each runs once per micro-batch
// DEVICES: error: 'gpipe.model' op cannot run the schedule in '{{.*}}three-devices.sched': the schedule has 3 device(s), expected 2 (one per stage)
// RANGE: error: 'gpipe.model' op cannot run the schedule in '{{.*}}1f1b-k2-m3.sched': device 0 action #3 (forward of micro-batch 2) names a micro-batch out of range: the schedule has 2 micro-batch(es)
// PARSE: error: schedule file '{{.*}}bad-action.sched', line 2: expected an action such as F0 (forward of micro-batch 0), B3 (backward of micro-batch 3), W3 (its weight-gradient backward, when B and W are split) or F0@2 (forward of micro-batch 0 in stage 2, when devices run several), got 'X0'
// EARLY: error: 'gpipe.model' op cannot run the schedule in '{{.*}}weights-early.sched': device 0 action #5 (weight-gradient backward of micro-batch 1) runs before its backward (action #6)
// MISSING: error: cannot open schedule file '{{.*}}.missing': No such file or directory
// BOTH: error: expects either schedule=1f1b or schedule-file, not both
// KIND: for the --schedule option: Cannot find option named 'pipedream'!

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
