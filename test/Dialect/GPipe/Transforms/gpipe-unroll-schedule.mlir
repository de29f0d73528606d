// gpipe-unroll-schedule writes the GPipe fill-drain program of every device:
// forwards 0..M-1, backwards M-1..0, transfers in channel order, one optimizer step.
// RUN: gpipe-opt %s -split-input-file -gpipe-unroll-schedule=num-microbatches=3 | FileCheck %s
// RUN: gpipe-opt %s -split-input-file -gpipe-unroll-schedule=num-microbatches=1 | FileCheck %s --check-prefix=M1

// Two stages, a batch of 7 in 3 micro-batches of 3, 2 and 2 rows: every
// instruction of both devices, with each transfer typed at its micro-batch's rows.
// CHECK-LABEL: gpipe.schedule @mlp_schedule model @mlp microbatches 3 rows [3, 2, 2] {
// CHECK-NEXT:    gpipe.program device 0 {
// CHECK-NEXT:      gpipe.load_input "x" mb 0 rows 3
// CHECK-NEXT:      gpipe.forward @stage0 mb 0 rows 3
// CHECK-NEXT:      gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
// CHECK-NEXT:      gpipe.load_input "x" mb 1 rows 2
// CHECK-NEXT:      gpipe.forward @stage0 mb 1 rows 2
// CHECK-NEXT:      gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.load_input "x" mb 2 rows 2
// CHECK-NEXT:      gpipe.forward @stage0 mb 2 rows 2
// CHECK-NEXT:      gpipe.send_activation to 1 mb 2 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.recv_gradient from 1 mb 2 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.backward @stage0 mb 2 rows 2
// CHECK-NEXT:      gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.backward @stage0 mb 1 rows 2
// CHECK-NEXT:      gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
// CHECK-NEXT:      gpipe.backward @stage0 mb 0 rows 3
// CHECK-NEXT:      gpipe.optimizer_step
// CHECK-NEXT:    }
// CHECK-NEXT:    gpipe.program device 1 {
// CHECK-NEXT:      gpipe.recv_activation from 0 mb 0 channel 0 : tensor<3x4xf32>
// CHECK-NEXT:      gpipe.load_input "labels" mb 0 rows 3
// CHECK-NEXT:      gpipe.forward @stage1 mb 0 rows 3
// CHECK-NEXT:      gpipe.recv_activation from 0 mb 1 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.load_input "labels" mb 1 rows 2
// CHECK-NEXT:      gpipe.forward @stage1 mb 1 rows 2
// CHECK-NEXT:      gpipe.recv_activation from 0 mb 2 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.load_input "labels" mb 2 rows 2
// CHECK-NEXT:      gpipe.forward @stage1 mb 2 rows 2
// CHECK-NEXT:      gpipe.backward @stage1 mb 2 rows 2
// CHECK-NEXT:      gpipe.send_gradient to 0 mb 2 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.backward @stage1 mb 1 rows 2
// CHECK-NEXT:      gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.backward @stage1 mb 0 rows 3
// CHECK-NEXT:      gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
// CHECK-NEXT:      gpipe.optimizer_step
// CHECK-NEXT:    }
// CHECK-NEXT:  }
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

// -----

