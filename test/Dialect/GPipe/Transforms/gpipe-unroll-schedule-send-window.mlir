// With send-window=N, gpipe-unroll-schedule lets sends complete in the
// background and places each one's wait: before a send that would put N + 1
// sends to one peer in flight, the device waits for the oldest; before its
// optimizer step, for every send left. The verifier proves the result, and the
// memory plan keeps each sent value until its wait.
// RUN: gpipe-opt %s -gpipe-unroll-schedule="num-microbatches=3 send-window=1" | FileCheck %s --check-prefix=W1
// RUN: gpipe-opt %s -gpipe-unroll-schedule="num-microbatches=3 send-window=2" | FileCheck %s --check-prefix=W2
// RUN: gpipe-opt %examples/mlp/mlp.mlir --gpipe-compile="stages=2 microbatches=4 send-window=0" | FileCheck %s --check-prefix=NOWINDOW
// RUN: gpipe-opt %examples/mlp/mlp.mlir --gpipe-compile="stages=2 microbatches=4 send-window=1" | FileCheck %s --check-prefix=PLAN1
// RUN: gpipe-opt %examples/mlp/mlp.mlir --gpipe-compile="stages=2 microbatches=4 send-window=2" | FileCheck %s --check-prefix=PLAN2
// RUN: gpipe-opt %s -gpipe-unroll-schedule="num-microbatches=3 schedule=1f1b send-window=1" -gpipe-verify-schedule | FileCheck %s --check-prefix=ONEF

// W1-LABEL: gpipe.schedule @mlp_schedule model @mlp microbatches 3 rows [3, 2, 2] send_window 1 {
// W1-NEXT:    gpipe.program device 0 {
// W1-NEXT:      gpipe.load_input "x" mb 0 rows 3
// W1-NEXT:      gpipe.forward @stage0 mb 0 rows 3
// W1-NEXT:      gpipe.send_activation to 1 mb 0 channel 0 : tensor<3x4xf32>
// W1-NEXT:      gpipe.load_input "x" mb 1 rows 2
// W1-NEXT:      gpipe.forward @stage0 mb 1 rows 2
// W1-NEXT:      gpipe.wait_send_activation to 1 mb 0 channel 0
// W1-NEXT:      gpipe.send_activation to 1 mb 1 channel 0 : tensor<2x4xf32>
// W1-NEXT:      gpipe.load_input "x" mb 2 rows 2
// W1-NEXT:      gpipe.forward @stage0 mb 2 rows 2
// W1-NEXT:      gpipe.wait_send_activation to 1 mb 1 channel 0
// W1-NEXT:      gpipe.send_activation to 1 mb 2 channel 0 : tensor<2x4xf32>
// W1-NEXT:      gpipe.recv_gradient from 1 mb 2 channel 0 : tensor<2x4xf32>
// W1-NEXT:      gpipe.backward @stage0 mb 2 rows 2
// W1-NEXT:      gpipe.recv_gradient from 1 mb 1 channel 0 : tensor<2x4xf32>
// W1-NEXT:      gpipe.backward @stage0 mb 1 rows 2
// W1-NEXT:      gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<3x4xf32>
// W1-NEXT:      gpipe.backward @stage0 mb 0 rows 3
// W1-NEXT:      gpipe.wait_send_activation to 1 mb 2 channel 0
// W1-NEXT:      gpipe.optimizer_step
// W1-NEXT:    }
// W1-NEXT:    gpipe.program device 1 {
// W1-NEXT:      gpipe.recv_activation from 0 mb 0 channel 0 : tensor<3x4xf32>
// W1-NEXT:      gpipe.load_input "labels" mb 0 rows 3
// W1-NEXT:      gpipe.forward @stage1 mb 0 rows 3
// W1-NEXT:      gpipe.recv_activation from 0 mb 1 channel 0 : tensor<2x4xf32>
// W1-NEXT:      gpipe.load_input "labels" mb 1 rows 2
// W1-NEXT:      gpipe.forward @stage1 mb 1 rows 2
// W1-NEXT:      gpipe.recv_activation from 0 mb 2 channel 0 : tensor<2x4xf32>
// W1-NEXT:      gpipe.load_input "labels" mb 2 rows 2
// W1-NEXT:      gpipe.forward @stage1 mb 2 rows 2
// W1-NEXT:      gpipe.backward @stage1 mb 2 rows 2
// W1-NEXT:      gpipe.send_gradient to 0 mb 2 channel 0 : tensor<2x4xf32>
// W1-NEXT:      gpipe.backward @stage1 mb 1 rows 2
// W1-NEXT:      gpipe.wait_send_gradient to 0 mb 2 channel 0
// W1-NEXT:      gpipe.send_gradient to 0 mb 1 channel 0 : tensor<2x4xf32>
// W1-NEXT:      gpipe.backward @stage1 mb 0 rows 3
// W1-NEXT:      gpipe.wait_send_gradient to 0 mb 1 channel 0
// W1-NEXT:      gpipe.send_gradient to 0 mb 0 channel 0 : tensor<3x4xf32>
// W1-NEXT:      gpipe.wait_send_gradient to 0 mb 0 channel 0
// W1-NEXT:      gpipe.optimizer_step
// W1-NEXT:    }

