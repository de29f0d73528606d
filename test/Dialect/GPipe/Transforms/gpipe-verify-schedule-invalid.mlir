// gpipe-verify-schedule rejects broken hand-written schedules; each error names
// the device, the micro-batch and the op (its position in the device's program).
// RUN: gpipe-opt %s -split-input-file -gpipe-verify-schedule -verify-diagnostics

// A send with no recv: device 1 never receives the activation of micro-batch 1.
gpipe.model @m batch 5 {
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
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 2] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 3
    gpipe.forward @stage0 mb 0 rows 3
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "x" mb 1 rows 2
    gpipe.forward @stage0 mb 1 rows 2
    // expected-error @+1 {{device 0: send activation to device 1, micro-batch 1, channel 0 (op #5) has no matching recv on device 1}}
    gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.backward @stage0 mb 0 rows 3
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "labels" mb 0 rows 3
    gpipe.forward @stage1 mb 0 rows 3
    gpipe.load_input "labels" mb 1 rows 2
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.backward @stage1 mb 1 rows 2
    gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage1 mb 0 rows 3
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.optimizer_step
  }
}

// -----

// A recv with no send: device 0 never sends the activation of micro-batch 1.
gpipe.model @m batch 5 {
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
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 2] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 3
    gpipe.forward @stage0 mb 0 rows 3
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "x" mb 1 rows 2
    gpipe.forward @stage0 mb 1 rows 2
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.backward @stage0 mb 0 rows 3
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "labels" mb 0 rows 3
    gpipe.forward @stage1 mb 0 rows 3
    // expected-error @+1 {{device 1: recv activation from device 0, micro-batch 1, channel 0 (op #3) has no matching send on device 0}}
    gpipe.recv_activation from 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.load_input "labels" mb 1 rows 2
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.backward @stage1 mb 1 rows 2
    gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage1 mb 0 rows 3
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.optimizer_step
  }
}

// -----

// The two ends of a transfer disagree on its shape (and the recv on the model's channel).
gpipe.model @m batch 5 {
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
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 2] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 3
    gpipe.forward @stage0 mb 0 rows 3
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "x" mb 1 rows 2
    gpipe.forward @stage0 mb 1 rows 2
    gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.backward @stage0 mb 0 rows 3
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    // expected-error @+2 {{device 1: recv activation from device 0, micro-batch 0, channel 0 (op #0) expects 'tensor<3x4xf32>' (channel 0 of stage 0 at 3 rows), got 'tensor<3x5xf32>'}}
    // expected-error @+1 {{device 1: recv activation from device 0, micro-batch 0, channel 0 (op #0) expects tensor<3x5xf32> but the matching send on device 0 (op #2) sends tensor<3x4xf32>}}
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<3x5xf32>
    gpipe.load_input "labels" mb 0 rows 3
    gpipe.forward @stage1 mb 0 rows 3
    gpipe.recv_activation from 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.load_input "labels" mb 1 rows 2
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.backward @stage1 mb 1 rows 2
    gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage1 mb 0 rows 3
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.optimizer_step
  }
}

// -----

// Both ends of a gradient transfer agree with each other but not with the model's
// f32 channel.
gpipe.model @m batch 5 {
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
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 2] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 3
    gpipe.forward @stage0 mb 0 rows 3
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "x" mb 1 rows 2
    gpipe.forward @stage0 mb 1 rows 2
    gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
    // expected-error @+1 {{device 0: recv gradient from device 1, micro-batch 1, channel 0 (op #6) expects 'tensor<2x4xf32>' (channel 0 of stage 0 at 2 rows), got 'tensor<2x4xf16>'}}
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf16>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.backward @stage0 mb 0 rows 3
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "labels" mb 0 rows 3
    gpipe.forward @stage1 mb 0 rows 3
    gpipe.recv_activation from 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.load_input "labels" mb 1 rows 2
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.backward @stage1 mb 1 rows 2
    // expected-error @+1 {{device 1: send gradient to device 0, micro-batch 1, channel 0 (op #7) expects 'tensor<2x4xf32>' (channel 0 of stage 0 at 2 rows), got 'tensor<2x4xf16>'}}
    gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf16>
    gpipe.backward @stage1 mb 0 rows 3
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.optimizer_step
  }
}

// -----

// One activation sent twice.
gpipe.model @m batch 5 {
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
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 2] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 3
    gpipe.forward @stage0 mb 0 rows 3
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    // expected-error @+1 {{device 0: send activation to device 1, micro-batch 0, channel 0 (op #3) is sent twice (also op #2)}}
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "x" mb 1 rows 2
    gpipe.forward @stage0 mb 1 rows 2
    gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.backward @stage0 mb 0 rows 3
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "labels" mb 0 rows 3
    gpipe.forward @stage1 mb 0 rows 3
    gpipe.recv_activation from 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.load_input "labels" mb 1 rows 2
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.backward @stage1 mb 1 rows 2
    gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage1 mb 0 rows 3
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.optimizer_step
  }
}

// -----

