// gpipe-unroll-schedule rejects, with a diagnostic and no schedule, every model
// it cannot split into micro-batches or whose stages are not fully connected by channels.
// RUN: gpipe-opt %s -split-input-file -gpipe-unroll-schedule=num-microbatches=3 -verify-diagnostics
// RUN: not gpipe-opt %s -split-input-file -gpipe-unroll-schedule=num-microbatches=0 2>&1 | FileCheck %s --check-prefix=ZERO

// More micro-batches than rows: a batch of 2 cannot be split into 3.
// ZERO: :[[@LINE+2]]:1: error: 'gpipe.model' op cannot be scheduled: expected at least 1 micro-batch, got 0
// expected-error @+1 {{'gpipe.model' op cannot be scheduled: cannot split a batch of 2 rows into 3 micro-batches: expected at most 2 micro-batches}}
gpipe.model @small batch 2 {
  %x = gpipe.input "x" : tensor<2x4xf32>
  %labels = gpipe.input "labels" : tensor<2xi32>
  %0 = gpipe.stage @stage0 index 0 (%x, %labels) : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<2x4xf32>, %arg1: tensor<2xi32>):
    %1 = gpipe.layer "loss" -> tensor<f32> {
      %2 = gpipe.softmax_cross_entropy %arg0, %arg1 : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
      gpipe.yield %2 : tensor<f32>
    }
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %0 : tensor<f32>
}

// -----

// A model still made of layers has no stages to put on devices.
// expected-error @+1 {{'gpipe.model' op has no stages; run gpipe-form-stages and gpipe-insert-send-recv first}}
gpipe.model @unstaged batch 4 {
  %x = gpipe.input "x" : tensor<4x4xf32>
  %labels = gpipe.input "labels" : tensor<4xi32>
  %loss = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.softmax_cross_entropy %x, %labels : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %loss : tensor<f32>
}

// -----

// A layer left outside the stages would run on no device.
gpipe.model @partly batch 4 {
  %x = gpipe.input "x" : tensor<4x4xf32>
  %labels = gpipe.input "labels" : tensor<4xi32>
  %0 = gpipe.stage @stage0 index 0 (%x) : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%arg0: tensor<4x4xf32>):
    %1 = gpipe.layer "act" -> tensor<4x4xf32> {
      %2 = gpipe.relu %arg0 : tensor<4x4xf32>
      gpipe.yield %2 : tensor<4x4xf32>
    }
    gpipe.yield %1 : tensor<4x4xf32>
  }
  // expected-error @+1 {{'gpipe.layer' op is not in a stage; run gpipe-form-stages first}}
  %loss = gpipe.layer "loss" -> tensor<f32> {
    %1 = gpipe.softmax_cross_entropy %0, %labels : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32>
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %loss : tensor<f32>
}

// -----

// A stage that reads the previous stage's result directly has no channel for it.
gpipe.model @direct batch 4 {
  %x = gpipe.input "x" : tensor<4x4xf32>
  %labels = gpipe.input "labels" : tensor<4xi32>
  %0 = gpipe.stage @stage0 index 0 (%x) : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%arg0: tensor<4x4xf32>):
    %1 = gpipe.layer "act" -> tensor<4x4xf32> {
      %2 = gpipe.relu %arg0 : tensor<4x4xf32>
      gpipe.yield %2 : tensor<4x4xf32>
    }
    gpipe.yield %1 : tensor<4x4xf32>
  }
  // expected-error @+1 {{'gpipe.stage' op reads a result of stage 0 without a channel; run gpipe-insert-send-recv first}}
  %3 = gpipe.stage @stage1 index 1 (%0, %labels) : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<4x4xf32>, %arg1: tensor<4xi32>):
    %1 = gpipe.layer "loss" -> tensor<f32> {
      %2 = gpipe.softmax_cross_entropy %arg0, %arg1 : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32>
      gpipe.yield %2 : tensor<f32>
    }
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %3 : tensor<f32>
}

// -----