// Three stages with a skip connection: stage 1 passes h1 through next to its
// own h2, so boundary 1 has two channels (sent, received and their gradients
// returned in channel order), and the labels are loaded by the last stage only.
// CHECK-LABEL: gpipe.schedule @skip_schedule model @skip microbatches 3 rows [2, 2, 2] {
// CHECK-NEXT:    gpipe.program device 0 {
// CHECK-NEXT:      gpipe.load_input "x" mb 0 rows 2
// CHECK-NEXT:      gpipe.forward @stage0 mb 0 rows 2
// CHECK-NEXT:      gpipe.send_activation to 1 mb 0 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.load_input "x" mb 1 rows 2
// CHECK-NEXT:      gpipe.forward @stage0 mb 1 rows 2
// CHECK-NEXT:      gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.load_input "x" mb 2 rows 2
// CHECK-NEXT:      gpipe.forward @stage0 mb 2 rows 2
// CHECK-NEXT:      gpipe.send_activation to 1 mb 2 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.recv_gradient from 1 mb 2 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.backward @stage0 mb 2 rows 2
// CHECK-NEXT:      gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.backward @stage0 mb 1 rows 2
// CHECK-NEXT:      gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.backward @stage0 mb 0 rows 2
// CHECK-NEXT:      gpipe.optimizer_step
// CHECK-NEXT:    }
// CHECK-NEXT:    gpipe.program device 1 {
// CHECK-NEXT:      gpipe.recv_activation from 0 mb 0 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.forward @stage1 mb 0 rows 2
// CHECK-NEXT:      gpipe.send_activation to 2 mb 0 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.send_activation to 2 mb 0 channel 1 : tensor<2x8xf32>
// CHECK-NEXT:      gpipe.recv_activation from 0 mb 1 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.forward @stage1 mb 1 rows 2
// CHECK-NEXT:      gpipe.send_activation to 2 mb 1 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.send_activation to 2 mb 1 channel 1 : tensor<2x8xf32>
// CHECK-NEXT:      gpipe.recv_activation from 0 mb 2 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.forward @stage1 mb 2 rows 2
// CHECK-NEXT:      gpipe.send_activation to 2 mb 2 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.send_activation to 2 mb 2 channel 1 : tensor<2x8xf32>
// CHECK-NEXT:      gpipe.recv_gradient from 2 mb 2 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.recv_gradient from 2 mb 2 channel 1 : tensor<2x8xf32>
// CHECK-NEXT:      gpipe.backward @stage1 mb 2 rows 2
// CHECK-NEXT:      gpipe.send_gradient to 0 mb 2 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.recv_gradient from 2 mb 1 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.recv_gradient from 2 mb 1 channel 1 : tensor<2x8xf32>
// CHECK-NEXT:      gpipe.backward @stage1 mb 1 rows 2
// CHECK-NEXT:      gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.recv_gradient from 2 mb 0 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.recv_gradient from 2 mb 0 channel 1 : tensor<2x8xf32>
// CHECK-NEXT:      gpipe.backward @stage1 mb 0 rows 2
// CHECK-NEXT:      gpipe.send_gradient to 0 mb 0 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.optimizer_step
// CHECK-NEXT:    }
// CHECK-NEXT:    gpipe.program device 2 {
// CHECK-NEXT:      gpipe.recv_activation from 1 mb 0 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.recv_activation from 1 mb 0 channel 1 : tensor<2x8xf32>
// CHECK-NEXT:      gpipe.load_input "labels" mb 0 rows 2
// CHECK-NEXT:      gpipe.forward @stage2 mb 0 rows 2
// CHECK-NEXT:      gpipe.recv_activation from 1 mb 1 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.recv_activation from 1 mb 1 channel 1 : tensor<2x8xf32>
// CHECK-NEXT:      gpipe.load_input "labels" mb 1 rows 2
// CHECK-NEXT:      gpipe.forward @stage2 mb 1 rows 2
// CHECK-NEXT:      gpipe.recv_activation from 1 mb 2 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.recv_activation from 1 mb 2 channel 1 : tensor<2x8xf32>
// CHECK-NEXT:      gpipe.load_input "labels" mb 2 rows 2
// CHECK-NEXT:      gpipe.forward @stage2 mb 2 rows 2
// CHECK-NEXT:      gpipe.backward @stage2 mb 2 rows 2
// CHECK-NEXT:      gpipe.send_gradient to 1 mb 2 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.send_gradient to 1 mb 2 channel 1 : tensor<2x8xf32>
// CHECK-NEXT:      gpipe.backward @stage2 mb 1 rows 2
// CHECK-NEXT:      gpipe.send_gradient to 1 mb 1 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.send_gradient to 1 mb 1 channel 1 : tensor<2x8xf32>
// CHECK-NEXT:      gpipe.backward @stage2 mb 0 rows 2
// CHECK-NEXT:      gpipe.send_gradient to 1 mb 0 channel 0 : tensor<2x4xf32>
// CHECK-NEXT:      gpipe.send_gradient to 1 mb 0 channel 1 : tensor<2x8xf32>
// CHECK-NEXT:      gpipe.optimizer_step
// CHECK-NEXT:    }
// CHECK-NEXT:  }
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

// One stage: a single device with no transfers, loading both inputs before
// each forward; a batch of 4 in 3 micro-batches gives rows 2, 1, 1.
// CHECK-LABEL: gpipe.schedule @single_schedule model @single microbatches 3 rows [2, 1, 1] {
// CHECK-NEXT:    gpipe.program device 0 {
// CHECK-NEXT:      gpipe.load_input "x" mb 0 rows 2
// CHECK-NEXT:      gpipe.load_input "labels" mb 0 rows 2
// CHECK-NEXT:      gpipe.forward @stage0 mb 0 rows 2
// CHECK-NEXT:      gpipe.load_input "x" mb 1 rows 1
// CHECK-NEXT:      gpipe.load_input "labels" mb 1 rows 1
// CHECK-NEXT:      gpipe.forward @stage0 mb 1 rows 1
// CHECK-NEXT:      gpipe.load_input "x" mb 2 rows 1
// CHECK-NEXT:      gpipe.load_input "labels" mb 2 rows 1
// CHECK-NEXT:      gpipe.forward @stage0 mb 2 rows 1
// CHECK-NEXT:      gpipe.backward @stage0 mb 2 rows 1
// CHECK-NEXT:      gpipe.backward @stage0 mb 1 rows 1
// CHECK-NEXT:      gpipe.backward @stage0 mb 0 rows 2
// CHECK-NEXT:      gpipe.optimizer_step
// CHECK-NEXT:    }
// CHECK-NEXT:  }
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