// Device 2 receives channel 1 before channel 0 while device 1 sends them in
// channel order: fine with buffered sends, a deadlock when a send blocks until
// it is received (device 0, waiting for its gradient, is stuck too).
gpipe.model @skip batch 6 {
  %x = gpipe.input "x" : tensor<6x4xf32>
  %labels = gpipe.input "labels" : tensor<6xi32>
  %0 = gpipe.stage @stage0 index 0 (%x) : (tensor<6x4xf32>) -> tensor<6x4xf32> {
  ^bb0(%arg0: tensor<6x4xf32>):
    %1 = gpipe.layer "act" -> tensor<6x4xf32> {
      %2 = gpipe.relu %arg0 : tensor<6x4xf32>
      gpipe.yield %2 : tensor<6x4xf32>
    }
    gpipe.yield %1 : tensor<6x4xf32>
  }
  gpipe.send %0 from 0 to 1 channel 0 : tensor<6x4xf32>
  %r0 = gpipe.recv from 0 to 1 channel 0 : tensor<6x4xf32>
  %3:2 = gpipe.stage @stage1 index 1 (%r0) : (tensor<6x4xf32>) -> (tensor<6x4xf32>, tensor<6x8xf32>) {
  ^bb0(%arg0: tensor<6x4xf32>):
    %1 = gpipe.layer "fc" -> tensor<6x8xf32> {
      %w = gpipe.param "fc.w" glorot_uniform : tensor<4x8xf32>
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
      %w = gpipe.param "out.w" glorot_uniform : tensor<8x4xf32>
      %2 = gpipe.dense %arg1, %w : (tensor<6x8xf32>, tensor<8x4xf32>) -> tensor<6x4xf32>
      %5 = gpipe.add %2, %arg0 : tensor<6x4xf32>
      %6 = gpipe.softmax_cross_entropy %5, %arg2 : (tensor<6x4xf32>, tensor<6xi32>) -> tensor<f32>
      gpipe.yield %6 : tensor<f32>
    }
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %4 : tensor<f32>
}
gpipe.schedule @skip_schedule model @skip microbatches 1 rows [6] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 6
    gpipe.forward @stage0 mb 0 rows 6
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<6x4xf32>
    // expected-error @+1 {{deadlock: device 0 waits at op #3 (recv gradient from device 1, micro-batch 0, channel 0) while device 1 waits at op #2 (send activation to device 2, micro-batch 0, channel 0)}}
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<6x4xf32>
    gpipe.backward @stage0 mb 0 rows 6
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<6x4xf32>
    gpipe.forward @stage1 mb 0 rows 6
    // expected-error @+1 {{deadlock: device 1 waits at op #2 (send activation to device 2, micro-batch 0, channel 0) while device 2 waits at op #0 (recv activation from device 1, micro-batch 0, channel 1)}}
    gpipe.send_activation to 2 mb 0 channel 0 : tensor<6x4xf32>
    gpipe.send_activation to 2 mb 0 channel 1 : tensor<6x8xf32>
    gpipe.recv_gradient from 2 mb 0 channel 0 : tensor<6x4xf32>
    gpipe.recv_gradient from 2 mb 0 channel 1 : tensor<6x8xf32>
    gpipe.backward @stage1 mb 0 rows 6
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<6x4xf32>
    gpipe.optimizer_step
  }
  gpipe.program device 2 {
    // expected-error @+1 {{deadlock: device 2 waits at op #0 (recv activation from device 1, micro-batch 0, channel 1) while device 1 waits at op #2 (send activation to device 2, micro-batch 0, channel 0)}}
    gpipe.recv_activation from 1 mb 0 channel 1 : tensor<6x8xf32>
    gpipe.recv_activation from 1 mb 0 channel 0 : tensor<6x4xf32>
    gpipe.load_input "labels" mb 0 rows 6
    gpipe.forward @stage2 mb 0 rows 6
    gpipe.backward @stage2 mb 0 rows 6
    gpipe.send_gradient to 1 mb 0 channel 0 : tensor<6x4xf32>
    gpipe.send_gradient to 1 mb 0 channel 1 : tensor<6x8xf32>
    gpipe.optimizer_step
  }
}

// -----

// Device 0 waits for the gradient of micro-batch 0 before it sends the
// activation that gradient needs: a cycle that no buffering breaks.
gpipe.model @m batch 5 {
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
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 2] {
  gpipe.program device 0 {
    // expected-error @+1 {{deadlock: device 0 waits at op #0 (recv gradient from device 1, micro-batch 0, channel 0) while device 1 waits at op #0 (recv activation from device 0, micro-batch 0, channel 0)}}
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "x" mb 0 rows 3
    gpipe.forward @stage0 mb 0 rows 3
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "x" mb 1 rows 2
    gpipe.forward @stage0 mb 1 rows 2
    gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.backward @stage0 mb 0 rows 3
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    // expected-error @+1 {{deadlock: device 1 waits at op #0 (recv activation from device 0, micro-batch 0, channel 0) while device 0 waits at op #0 (recv gradient from device 1, micro-batch 0, channel 0)}}
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "labels" mb 0 rows 3
    gpipe.forward @stage1 mb 0 rows 3
    gpipe.recv_activation from 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.load_input "labels" mb 1 rows 2
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.backward @stage1 mb 1 rows 2
    gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage1 mb 0 rows 3
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.optimizer_step
  }
}

// -----

// A backward before the forward of its micro-batch.
gpipe.model @m batch 5 {
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
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 2] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 3
    gpipe.forward @stage0 mb 0 rows 3
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "x" mb 1 rows 2
    gpipe.forward @stage0 mb 1 rows 2
    gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.backward @stage0 mb 0 rows 3
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "labels" mb 0 rows 3
    gpipe.forward @stage1 mb 0 rows 3
    gpipe.recv_activation from 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.load_input "labels" mb 1 rows 2
    // expected-error @+1 {{device 1: backward of stage 1, micro-batch 1 (op #5) runs before its forward (op #6)}}
    gpipe.backward @stage1 mb 1 rows 2
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage1 mb 0 rows 3
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.optimizer_step
  }
}