// The last stage has no next stage to send to.
gpipe.model @from_last batch 4 {
  %x = gpipe.input "x" : tensor<4x4xf32>
  %labels = gpipe.input "labels" : tensor<4xi32>
  %0 = gpipe.stage @stage0 index 0 (%x, %labels) : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<4x4xf32>, %arg1: tensor<4xi32>):
    %1 = gpipe.layer "loss" -> tensor<f32> {
      %2 = gpipe.softmax_cross_entropy %arg0, %arg1 : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32>
      gpipe.yield %2 : tensor<f32>
    }
    gpipe.yield %1 : tensor<f32>
  }
  // expected-error @+1 {{'gpipe.send' op sends from stage 0 but the last stage is 0}}
  gpipe.send %x from 0 to 1 channel 0 : tensor<4x4xf32>
  gpipe.return %0 : tensor<f32>
}

// -----

// Channel i of a boundary carries result i of the producing stage; here
// channel 1 would carry result 0.
gpipe.model @wrong_result batch 4 {
  %x = gpipe.input "x" : tensor<4x4xf32>
  %labels = gpipe.input "labels" : tensor<4xi32>
  %0 = gpipe.stage @stage0 index 0 (%x) : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%arg0: tensor<4x4xf32>):
    %1 = gpipe.layer "act" -> tensor<4x4xf32> {
      %2 = gpipe.relu %arg0 : tensor<4x4xf32>
      gpipe.yield %2 : tensor<4x4xf32>
    }
    gpipe.yield %1 : tensor<4x4xf32>
  }
  // expected-error @+1 {{'gpipe.send' op expects to send result #1 of stage 0 (channel i of a boundary carries result i of the stage)}}
  gpipe.send %0 from 0 to 1 channel 1 : tensor<4x4xf32>
  %r = gpipe.recv from 0 to 1 channel 1 : tensor<4x4xf32>
  %3 = gpipe.stage @stage1 index 1 (%r, %labels) : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<4x4xf32>, %arg1: tensor<4xi32>):
    %1 = gpipe.layer "loss" -> tensor<f32> {
      %2 = gpipe.softmax_cross_entropy %arg0, %arg1 : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32>
      gpipe.yield %2 : tensor<f32>
    }
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %3 : tensor<f32>
}

// -----

// A channel is split per micro-batch, so it needs the batch as leading
// dimension; a scalar has none.
gpipe.model @scalar_channel batch 4 {
  %x = gpipe.input "x" : tensor<4x4xf32>
  %labels = gpipe.input "labels" : tensor<4xi32>
  %0 = gpipe.stage @stage0 index 0 (%x, %labels) : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<4x4xf32>, %arg1: tensor<4xi32>):
    %1 = gpipe.layer "ce" -> tensor<f32> {
      %2 = gpipe.softmax_cross_entropy %arg0, %arg1 : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32>
      gpipe.yield %2 : tensor<f32>
    }
    gpipe.yield %1 : tensor<f32>
  }
  // expected-error @+1 {{'gpipe.send' op expects a channel with the batch size 4 as leading dimension (it is split per micro-batch), got 'tensor<f32>'}}
  gpipe.send %0 from 0 to 1 channel 0 : tensor<f32>
  %r = gpipe.recv from 0 to 1 channel 0 : tensor<f32>
  %3 = gpipe.stage @stage1 index 1 (%r) : (tensor<f32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<f32>):
    %1 = gpipe.layer "loss" -> tensor<f32> {
      %2 = gpipe.relu %arg0 : tensor<f32>
      gpipe.yield %2 : tensor<f32>
    }
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %3 : tensor<f32>
}

// -----

