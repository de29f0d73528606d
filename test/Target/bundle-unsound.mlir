// gpipe-translate proves a schedule again before it writes its bundle, so that one edited after gpipe-compile cannot
// reach the runtime: an unknown stage (once written as "stage": -1), a receive without its send, an order that
// deadlocks under rendezvous sends (the property the compiler proves for a schedule without a send window; the
// runtime's buffered channels then cannot hang either), and one that deadlocks through a wait for a send.
// RUN: gpipe-opt %s -gpipe-compile="num-stages=2 num-microbatches=2" | sed '0,/gpipe.forward @stage0/s//gpipe.forward @nosuch/' | not gpipe-translate --gpipe-to-bundle 2>&1 | FileCheck %s --check-prefix=STAGE
// RUN: gpipe-opt %s -gpipe-compile="num-stages=2 num-microbatches=2" | sed '/send_gradient to 0 mb 0/d' | not gpipe-translate --gpipe-to-bundle 2>&1 | FileCheck %s --check-prefix=UNMATCHED
// RUN: gpipe-opt %s -gpipe-compile="num-stages=2 num-microbatches=2 send-window=0" | sed 's/backward @stage1 mb 1/backward @stage1 mb X/; s/send_gradient to 0 mb 1/send_gradient to 0 mb Y/; s/backward @stage1 mb 0/backward @stage1 mb 1/; s/send_gradient to 0 mb 0/send_gradient to 0 mb 1/; s/mb X/mb 0/; s/mb Y/mb 0/' | not gpipe-translate --gpipe-to-bundle 2>&1 | FileCheck %s --check-prefix=DEADLOCK
// With a send window of 1, device 0 taking its gradients in the order it sent its activations (micro-batch 0 first)
// deadlocks: device 1 sends micro-batch 1's gradient and waits for it to be taken before it sends micro-batch 0's.
// RUN: gpipe-opt %s -gpipe-compile="num-stages=2 num-microbatches=2 send-window=1" | sed 's/recv_gradient from 1 mb 1/recv_gradient from 1 mb X/; s/backward @stage0 mb 1/backward @stage0 mb Y/; s/recv_gradient from 1 mb 0/recv_gradient from 1 mb 1/; s/backward @stage0 mb 0/backward @stage0 mb 1/; s/mb X/mb 0/; s/mb Y/mb 0/' | not gpipe-translate --gpipe-to-bundle 2>&1 | FileCheck %s --check-prefix=WINDOW

// STAGE: error: 'gpipe.forward' op refers to @nosuch, which is not a stage of model @tiny
// UNMATCHED: error: device 0: recv gradient from device 1, micro-batch 0, channel 0 (op #8) has no matching send on device 1
// WINDOW: error: deadlock: device 0 waits at op #7 (recv gradient from device 1, micro-batch 0, channel 0) while device 1 waits at op #9 (wait for the gradient sent to device 0, micro-batch 1, channel 0)
// DEADLOCK: error: deadlock: device 0 waits at op #6 (recv gradient from device 1, micro-batch 1, channel 0) while device 1 waits at op #7 (send gradient to device 0, micro-batch 0, channel 0)
gpipe.model @tiny batch 4 {
  %x = gpipe.input "x" : tensor<4x3xf32>
  %y = gpipe.input "y" : tensor<4xi32>
  %h = gpipe.layer "fc" -> tensor<4x5xf32> {
    %w = gpipe.param "w" glorot_uniform : tensor<3x5xf32>
    %0 = gpipe.dense %x, %w : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
    %1 = gpipe.relu %0 : tensor<4x5xf32>
    gpipe.yield %1 : tensor<4x5xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.softmax_cross_entropy %h, %y : (tensor<4x5xf32>, tensor<4xi32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