// -----

// Forwards before their inputs arrive: device 1 before the activation it
// receives, device 0 before the input it loads.
gpipe.model @m batch 5 {
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
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 2] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 3
    gpipe.forward @stage0 mb 0 rows 3
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    // expected-error @+1 {{device 0: forward of stage 0, micro-batch 1 (op #3) runs before load input 'x', micro-batch 1 (op #4) delivers its input}}
    gpipe.forward @stage0 mb 1 rows 2
    gpipe.load_input "x" mb 1 rows 2
    gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.backward @stage0 mb 0 rows 3
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    gpipe.load_input "labels" mb 0 rows 3
    // expected-error @+1 {{device 1: forward of stage 1, micro-batch 0 (op #1) runs before recv activation from device 0, micro-batch 0, channel 0 (op #2) delivers its input}}
    gpipe.forward @stage1 mb 0 rows 3
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.recv_activation from 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.load_input "labels" mb 1 rows 2
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.backward @stage1 mb 1 rows 2
    gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage1 mb 0 rows 3
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.optimizer_step
  }
}

// -----

// No backward for micro-batch 0 on device 0 (reported on its forward).
gpipe.model @m batch 5 {
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
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 2] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 3
    // expected-error @+1 {{device 0: stage 0 has no backward for micro-batch 0}}
    gpipe.forward @stage0 mb 0 rows 3
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "x" mb 1 rows 2
    gpipe.forward @stage0 mb 1 rows 2
    gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "labels" mb 0 rows 3
    gpipe.forward @stage1 mb 0 rows 3
    gpipe.recv_activation from 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.load_input "labels" mb 1 rows 2
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.backward @stage1 mb 1 rows 2
    gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage1 mb 0 rows 3
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.optimizer_step
  }
}

// -----

// A backward for micro-batch 2 of a 2-micro-batch schedule.
gpipe.model @m batch 5 {
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
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 2] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 3
    gpipe.forward @stage0 mb 0 rows 3
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "x" mb 1 rows 2
    gpipe.forward @stage0 mb 1 rows 2
    gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.backward @stage0 mb 0 rows 3
    // The op verifier refuses it before the schedule's proof could.
    // expected-error @+1 {{'gpipe.backward' op names micro-batch 2, but the schedule has 2 micro-batches (0 to 1)}}
    gpipe.backward @stage0 mb 2 rows 2
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "labels" mb 0 rows 3
    gpipe.forward @stage1 mb 0 rows 3
    gpipe.recv_activation from 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.load_input "labels" mb 1 rows 2
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.backward @stage1 mb 1 rows 2
    gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage1 mb 0 rows 3
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.optimizer_step
  }
}

// -----

// Device 1 never steps its optimizer (reported on its last op).
gpipe.model @m batch 5 {
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
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 2] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 3
    gpipe.forward @stage0 mb 0 rows 3
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "x" mb 1 rows 2
    gpipe.forward @stage0 mb 1 rows 2
    gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.backward @stage0 mb 0 rows 3
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "labels" mb 0 rows 3
    gpipe.forward @stage1 mb 0 rows 3
    gpipe.recv_activation from 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.load_input "labels" mb 1 rows 2
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.backward @stage1 mb 1 rows 2
    gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage1 mb 0 rows 3
    // expected-error @+1 {{device 1 has no optimizer step}}
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
  }
}

// -----

// An optimizer step before the last backward would drop its gradients.
gpipe.model @m batch 5 {
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
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 2] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 3
    gpipe.forward @stage0 mb 0 rows 3
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "x" mb 1 rows 2
    gpipe.forward @stage0 mb 1 rows 2
    gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    // expected-error @+1 {{device 0: optimizer step (op #9) runs before backward of stage 0, micro-batch 0 (op #10)}}
    gpipe.optimizer_step
    gpipe.backward @stage0 mb 0 rows 3
  }
  gpipe.program device 1 {
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "labels" mb 0 rows 3
    gpipe.forward @stage1 mb 0 rows 3
    gpipe.recv_activation from 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.load_input "labels" mb 1 rows 2
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.backward @stage1 mb 1 rows 2
    gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage1 mb 0 rows 3
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.optimizer_step
  }
}

// -----

// Two optimizer steps on one device.
gpipe.model @m batch 5 {
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
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 2] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 3
    gpipe.forward @stage0 mb 0 rows 3
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "x" mb 1 rows 2
    gpipe.forward @stage0 mb 1 rows 2
    gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.backward @stage0 mb 0 rows 3
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "labels" mb 0 rows 3
    gpipe.forward @stage1 mb 0 rows 3
    gpipe.recv_activation from 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.load_input "labels" mb 1 rows 2
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.backward @stage1 mb 1 rows 2
    gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage1 mb 0 rows 3
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.optimizer_step
    // expected-error @+1 {{device 1: optimizer step (op #11) duplicates op #10}}
    gpipe.optimizer_step
  }
}

// -----

