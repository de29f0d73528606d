// gpipe-verify-schedule under a send window: each send needs one wait after
// it and before the optimizer step, no point may have more sends to a peer in
// flight than the window, and the programs must not deadlock when sends never
// block, receives wait for their send and waits for their receive.
// RUN: gpipe-opt %s -split-input-file -gpipe-verify-schedule -verify-diagnostics

// A window of 1, and device 0 sends micro-batch 1 before it waits for micro-batch 0.
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
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 2] send_window 1 {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 3
    gpipe.forward @stage0 mb 0 rows 3
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "x" mb 1 rows 2
    gpipe.forward @stage0 mb 1 rows 2
    // expected-error @+1 {{device 0: send activation to device 1, micro-batch 1, channel 0 (op #5) has 2 sends to device 1 in flight, more than the send window of 1 the program was planned for}}
    gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.backward @stage0 mb 0 rows 3
    gpipe.wait_send_activation to 1 mb 0 channel 0
    gpipe.wait_send_activation to 1 mb 1 channel 0
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
    gpipe.wait_send_gradient to 0 mb 1 channel 0
    gpipe.backward @stage1 mb 0 rows 3
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.wait_send_gradient to 0 mb 0 channel 0
    gpipe.optimizer_step
  }
}

// -----

// A wait deleted: the send of micro-batch 0 is never waited for.
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
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 2] send_window 2 {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 3
    gpipe.forward @stage0 mb 0 rows 3
    // expected-error @+1 {{device 0: send activation to device 1, micro-batch 0, channel 0 (op #2) is never waited for: with a send window, each send needs a wait_send after it, before the optimizer step}}
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "x" mb 1 rows 2
    gpipe.forward @stage0 mb 1 rows 2
    gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.backward @stage0 mb 0 rows 3
    gpipe.wait_send_activation to 1 mb 1 channel 0
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
    gpipe.wait_send_gradient to 0 mb 1 channel 0
    gpipe.wait_send_gradient to 0 mb 0 channel 0
    gpipe.optimizer_step
  }
}

// -----

// A wait after the optimizer step, which needs every send complete.
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
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 2] send_window 2 {
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
    gpipe.wait_send_activation to 1 mb 0 channel 0
    gpipe.optimizer_step
    // expected-error @+1 {{device 0: wait for the activation sent to device 1, micro-batch 1, channel 0 (op #12) runs after optimizer step (op #11), which needs every send complete}}
    gpipe.wait_send_activation to 1 mb 1 channel 0
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
    gpipe.wait_send_gradient to 0 mb 1 channel 0
    gpipe.wait_send_gradient to 0 mb 0 channel 0
    gpipe.optimizer_step
  }
}

// -----

// A wait for a send that has not happened yet.
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
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 2] send_window 2 {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 3
    gpipe.forward @stage0 mb 0 rows 3
    // expected-error @+1 {{device 0: wait for the activation sent to device 1, micro-batch 1, channel 0 (op #2) has no send before it that it has not already waited for}}
    gpipe.wait_send_activation to 1 mb 1 channel 0
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "x" mb 1 rows 2
    gpipe.forward @stage0 mb 1 rows 2
    gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.backward @stage0 mb 0 rows 3
    gpipe.wait_send_activation to 1 mb 0 channel 0
    gpipe.wait_send_activation to 1 mb 1 channel 0
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
    gpipe.wait_send_gradient to 0 mb 1 channel 0
    gpipe.wait_send_gradient to 0 mb 0 channel 0
    gpipe.optimizer_step
  }
}

// -----

// Waits in a schedule without a send window: its sends complete as they are
// issued, so there is nothing to wait for.
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
    // expected-error @+1 {{device 0: wait for the activation sent to device 1, micro-batch 0, channel 0 (op #3) waits for a send, but the program's sends complete as they are issued (it has no send window)}}
    gpipe.wait_send_activation to 1 mb 0 channel 0
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

// Device 1 forwards micro-batch 1 first, but device 0 waits until micro-batch
// 0's activation is taken before it sends micro-batch 1: a cycle through the
// wait (a window of 2 would let device 0 send both first).
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
gpipe.schedule @m_schedule model @m microbatches 2 rows [3, 2] send_window 1 {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 3
    gpipe.forward @stage0 mb 0 rows 3
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "x" mb 1 rows 2
    gpipe.forward @stage0 mb 1 rows 2
    // expected-error @+1 {{deadlock: device 0 waits at op #5 (wait for the activation sent to device 1, micro-batch 0, channel 0) while device 1 waits at op #0 (recv activation from device 0, micro-batch 1, channel 0)}}
    gpipe.wait_send_activation to 1 mb 0 channel 0
    gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.backward @stage0 mb 0 rows 3
    gpipe.wait_send_activation to 1 mb 1 channel 0
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    // expected-error @+1 {{deadlock: device 1 waits at op #0 (recv activation from device 0, micro-batch 1, channel 0) while device 0 waits at op #5 (wait for the activation sent to device 1, micro-batch 0, channel 0)}}
    gpipe.recv_activation from 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.load_input "labels" mb 1 rows 2
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.load_input "labels" mb 0 rows 3
    gpipe.forward @stage1 mb 0 rows 3
    gpipe.backward @stage1 mb 1 rows 2
    gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf32>
    gpipe.wait_send_gradient to 0 mb 1 channel 0
    gpipe.backward @stage1 mb 0 rows 3
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
    gpipe.wait_send_gradient to 0 mb 0 channel 0
    gpipe.optimizer_step
  }
}