// Two sends on one channel of a boundary.
gpipe.model @reused batch 4 {
  %x = gpipe.input "x" : tensor<4x4xf32>
  %labels = gpipe.input "labels" : tensor<4xi32>
  %0 = gpipe.stage @stage0 index 0 (%x) : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%arg0: tensor<4x4xf32>):
    %1 = gpipe.layer "act" -> tensor<4x4xf32> {
      %2 = gpipe.relu %arg0 : tensor<4x4xf32>
      gpipe.yield %2 : tensor<4x4xf32>
    }
    gpipe.yield %1 : tensor<4x4xf32>
  }
  gpipe.send %0 from 0 to 1 channel 0 : tensor<4x4xf32>
  // expected-error @+1 {{'gpipe.send' op reuses channel 0 from stage 0}}
  gpipe.send %0 from 0 to 1 channel 0 : tensor<4x4xf32>
  %r = gpipe.recv from 0 to 1 channel 0 : tensor<4x4xf32>
  %3 = gpipe.stage @stage1 index 1 (%r, %labels) : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<4x4xf32>, %arg1: tensor<4xi32>):
    %1 = gpipe.layer "loss" -> tensor<f32> {
      %2 = gpipe.softmax_cross_entropy %arg0, %arg1 : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32>
      gpipe.yield %2 : tensor<f32>
    }
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %3 : tensor<f32>
}

// -----

// Every result of a stage but the last is a channel to the next stage: stage 0
// sends its results 1 and 2 but not result 0.
// expected-error @+1 {{'gpipe.model' op has no channel 0 from stage 0 to stage 1: result #0 of stage 0 is never sent}}
gpipe.model @gap batch 4 {
  %x = gpipe.input "x" : tensor<4x4xf32>
  %labels = gpipe.input "labels" : tensor<4xi32>
  %0:3 = gpipe.stage @stage0 index 0 (%x) : (tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  ^bb0(%arg0: tensor<4x4xf32>):
    %1 = gpipe.layer "act" -> tensor<4x4xf32> {
      %2 = gpipe.relu %arg0 : tensor<4x4xf32>
      gpipe.yield %2 : tensor<4x4xf32>
    }
    gpipe.yield %1, %1, %1 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
  }
  gpipe.send %0#1 from 0 to 1 channel 1 : tensor<4x4xf32>
  gpipe.send %0#2 from 0 to 1 channel 2 : tensor<4x4xf32>
  %r1 = gpipe.recv from 0 to 1 channel 1 : tensor<4x4xf32>
  %r2 = gpipe.recv from 0 to 1 channel 2 : tensor<4x4xf32>
  %3 = gpipe.stage @stage1 index 1 (%r1, %r2, %labels) : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<4x4xf32>, %arg1: tensor<4x4xf32>, %arg2: tensor<4xi32>):
    %1 = gpipe.layer "loss" -> tensor<f32> {
      %2 = gpipe.add %arg0, %arg1 : tensor<4x4xf32>
      %4 = gpipe.softmax_cross_entropy %2, %arg2 : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32>
      gpipe.yield %4 : tensor<f32>
    }
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %3 : tensor<f32>
}

// -----

// A recv is the other end of a send: channel 1 is never sent.
gpipe.model @unsent batch 4 {
  %x = gpipe.input "x" : tensor<4x4xf32>
  %labels = gpipe.input "labels" : tensor<4xi32>
  %0 = gpipe.stage @stage0 index 0 (%x) : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%arg0: tensor<4x4xf32>):
    %1 = gpipe.layer "act" -> tensor<4x4xf32> {
      %2 = gpipe.relu %arg0 : tensor<4x4xf32>
      gpipe.yield %2 : tensor<4x4xf32>
    }
    gpipe.yield %1 : tensor<4x4xf32>
  }
  gpipe.send %0 from 0 to 1 channel 0 : tensor<4x4xf32>
  %r0 = gpipe.recv from 0 to 1 channel 0 : tensor<4x4xf32>
  // expected-error @+1 {{'gpipe.recv' op receives channel 1 from stage 0, which no gpipe.send sends}}
  %r1 = gpipe.recv from 0 to 1 channel 1 : tensor<4x4xf32>
  %3 = gpipe.stage @stage1 index 1 (%r0, %r1, %labels) : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<4x4xf32>, %arg1: tensor<4x4xf32>, %arg2: tensor<4xi32>):
    %1 = gpipe.layer "loss" -> tensor<f32> {
      %2 = gpipe.add %arg0, %arg1 : tensor<4x4xf32>
      %4 = gpipe.softmax_cross_entropy %2, %arg2 : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32>
      gpipe.yield %4 : tensor<f32>
    }
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %3 : tensor<f32>
}