// Device 0 runs a forward of stage 1.
gpipe.model @m batch 5 {
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
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 2] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 3
    gpipe.forward @stage0 mb 0 rows 3
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "x" mb 1 rows 2
    // expected-error @+1 {{device 0: forward of stage 1, micro-batch 1 (op #4) expects stage 0 (device 0 runs stage 0), got stage 1}}
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.backward @stage0 mb 0 rows 3
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "labels" mb 0 rows 3
    gpipe.forward @stage1 mb 0 rows 3
    gpipe.recv_activation from 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.load_input "labels" mb 1 rows 2
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.backward @stage1 mb 1 rows 2
    gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage1 mb 0 rows 3
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.optimizer_step
  }
}

// -----

// Device 1 sends an activation back to device 0 instead of on to device 2.
gpipe.model @skip batch 6 {
  %x = gpipe.input "x" : tensor<6x4xf32>
  %labels = gpipe.input "labels" : tensor<6xi32>
  %0 = gpipe.stage @stage0 index 0 (%x) : (tensor<6x4xf32>) -> tensor<6x4xf32> {
  ^bb0(%arg0: tensor<6x4xf32>):
    %1 = gpipe.layer "act" -> tensor<6x4xf32> {
      %2 = gpipe.relu %arg0 : tensor<6x4xf32>
      gpipe.yield %2 : tensor<6x4xf32>
    }
    gpipe.yield %1 : tensor<6x4xf32>
  }
  gpipe.send %0 from 0 to 1 channel 0 : tensor<6x4xf32>
  %r0 = gpipe.recv from 0 to 1 channel 0 : tensor<6x4xf32>
  %3:2 = gpipe.stage @stage1 index 1 (%r0) : (tensor<6x4xf32>) -> (tensor<6x4xf32>, tensor<6x8xf32>) {
  ^bb0(%arg0: tensor<6x4xf32>):
    %1 = gpipe.layer "fc" -> tensor<6x8xf32> {
      %w = gpipe.param "fc.w" glorot_uniform : tensor<4x8xf32>
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
      %w = gpipe.param "out.w" glorot_uniform : tensor<8x4xf32>
      %2 = gpipe.dense %arg1, %w : (tensor<6x8xf32>, tensor<8x4xf32>) -> tensor<6x4xf32>
      %5 = gpipe.add %2, %arg0 : tensor<6x4xf32>
      %6 = gpipe.softmax_cross_entropy %5, %arg2 : (tensor<6x4xf32>, tensor<6xi32>) -> tensor<f32>
      gpipe.yield %6 : tensor<f32>
    }
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %4 : tensor<f32>
}
gpipe.schedule @skip_schedule model @skip microbatches 1 rows [6] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 6
    gpipe.forward @stage0 mb 0 rows 6
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<6x4xf32>
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<6x4xf32>
    gpipe.backward @stage0 mb 0 rows 6
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<6x4xf32>
    gpipe.forward @stage1 mb 0 rows 6
    gpipe.send_activation to 2 mb 0 channel 0 : tensor<6x4xf32>
    // expected-error @+2 {{device 1: send activation to device 0, micro-batch 0, channel 1 (op #3) expects peer device 2, got 0}}
    // expected-error @+1 {{device 1: send activation to device 0, micro-batch 0, channel 1 (op #3) has no matching recv on device 0}}
    gpipe.send_activation to 0 mb 0 channel 1 : tensor<6x8xf32>
    gpipe.recv_gradient from 2 mb 0 channel 0 : tensor<6x4xf32>
    gpipe.recv_gradient from 2 mb 0 channel 1 : tensor<6x8xf32>
    gpipe.backward @stage1 mb 0 rows 6
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<6x4xf32>
    gpipe.optimizer_step
  }
  gpipe.program device 2 {
    gpipe.recv_activation from 1 mb 0 channel 0 : tensor<6x4xf32>
    // expected-error @+1 {{device 2: recv activation from device 1, micro-batch 0, channel 1 (op #1) has no matching send on device 1}}
    gpipe.recv_activation from 1 mb 0 channel 1 : tensor<6x8xf32>
    gpipe.load_input "labels" mb 0 rows 6
    gpipe.forward @stage2 mb 0 rows 6
    gpipe.backward @stage2 mb 0 rows 6
    gpipe.send_gradient to 1 mb 0 channel 0 : tensor<6x4xf32>
    gpipe.send_gradient to 1 mb 0 channel 1 : tensor<6x8xf32>
    gpipe.optimizer_step
  }
}

// -----

// A forward of micro-batch 1 with the rows of micro-batch 0.
gpipe.model @m batch 5 {
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
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 2] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 3
    gpipe.forward @stage0 mb 0 rows 3
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "x" mb 1 rows 2
    gpipe.forward @stage0 mb 1 rows 2
    gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.backward @stage0 mb 0 rows 3
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "labels" mb 0 rows 3
    gpipe.forward @stage1 mb 0 rows 3
    gpipe.recv_activation from 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.load_input "labels" mb 1 rows 2
    // expected-error @+1 {{device 1: forward of stage 1, micro-batch 1 (op #5) expects 2 rows (the schedule's micro-batch 1), got 3}}
    gpipe.forward @stage1 mb 1 rows 3
    gpipe.backward @stage1 mb 1 rows 2
    gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage1 mb 0 rows 3
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.optimizer_step
  }
}

// -----