// Two in flight: the first wait comes before the third send.
// W2-LABEL: gpipe.schedule @mlp_schedule model @mlp microbatches 3 rows [3, 2, 2] send_window 2 {
// W2:           gpipe.send_activation to 1 mb 1 channel 0
// W2-NEXT:      gpipe.load_input "x" mb 2 rows 2
// W2-NEXT:      gpipe.forward @stage0 mb 2 rows 2
// W2-NEXT:      gpipe.wait_send_activation to 1 mb 0 channel 0
// W2-NEXT:      gpipe.send_activation to 1 mb 2 channel 0
// W2:           gpipe.backward @stage0 mb 0 rows 3
// W2-NEXT:      gpipe.wait_send_activation to 1 mb 1 channel 0
// W2-NEXT:      gpipe.wait_send_activation to 1 mb 2 channel 0
// W2-NEXT:      gpipe.optimizer_step

// The plan keeps each sent value until its wait. The MLP example (batch 64,
// M = 4: 16 rows of 512 floats, 32768 bytes, cross each boundary): without a
// window nothing waits and nothing is held for a send; each send of the
// window holds one more boundary tensor, and device 0's peak, reached in its
// drain, grows by exactly those bytes (19533824 + 32768 = 19566592;
// + 65536 = 19599360).
// NOWINDOW-NOT: wait_send
// NOWINDOW:     gpipe.program device 0 attributes {gpipe.memory = {
// NOWINDOW-SAME: peak_bytes = 19533824 : i64, peak_op = {{[0-9]+}} : i64, resident_bytes = 19038208 : i64, send_held_bytes = 0 : i64}
// NOWINDOW:     gpipe.program device 1 attributes {gpipe.memory = {
// NOWINDOW-SAME: send_held_bytes = 0 : i64}
// PLAN1:        gpipe.program device 0 attributes {gpipe.memory = {
// PLAN1-SAME:   peak_bytes = 19566592 : i64, peak_op = {{[0-9]+}} : i64, resident_bytes = 19038208 : i64, send_held_bytes = 32768 : i64}
// PLAN1:        gpipe.program device 1 attributes {gpipe.memory = {
// PLAN1-SAME:   send_held_bytes = 32768 : i64}
// PLAN2:        gpipe.program device 0 attributes {gpipe.memory = {
// PLAN2-SAME:   peak_bytes = 19599360 : i64, peak_op = {{[0-9]+}} : i64, resident_bytes = 19038208 : i64, send_held_bytes = 65536 : i64}
// PLAN2:        gpipe.program device 1 attributes {gpipe.memory = {
// PLAN2-SAME:   send_held_bytes = 65536 : i64}

// 1F1B: the waits fall where the window fills, between the steady state's
// forwards and backwards.
// ONEF-LABEL: gpipe.schedule @mlp_schedule model @mlp microbatches 3 rows [3, 2, 2] send_window 1 {
// ONEF:         gpipe.send_activation to 1 mb 0 channel 0
// ONEF:         gpipe.wait_send_activation to 1 mb 0 channel 0
// ONEF-NEXT:    gpipe.send_activation to 1 mb 1 channel 0
// ONEF:         gpipe.wait_send_activation to 1 mb 1 channel 0
// ONEF-NEXT:    gpipe.send_activation to 1 mb 2 channel 0
// ONEF-NEXT:    gpipe.backward @stage0 mb 1 rows 2
// ONEF-NEXT:    gpipe.recv_gradient from 1 mb 2 channel 0
// ONEF-NEXT:    gpipe.backward @stage0 mb 2 rows 2
// ONEF-NEXT:    gpipe.wait_send_activation to 1 mb 2 channel 0
// ONEF-NEXT:    gpipe.optimizer_step
// ONEF:         gpipe.program device 1 {
// ONEF:         gpipe.send_gradient to 0 mb 0 channel 0
// ONEF:         gpipe.backward @stage1 mb 1 rows 2
// ONEF-NEXT:    gpipe.wait_send_gradient to 0 mb 0 channel 0
// ONEF-NEXT:    gpipe.send_gradient to 0 mb 1 channel 0
// ONEF:         gpipe.backward @stage1 mb 2 rows 2
// ONEF-NEXT:    gpipe.wait_send_gradient to 0 mb 1 channel 0
// ONEF-NEXT:    gpipe.send_gradient to 0 mb 2 channel 0
// ONEF-NEXT:    gpipe.wait_send_gradient to 0 mb 2 channel 0
// ONEF-NEXT:    gpipe.optimizer_step

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