// One micro-batch: the whole batch of 5 goes through each stage once, the
// gradient comes straight back, and nothing overlaps.
// M1-LABEL: gpipe.schedule @whole_schedule model @whole microbatches 1 rows [5] {
// M1-NEXT:    gpipe.program device 0 {
// M1-NEXT:      gpipe.load_input "x" mb 0 rows 5
// M1-NEXT:      gpipe.forward @stage0 mb 0 rows 5
// M1-NEXT:      gpipe.send_activation to 1 mb 0 channel 0 : tensor<5x3xf32>
// M1-NEXT:      gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<5x3xf32>
// M1-NEXT:      gpipe.backward @stage0 mb 0 rows 5
// M1-NEXT:      gpipe.optimizer_step
// M1-NEXT:    }
// M1-NEXT:    gpipe.program device 1 {
// M1-NEXT:      gpipe.recv_activation from 0 mb 0 channel 0 : tensor<5x3xf32>
// M1-NEXT:      gpipe.load_input "labels" mb 0 rows 5
// M1-NEXT:      gpipe.forward @stage1 mb 0 rows 5
// M1-NEXT:      gpipe.backward @stage1 mb 0 rows 5
// M1-NEXT:      gpipe.send_gradient to 0 mb 0 channel 0 : tensor<5x3xf32>
// M1-NEXT:      gpipe.optimizer_step
// M1-NEXT:    }
// M1-NEXT:  }
gpipe.model @whole batch 5 {
  %x = gpipe.input "x" : tensor<5x3xf32>
  %labels = gpipe.input "labels" : tensor<5xi32>
  %0 = gpipe.stage @stage0 index 0 (%x) : (tensor<5x3xf32>) -> tensor<5x3xf32> {
  ^bb0(%arg0: tensor<5x3xf32>):
    %1 = gpipe.layer "act" -> tensor<5x3xf32> {
      %2 = gpipe.relu %arg0 : tensor<5x3xf32>
      gpipe.yield %2 : tensor<5x3xf32>
    }
    gpipe.yield %1 : tensor<5x3xf32>
  }
  gpipe.send %0 from 0 to 1 channel 0 : tensor<5x3xf32>
  %r = gpipe.recv from 0 to 1 channel 0 : tensor<5x3xf32>
  %3 = gpipe.stage @stage1 index 1 (%r, %labels) : (tensor<5x3xf32>, tensor<5xi32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<5x3xf32>, %arg1: tensor<5xi32>):
    %1 = gpipe.layer "loss" -> tensor<f32> {
      %2 = gpipe.softmax_cross_entropy %arg0, %arg1 : (tensor<5x3xf32>, tensor<5xi32>) -> tensor<f32>
      gpipe.yield %2 : tensor<f32>
    }
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %3 : tensor<f32>
}

// -----

// The schedule is named after its model; when that name is taken it is
// uniqued, and the schedule still refers to its model. Each model of a module
// gets its own schedule, right after it.
// CHECK-LABEL: func.func private @twice_schedule()
// CHECK:       gpipe.model @twice batch 3
// CHECK:       gpipe.schedule @twice_schedule_0 model @twice microbatches 3 rows [1, 1, 1] {
// CHECK:       gpipe.model @other batch 3
// CHECK:       gpipe.schedule @other_schedule model @other microbatches 3 rows [1, 1, 1] {
func.func private @twice_schedule()
gpipe.model @twice batch 3 {
  %x = gpipe.input "x" : tensor<3x2xf32>
  %labels = gpipe.input "labels" : tensor<3xi32>
  %0 = gpipe.stage @stage0 index 0 (%x, %labels) : (tensor<3x2xf32>, tensor<3xi32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<3x2xf32>, %arg1: tensor<3xi32>):
    %1 = gpipe.layer "loss" -> tensor<f32> {
      %2 = gpipe.softmax_cross_entropy %arg0, %arg1 : (tensor<3x2xf32>, tensor<3xi32>) -> tensor<f32>
      gpipe.yield %2 : tensor<f32>
    }
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %0 : tensor<f32>
}
gpipe.model @other batch 3 {
  %x = gpipe.input "x" : tensor<3x2xf32>
  %labels = gpipe.input "labels" : tensor<3xi32>
  %0 = gpipe.stage @stage0 index 0 (%x, %labels) : (tensor<3x2xf32>, tensor<3xi32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<3x2xf32>, %arg1: tensor<3xi32>):
    %1 = gpipe.layer "loss" -> tensor<f32> {
      %2 = gpipe.softmax_cross_entropy %arg0, %arg1 : (tensor<3x2xf32>, tensor<3xi32>) -> tensor<f32>
      gpipe.yield %2 : tensor<f32>
    }
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %0 : tensor<f32>
}