// Micro-batches of 3 and 3 rows do not make the batch of 5.
gpipe.model @m batch 5 {
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
// expected-error @+1 {{'gpipe.schedule' op expects micro-batch rows adding up to the batch size 5 of @m, got 6}}
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 3] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 3
    gpipe.forward @stage0 mb 0 rows 3
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "x" mb 1 rows 2
    gpipe.forward @stage0 mb 1 rows 2
    gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.backward @stage0 mb 0 rows 3
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "labels" mb 0 rows 3
    gpipe.forward @stage1 mb 0 rows 3
    gpipe.recv_activation from 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.load_input "labels" mb 1 rows 2
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.backward @stage1 mb 1 rows 2
    gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage1 mb 0 rows 3
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.optimizer_step
  }
}

// -----

// A program for device 2 of a two-stage model.
gpipe.model @m batch 5 {
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
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 2] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 3
    gpipe.forward @stage0 mb 0 rows 3
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "x" mb 1 rows 2
    gpipe.forward @stage0 mb 1 rows 2
    gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.backward @stage0 mb 0 rows 3
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "labels" mb 0 rows 3
    gpipe.forward @stage1 mb 0 rows 3
    gpipe.recv_activation from 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.load_input "labels" mb 1 rows 2
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.backward @stage1 mb 1 rows 2
    gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage1 mb 0 rows 3
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.optimizer_step
  }
  // expected-error @+1 {{'gpipe.program' op is for device 2 but model @m has 2 stages, so devices 0..1}}
  gpipe.program device 2 {
    gpipe.optimizer_step
  }
}

// -----

// Two programs for device 1.
gpipe.model @m batch 5 {
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
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 2] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 3
    gpipe.forward @stage0 mb 0 rows 3
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "x" mb 1 rows 2
    gpipe.forward @stage0 mb 1 rows 2
    gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.backward @stage0 mb 0 rows 3
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "labels" mb 0 rows 3
    gpipe.forward @stage1 mb 0 rows 3
    gpipe.recv_activation from 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.load_input "labels" mb 1 rows 2
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.backward @stage1 mb 1 rows 2
    gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage1 mb 0 rows 3
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.optimizer_step
  }
  // expected-error @+1 {{'gpipe.program' op is a second program for device 1}}
  gpipe.program device 1 {
    gpipe.optimizer_step
  }
}

// -----

// No program for device 1.
gpipe.model @m batch 5 {
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
// expected-error @+1 {{'gpipe.schedule' op has no program for device 1 (stage 1)}}
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 2] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 3
    gpipe.forward @stage0 mb 0 rows 3
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "x" mb 1 rows 2
    gpipe.forward @stage0 mb 1 rows 2
    gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.backward @stage0 mb 0 rows 3
    gpipe.optimizer_step
  }
}

// -----

// A backward of a stage the model does not have.
gpipe.model @m batch 5 {
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
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 2] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 3
    gpipe.forward @stage0 mb 0 rows 3
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "x" mb 1 rows 2
    gpipe.forward @stage0 mb 1 rows 2
    gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.backward @stage0 mb 0 rows 3
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "labels" mb 0 rows 3
    gpipe.forward @stage1 mb 0 rows 3
    gpipe.recv_activation from 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.load_input "labels" mb 1 rows 2
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.backward @stage1 mb 1 rows 2
    gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf32>
    // expected-error @+1 {{'gpipe.backward' op refers to @stage2, which is not a stage of model @m}}
    gpipe.backward @stage2 mb 0 rows 3
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.optimizer_step
  }
}

// -----

// A schedule of a model that does not exist.
gpipe.model @m batch 5 {
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
// expected-error @+1 {{'gpipe.schedule' op refers to @mm, which is not a gpipe.model}}
gpipe.schedule @m_schedule model @mm microbatches 2 rows [3, 2] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 3
    gpipe.forward @stage0 mb 0 rows 3
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "x" mb 1 rows 2
    gpipe.forward @stage0 mb 1 rows 2
    gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.backward @stage0 mb 0 rows 3
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "labels" mb 0 rows 3
    gpipe.forward @stage1 mb 0 rows 3
    gpipe.recv_activation from 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.load_input "labels" mb 1 rows 2
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.backward @stage1 mb 1 rows 2
    gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage1 mb 0 rows 3
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.optimizer_step
  }
}

// -----

// Only schedule instructions may appear in a program.
func.func private @f()
gpipe.model @m batch 5 {
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
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 2] {
  gpipe.program device 0 {
    // expected-error @+1 {{'func.call' op is not a schedule instruction}}
    func.call @f() : () -> ()
    gpipe.load_input "x" mb 0 rows 3
    gpipe.forward @stage0 mb 0 rows 3
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "x" mb 1 rows 2
    gpipe.forward @stage0 mb 1 rows 2
    gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.backward @stage0 mb 0 rows 3
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "labels" mb 0 rows 3
    gpipe.forward @stage1 mb 0 rows 3
    gpipe.recv_activation from 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.load_input "labels" mb 1 rows 2
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.backward @stage1 mb 1 rows 2
    gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage1 mb 0 rows 3
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.optimizer_step
  }
}

// -----