// -----

// One channel received twice.
gpipe.model @received_twice batch 4 {
  %x = gpipe.input "x" : tensor<4x4xf32>
  %labels = gpipe.input "labels" : tensor<4xi32>
  %0 = gpipe.stage @stage0 index 0 (%x) : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%arg0: tensor<4x4xf32>):
    %1 = gpipe.layer "act" -> tensor<4x4xf32> {
      %2 = gpipe.relu %arg0 : tensor<4x4xf32>
      gpipe.yield %2 : tensor<4x4xf32>
    }
    gpipe.yield %1 : tensor<4x4xf32>
  }
  gpipe.send %0 from 0 to 1 channel 0 : tensor<4x4xf32>
  %r0 = gpipe.recv from 0 to 1 channel 0 : tensor<4x4xf32>
  // expected-error @+1 {{'gpipe.recv' op receives channel 0 from stage 0 twice}}
  %r1 = gpipe.recv from 0 to 1 channel 0 : tensor<4x4xf32>
  %3 = gpipe.stage @stage1 index 1 (%r0, %r1, %labels) : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<4x4xf32>, %arg1: tensor<4x4xf32>, %arg2: tensor<4xi32>):
    %1 = gpipe.layer "loss" -> tensor<f32> {
      %2 = gpipe.add %arg0, %arg1 : tensor<4x4xf32>
      %4 = gpipe.softmax_cross_entropy %2, %arg2 : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32>
      gpipe.yield %4 : tensor<f32>
    }
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %3 : tensor<f32>
}

// -----

// Both ends of a channel carry one type: the recv drops a column.
gpipe.model @retyped batch 4 {
  %x = gpipe.input "x" : tensor<4x4xf32>
  %labels = gpipe.input "labels" : tensor<4xi32>
  %0 = gpipe.stage @stage0 index 0 (%x) : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%arg0: tensor<4x4xf32>):
    %1 = gpipe.layer "act" -> tensor<4x4xf32> {
      %2 = gpipe.relu %arg0 : tensor<4x4xf32>
      gpipe.yield %2 : tensor<4x4xf32>
    }
    gpipe.yield %1 : tensor<4x4xf32>
  }
  gpipe.send %0 from 0 to 1 channel 0 : tensor<4x4xf32>
  // expected-error @+1 {{'gpipe.recv' op expects the type 'tensor<4x4xf32>' of channel 0 from stage 0, got 'tensor<4x3xf32>'}}
  %r = gpipe.recv from 0 to 1 channel 0 : tensor<4x3xf32>
  %3 = gpipe.stage @stage1 index 1 (%r, %labels) : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<4x3xf32>, %arg1: tensor<4xi32>):
    %1 = gpipe.layer "loss" -> tensor<f32> {
      %2 = gpipe.softmax_cross_entropy %arg0, %arg1 : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32>
      gpipe.yield %2 : tensor<f32>
    }
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %3 : tensor<f32>
}

// -----

