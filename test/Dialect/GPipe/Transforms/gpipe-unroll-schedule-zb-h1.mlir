// schedule=zb-h1 splits each stage's backward into B, what the input gradient needs, and W, the
// parameter gradients (gpipe.weights), and runs W in its own instruction: device 1 defers its W's
// by one micro-batch (W(m) after B(m + 1)), device 0 by none. A dense or layer-norm gradient that B
// needs keeps its input gradient, and a clone in W computes its parameter gradients; the bundle
// writes where W starts (weights_from) and leaves each half's other results out (-1).
// RUN: gpipe-opt %s --gpipe-compile="num-stages=2 num-microbatches=2 schedule=zb-h1 remat=none" | FileCheck %s
// RUN: gpipe-opt %s --gpipe-compile="num-stages=2 num-microbatches=2 schedule=zb-h1 remat=none" | gpipe-translate --gpipe-to-bundle | FileCheck %s --check-prefix=BUNDLE

// Stage 0 sends no input gradient: all of its backward is W.
// CHECK-LABEL: gpipe.stage_backward @stage0 attributes {gpipe.split
// CHECK: gpipe.dense_grad {{.*}} {gpipe.weights}
// CHECK: gpipe.accumulate_grad "fc1.w", {{.*}} {gpipe.weights}
// CHECK: gpipe.bias_grad {{.*}} {gpipe.weights}
// CHECK: gpipe.accumulate_grad "fc1.b", {{.*}} {gpipe.weights}
// CHECK-LABEL: gpipe.stage_backward @stage1 attributes {gpipe.split
// CHECK: %[[DY:.*]] = gpipe.mse_loss_grad
// CHECK-NEXT: %[[DX:.*]], %{{.*}} = gpipe.dense_grad %[[DY]], %[[H:[0-9]+]], %[[W:[0-9]+]] :
// CHECK-NEXT: %[[DXLN:.*]], %{{.*}}, %{{.*}} = gpipe.layer_norm_grad %[[DX]],
// CHECK-NEXT: %{{.*}}, %[[DW:.*]] = gpipe.dense_grad %[[DY]], %[[H]], %[[W]] {gpipe.weights}
// CHECK-NEXT: gpipe.accumulate_grad "fc2.w", %[[DW]] {gpipe.weights}
// CHECK-NEXT: %{{.*}}, %[[DG:.*]], %[[DB:.*]] = gpipe.layer_norm_grad %[[DX]], {{.*}} {gpipe.weights}
// CHECK-NEXT: gpipe.accumulate_grad "ln.gamma", %[[DG]] {gpipe.weights}
// CHECK-NEXT: gpipe.accumulate_grad "ln.beta", %[[DB]] {gpipe.weights}
// CHECK-NEXT: gpipe.yield %[[DXLN]]

// CHECK-LABEL: gpipe.program device 0
// CHECK:      gpipe.backward @stage0 mb 0 rows 2
// CHECK-NEXT: gpipe.backward_weights @stage0 mb 0 rows 2
// CHECK:      gpipe.backward @stage0 mb 1 rows 2
// CHECK-NEXT: gpipe.backward_weights @stage0 mb 1 rows 2
// CHECK-NEXT: gpipe.wait_send_activation to 1 mb 0 channel 0
// CHECK-NEXT: gpipe.wait_send_activation to 1 mb 1 channel 0
// CHECK-NEXT: gpipe.optimizer_step
// CHECK-LABEL: gpipe.program device 1
// CHECK:      gpipe.backward @stage1 mb 0 rows 2
// CHECK:      gpipe.backward @stage1 mb 1 rows 2
// CHECK-NEXT: gpipe.send_gradient to 0 mb 1
// CHECK-NEXT: gpipe.backward_weights @stage1 mb 0 rows 2
// CHECK-NEXT: gpipe.backward_weights @stage1 mb 1 rows 2
// CHECK-NEXT: gpipe.wait_send_gradient to 0 mb 0 channel 0
// CHECK-NEXT: gpipe.wait_send_gradient to 0 mb 1 channel 0
// CHECK-NEXT: gpipe.optimizer_step

// BUNDLE-COUNT-4: "op": "backward_weights",
// BUNDLE: "weights_from": 0
// BUNDLE: "weights_from": 3
gpipe.model @net batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %y = gpipe.input "y" : tensor<4x8xf32>
  %h1 = gpipe.layer "fc1" -> tensor<4x8xf32> attributes {cost = #gpipe.cost<flops = 10, param_bytes = 288, activation_bytes = 128>} {
    %w = gpipe.param "fc1.w" glorot_uniform : tensor<8x8xf32>
    %b = gpipe.param "fc1.b" zeros : tensor<8xf32>
    %0 = gpipe.dense %x, %w, %b : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    gpipe.yield %0 : tensor<4x8xf32>
  }
  %h2 = gpipe.layer "fc2" -> tensor<4x8xf32> attributes {cost = #gpipe.cost<flops = 10, param_bytes = 288, activation_bytes = 128>} {
    %g = gpipe.param "ln.gamma" ones : tensor<8xf32>
    %be = gpipe.param "ln.beta" zeros : tensor<8xf32>
    %w = gpipe.param "fc2.w" glorot_uniform : tensor<8x8xf32>
    %0 = gpipe.layer_norm %h1, %g, %be : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %1 = gpipe.dense %0, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    gpipe.yield %1 : tensor<4x8xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> attributes {cost = #gpipe.cost<flops = 10, param_bytes = 0, activation_bytes = 4>} {
    %0 = gpipe.mse_loss %h2, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