// Device 1 never loads the labels of micro-batch 1 (reported on its forward).
gpipe.model @m batch 5 {
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
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 2] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 3
    gpipe.forward @stage0 mb 0 rows 3
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "x" mb 1 rows 2
    gpipe.forward @stage0 mb 1 rows 2
    gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.backward @stage0 mb 0 rows 3
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "labels" mb 0 rows 3
    gpipe.forward @stage1 mb 0 rows 3
    gpipe.recv_activation from 0 mb 1 channel 0 : tensor<2x4xf32>
    // expected-error @+1 {{device 1: stage 1 has no load of input 'labels' for micro-batch 1}}
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.backward @stage1 mb 1 rows 2
    gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage1 mb 0 rows 3
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.optimizer_step
  }
}

// -----

// Device 0 loads the labels, which stage 1 reads, instead of x.
gpipe.model @m batch 5 {
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
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 2] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 3
    gpipe.forward @stage0 mb 0 rows 3
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    // expected-error @+1 {{device 0: load input 'labels', micro-batch 1 (op #3) expects an input that stage 0 reads ('x'), got 'labels'}}
    gpipe.load_input "labels" mb 1 rows 2
    // expected-error @+1 {{device 0: stage 0 has no load of input 'x' for micro-batch 1}}
    gpipe.forward @stage0 mb 1 rows 2
    gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.backward @stage0 mb 0 rows 3
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "labels" mb 0 rows 3
    gpipe.forward @stage1 mb 0 rows 3
    gpipe.recv_activation from 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.load_input "labels" mb 1 rows 2
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.backward @stage1 mb 1 rows 2
    gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage1 mb 0 rows 3
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.optimizer_step
  }
}

// -----

// The gradient of channel 1 is neither sent nor received: device 1 would run
// its backward without it.
gpipe.model @skip batch 6 {
  %x = gpipe.input "x" : tensor<6x4xf32>
  %labels = gpipe.input "labels" : tensor<6xi32>
  %0 = gpipe.stage @stage0 index 0 (%x) : (tensor<6x4xf32>) -> tensor<6x4xf32> {
  ^bb0(%arg0: tensor<6x4xf32>):
    %1 = gpipe.layer "act" -> tensor<6x4xf32> {
      %2 = gpipe.relu %arg0 : tensor<6x4xf32>
      gpipe.yield %2 : tensor<6x4xf32>
    }
    gpipe.yield %1 : tensor<6x4xf32>
  }
  gpipe.send %0 from 0 to 1 channel 0 : tensor<6x4xf32>
  %r0 = gpipe.recv from 0 to 1 channel 0 : tensor<6x4xf32>
  %3:2 = gpipe.stage @stage1 index 1 (%r0) : (tensor<6x4xf32>) -> (tensor<6x4xf32>, tensor<6x8xf32>) {
  ^bb0(%arg0: tensor<6x4xf32>):
    %1 = gpipe.layer "fc" -> tensor<6x8xf32> {
      %w = gpipe.param "fc.w" glorot_uniform : tensor<4x8xf32>
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
      %w = gpipe.param "out.w" glorot_uniform : tensor<8x4xf32>
      %2 = gpipe.dense %arg1, %w : (tensor<6x8xf32>, tensor<8x4xf32>) -> tensor<6x4xf32>
      %5 = gpipe.add %2, %arg0 : tensor<6x4xf32>
      %6 = gpipe.softmax_cross_entropy %5, %arg2 : (tensor<6x4xf32>, tensor<6xi32>) -> tensor<f32>
      gpipe.yield %6 : tensor<f32>
    }
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %4 : tensor<f32>
}
gpipe.schedule @skip_schedule model @skip microbatches 1 rows [6] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 6
    gpipe.forward @stage0 mb 0 rows 6
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<6x4xf32>
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<6x4xf32>
    gpipe.backward @stage0 mb 0 rows 6
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<6x4xf32>
    gpipe.forward @stage1 mb 0 rows 6
    gpipe.send_activation to 2 mb 0 channel 0 : tensor<6x4xf32>
    gpipe.send_activation to 2 mb 0 channel 1 : tensor<6x8xf32>
    gpipe.recv_gradient from 2 mb 0 channel 0 : tensor<6x4xf32>
    // expected-error @+1 {{device 1: stage 1 receives no gradient on channel 1 from device 2 for micro-batch 0}}
    gpipe.backward @stage1 mb 0 rows 6
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<6x4xf32>
    gpipe.optimizer_step
  }
  gpipe.program device 2 {
    gpipe.recv_activation from 1 mb 0 channel 0 : tensor<6x4xf32>
    gpipe.recv_activation from 1 mb 0 channel 1 : tensor<6x8xf32>
    gpipe.load_input "labels" mb 0 rows 6
    gpipe.forward @stage2 mb 0 rows 6
    gpipe.backward @stage2 mb 0 rows 6
    gpipe.send_gradient to 1 mb 0 channel 0 : tensor<6x4xf32>
    gpipe.optimizer_step
  }
}

// -----

// A transfer on channel 1 of a boundary with a single channel.
gpipe.model @m batch 5 {
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
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 2] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 3
    gpipe.forward @stage0 mb 0 rows 3
    // expected-error @+1 {{device 0: send activation to device 1, micro-batch 0, channel 1 (op #2) uses channel 1, but stage 0 has 1 channel to stage 1}}
    gpipe.send_activation to 1 mb 0 channel 1 : tensor<3x4xf32>
    gpipe.load_input "x" mb 1 rows 2
    gpipe.forward @stage0 mb 1 rows 2
    gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.backward @stage0 mb 0 rows 3
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    // expected-error @+1 {{device 1: recv activation from device 0, micro-batch 0, channel 1 (op #0) uses channel 1, but stage 0 has 1 channel to stage 1}}
    gpipe.recv_activation from 0 mb 0 channel 1 : tensor<3x4xf32>
    gpipe.load_input "labels" mb 0 rows 3
    // expected-error @+1 {{device 1: stage 1 receives no activation on channel 0 from device 0 for micro-batch 0}}
    gpipe.forward @stage1 mb 0 rows 3
    gpipe.recv_activation from 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.load_input "labels" mb 1 rows 2
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.backward @stage1 mb 1 rows 2
    gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage1 mb 0 rows 3
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.optimizer_step
  }
}