// A channel sent but never received.
// expected-error @+1 {{'gpipe.model' op sends channel 1 from stage 0 to stage 1 but never receives it}}
gpipe.model @dropped batch 4 {
  %x = gpipe.input "x" : tensor<4x4xf32>
  %labels = gpipe.input "labels" : tensor<4xi32>
  %0:2 = gpipe.stage @stage0 index 0 (%x) : (tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  ^bb0(%arg0: tensor<4x4xf32>):
    %1 = gpipe.layer "act" -> tensor<4x4xf32> {
      %2 = gpipe.relu %arg0 : tensor<4x4xf32>
      gpipe.yield %2 : tensor<4x4xf32>
    }
    gpipe.yield %1, %arg0 : tensor<4x4xf32>, tensor<4x4xf32>
  }
  gpipe.send %0#0 from 0 to 1 channel 0 : tensor<4x4xf32>
  gpipe.send %0#1 from 0 to 1 channel 1 : tensor<4x4xf32>
  %r = gpipe.recv from 0 to 1 channel 0 : tensor<4x4xf32>
  %3 = gpipe.stage @stage1 index 1 (%r, %labels) : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<4x4xf32>, %arg1: tensor<4xi32>):
    %1 = gpipe.layer "loss" -> tensor<f32> {
      %2 = gpipe.softmax_cross_entropy %arg0, %arg1 : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32>
      gpipe.yield %2 : tensor<f32>
    }
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %3 : tensor<f32>
}

// -----

// Stage 2 reads a value received by stage 1; only adjacent stages communicate.
gpipe.model @skipped_hop batch 4 {
  %x = gpipe.input "x" : tensor<4x4xf32>
  %labels = gpipe.input "labels" : tensor<4xi32>
  %0 = gpipe.stage @stage0 index 0 (%x) : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%arg0: tensor<4x4xf32>):
    %1 = gpipe.layer "act0" -> tensor<4x4xf32> {
      %2 = gpipe.relu %arg0 : tensor<4x4xf32>
      gpipe.yield %2 : tensor<4x4xf32>
    }
    gpipe.yield %1 : tensor<4x4xf32>
  }
  gpipe.send %0 from 0 to 1 channel 0 : tensor<4x4xf32>
  %r0 = gpipe.recv from 0 to 1 channel 0 : tensor<4x4xf32>
  %3 = gpipe.stage @stage1 index 1 (%r0) : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%arg0: tensor<4x4xf32>):
    %1 = gpipe.layer "act1" -> tensor<4x4xf32> {
      %2 = gpipe.relu %arg0 : tensor<4x4xf32>
      gpipe.yield %2 : tensor<4x4xf32>
    }
    gpipe.yield %1 : tensor<4x4xf32>
  }
  gpipe.send %3 from 1 to 2 channel 0 : tensor<4x4xf32>
  %r1 = gpipe.recv from 1 to 2 channel 0 : tensor<4x4xf32>
  // expected-error @+1 {{'gpipe.stage' op reads channel 0 from stage 0 to stage 1, but its index is 2}}
  %5 = gpipe.stage @stage2 index 2 (%r1, %r0, %labels) : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<4x4xf32>, %arg1: tensor<4x4xf32>, %arg2: tensor<4xi32>):
    %1 = gpipe.layer "loss" -> tensor<f32> {
      %2 = gpipe.add %arg0, %arg1 : tensor<4x4xf32>
      %4 = gpipe.softmax_cross_entropy %2, %arg2 : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32>
      gpipe.yield %4 : tensor<f32>
    }
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %5 : tensor<f32>
}

// -----

// A model is scheduled once; a second run does not add another schedule.
// expected-error @+1 {{'gpipe.model' op is already scheduled by @done_schedule}}
gpipe.model @done batch 4 {
  %x = gpipe.input "x" : tensor<4x4xf32>
  %labels = gpipe.input "labels" : tensor<4xi32>
  %0 = gpipe.stage @stage0 index 0 (%x, %labels) : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<4x4xf32>, %arg1: tensor<4xi32>):
    %1 = gpipe.layer "loss" -> tensor<f32> {
      %2 = gpipe.softmax_cross_entropy %arg0, %arg1 : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32>
      gpipe.yield %2 : tensor<f32>
    }
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %0 : tensor<f32>
}
gpipe.schedule @done_schedule model @done microbatches 1 rows [4] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 4
    gpipe.load_input "labels" mb 0 rows 4
    gpipe.forward @stage0 mb 0 rows 4
    gpipe.backward @stage0 mb 0 rows 4
    gpipe.optimizer_step
  }
}