// -----

// A schedule of a model that has not been split into stages.
gpipe.model @m batch 5 {
  %x = gpipe.input "x" : tensor<5x4xf32>
  %labels = gpipe.input "labels" : tensor<5xi32>
  %loss = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.softmax_cross_entropy %x, %labels : (tensor<5x4xf32>, tensor<5xi32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %loss : tensor<f32>
}
// expected-error @+1 {{'gpipe.schedule' op refers to model @m, which has no stages}}
gpipe.schedule @m_schedule model @m microbatches 1 rows [5] {
}

// -----

// A model channel without the batch as leading dimension cannot be split into
// micro-batches (gpipe-unroll-schedule rejects such a model).
gpipe.model @m batch 4 {
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
gpipe.schedule @m_schedule model @m microbatches 1 rows [4] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 4
    gpipe.load_input "labels" mb 0 rows 4
    gpipe.forward @stage0 mb 0 rows 4
    // expected-error @+1 {{device 0: send activation to device 1, micro-batch 0, channel 0 (op #3) uses channel 0 of stage 0, whose type 'tensor<f32>' does not have the batch size 4 as leading dimension}}
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<f32>
    // expected-error @+1 {{device 0: recv gradient from device 1, micro-batch 0, channel 0 (op #4) uses channel 0 of stage 0, whose type 'tensor<f32>' does not have the batch size 4 as leading dimension}}
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<f32>
    gpipe.backward @stage0 mb 0 rows 4
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    // expected-error @+1 {{device 1: recv activation from device 0, micro-batch 0, channel 0 (op #0) uses channel 0 of stage 0, whose type 'tensor<f32>' does not have the batch size 4 as leading dimension}}
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<f32>
    gpipe.forward @stage1 mb 0 rows 4
    gpipe.backward @stage1 mb 0 rows 4
    // expected-error @+1 {{device 1: send gradient to device 0, micro-batch 0, channel 0 (op #3) uses channel 0 of stage 0, whose type 'tensor<f32>' does not have the batch size 4 as leading dimension}}
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<f32>
    gpipe.optimizer_step
  }
}

// -----

// Stage 1 reads no model input, so device 1 has nothing to load.
gpipe.model @skip batch 6 {
  %x = gpipe.input "x" : tensor<6x4xf32>
  %labels = gpipe.input "labels" : tensor<6xi32>
  %0 = gpipe.stage @stage0 index 0 (%x) : (tensor<6x4xf32>) -> tensor<6x4xf32> {
  ^bb0(%arg0: tensor<6x4xf32>):
    %1 = gpipe.layer "act" -> tensor<6x4xf32> {
      %2 = gpipe.relu %arg0 : tensor<6x4xf32>
      gpipe.yield %2 : tensor<6x4xf32>
    }
    gpipe.yield %1 : tensor<6x4xf32>
  }
  gpipe.send %0 from 0 to 1 channel 0 : tensor<6x4xf32>
  %r0 = gpipe.recv from 0 to 1 channel 0 : tensor<6x4xf32>
  %3:2 = gpipe.stage @stage1 index 1 (%r0) : (tensor<6x4xf32>) -> (tensor<6x4xf32>, tensor<6x8xf32>) {
  ^bb0(%arg0: tensor<6x4xf32>):
    %1 = gpipe.layer "fc" -> tensor<6x8xf32> {
      %w = gpipe.param "fc.w" glorot_uniform : tensor<4x8xf32>
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
      %w = gpipe.param "out.w" glorot_uniform : tensor<8x4xf32>
      %2 = gpipe.dense %arg1, %w : (tensor<6x8xf32>, tensor<8x4xf32>) -> tensor<6x4xf32>
      %5 = gpipe.add %2, %arg0 : tensor<6x4xf32>
      %6 = gpipe.softmax_cross_entropy %5, %arg2 : (tensor<6x4xf32>, tensor<6xi32>) -> tensor<f32>
      gpipe.yield %6 : tensor<f32>
    }
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %4 : tensor<f32>
}
gpipe.schedule @skip_schedule model @skip microbatches 1 rows [6] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 6
    gpipe.forward @stage0 mb 0 rows 6
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<6x4xf32>
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<6x4xf32>
    gpipe.backward @stage0 mb 0 rows 6
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<6x4xf32>
    // expected-error @+1 {{device 1: load input 'x', micro-batch 0 (op #1) loads an input, but stage 1 reads no model input}}
    gpipe.load_input "x" mb 0 rows 6
    gpipe.forward @stage1 mb 0 rows 6
    gpipe.send_activation to 2 mb 0 channel 0 : tensor<6x4xf32>
    gpipe.send_activation to 2 mb 0 channel 1 : tensor<6x8xf32>
    gpipe.recv_gradient from 2 mb 0 channel 0 : tensor<6x4xf32>
    gpipe.recv_gradient from 2 mb 0 channel 1 : tensor<6x8xf32>
    gpipe.backward @stage1 mb 0 rows 6
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<6x4xf32>
    gpipe.optimizer_step
  }
  gpipe.program device 2 {
    gpipe.recv_activation from 1 mb 0 channel 0 : tensor<6x4xf32>
    gpipe.recv_activation from 1 mb 0 channel 1 : tensor<6x8xf32>
    gpipe.load_input "labels" mb 0 rows 6
    gpipe.forward @stage2 mb 0 rows 6
    gpipe.backward @stage2 mb 0 rows 6
    gpipe.send_gradient to 1 mb 0 channel 0 : tensor<6x4xf32>
    gpipe.send_gradient to 1 mb 0 channel 1 : tensor<6x8xf32>
    gpipe.optimizer_step
  }
}

// -----

// A send to device 5 of a two-device schedule.
gpipe.model @m batch 5 {
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
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 2] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 3
    gpipe.forward @stage0 mb 0 rows 3
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "x" mb 1 rows 2
    gpipe.forward @stage0 mb 1 rows 2
    // expected-error @+2 {{device 0: send activation to device 5, micro-batch 1, channel 0 (op #5) expects peer device 1, got 5}}
    // expected-error @+1 {{device 0: send activation to device 5, micro-batch 1, channel 0 (op #5) names device 5, but the program has 2 devices}}
    gpipe.send_activation to 5 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.backward @stage0 mb 0 rows 3
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "labels" mb 0 rows 3
    gpipe.forward @stage1 mb 0 rows 3
    // expected-error @+1 {{device 1: recv activation from device 0, micro-batch 1, channel 0 (op #3) has no matching send on device 0}}
    gpipe.recv_activation from 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.load_input "labels" mb 1 rows 2
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.backward @stage1 mb 1 rows 2
    gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage1 mb 0 rows 3
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.optimizer_step
  }
}

// -----

// A device that only steps its optimizer runs no stage and loads none of its
// inputs (reported on the program, as there is no forward to attach them to).
gpipe.model @m batch 5 {
  %x = gpipe.input "x" : tensor<5x4xf32>
  %labels = gpipe.input "labels" : tensor<5xi32>
  %0 = gpipe.stage @stage0 index 0 (%x, %labels) : (tensor<5x4xf32>, tensor<5xi32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<5x4xf32>, %arg1: tensor<5xi32>):
    %1 = gpipe.layer "loss" -> tensor<f32> {
      %2 = gpipe.softmax_cross_entropy %arg0, %arg1 : (tensor<5x4xf32>, tensor<5xi32>) -> tensor<f32>
      gpipe.yield %2 : tensor<f32>
    }
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %0 : tensor<f32>
}
gpipe.schedule @m_schedule model @m microbatches 1 rows [5] {
  // expected-error @+2 {{device 0: stage 0 has no load of input 'x' for micro-batch 0}}
  // expected-error @+1 {{device 0: stage 0 has no load of input 'labels' for micro-batch 0}}
  gpipe.program device 0 {
    // expected-error @+1 {{device 0 runs no stage: it has no forward or backward}}
    gpipe.optimizer_step
  }
}

// -----

// A split backward's W runs before its B (zero-bubble schedules run B, then W).
gpipe.model @m batch 5 {
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
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 2] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 3
    gpipe.forward @stage0 mb 0 rows 3
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    // expected-error @+1 {{device 0: weight-gradient backward of stage 0, micro-batch 0 (op #4) runs before its backward (op #5)}}
    gpipe.backward_weights @stage0 mb 0 rows 3
    gpipe.backward @stage0 mb 0 rows 3
    gpipe.load_input "x" mb 1 rows 2
    gpipe.forward @stage0 mb 1 rows 2
    gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.backward_weights @stage0 mb 1 rows 2
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "labels" mb 0 rows 3
    gpipe.forward @stage1 mb 0 rows 3
    gpipe.backward @stage1 mb 0 rows 3
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.recv_activation from 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.load_input "labels" mb 1 rows 2
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.backward @stage1 mb 1 rows 2
    gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.optimizer_step
  }
}

// -----

// A device that splits its backwards runs W for every micro-batch, once: micro-batch 0's twice,
// micro-batch 1's never.
gpipe.model @m batch 5 {
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
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 2] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 3
    gpipe.forward @stage0 mb 0 rows 3
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.backward @stage0 mb 0 rows 3
    gpipe.backward_weights @stage0 mb 0 rows 3
    gpipe.load_input "x" mb 1 rows 2
    gpipe.forward @stage0 mb 1 rows 2
    gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
    // expected-error @+1 {{device 0: stage 0 has no weight-gradient backward for micro-batch 1 (the device splits its backwards, so each needs one)}}
    gpipe.backward @stage0 mb 1 rows 2
    // expected-error @+1 {{device 0: weight-gradient backward of stage 0, micro-batch 0 (op #11) duplicates op #5}}
    gpipe.backward_weights @stage0 mb 0 rows 3
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "labels" mb 0 rows 3
    gpipe.forward @stage1 mb 0 rows 3
    gpipe.backward @stage1 mb 0 rows 3
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.recv_activation from 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.load_input "labels" mb 1 rows 2
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.backward @stage1 mb 1 rows 2
    gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.optimizer_step
  }
}
