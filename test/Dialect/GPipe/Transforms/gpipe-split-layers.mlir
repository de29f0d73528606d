// gpipe-split-layers cuts a layer before each product after its first (a product: at least 16 FLOPs per element it writes and a quarter of its layer's FLOPs) where one value crosses and each parameter is read on one side; the pieces carry their parameters and their share of the cost. Layers it cannot or need not cut stay whole.
// RUN: gpipe-opt %s -split-input-file -gpipe-estimate-cost -gpipe-split-layers | FileCheck %s
// gpipe-compile runs it by default; split-layers=false keeps the layers whole.
// RUN: gpipe-opt %examples/transformer/transformer.mlir --gpipe-compile="stages=2 microbatches=2" | FileCheck %s --check-prefix=COMPILE
// RUN: gpipe-opt %examples/transformer/transformer.mlir --gpipe-compile="stages=2 microbatches=2 split-layers=false" | FileCheck %s --check-prefix=WHOLE

// COMPILE: gpipe.layer "block0.mlp:1"
// COMPILE: gpipe.layer "block0.mlp:2"
// WHOLE-NOT: :1"
// WHOLE: gpipe.layer "block0.mlp"
// WHOLE-NOT: :2"

// A feed-forward block: layer norm 256 + dense 2176 + gelu 1024 = 3456 FLOPs; parameters 64 + 1152 + the unread
// spare's 12 = 1228 B; results 128 + 512 + 512 B. Then dense 2048 + add 32 = 2080 FLOPs, fc2.w 1024 B, 256 B. The
// second piece reads the skip value %x from outside, as the layer did.
// CHECK-LABEL: gpipe.model @ffn
// CHECK: %[[X:.*]] = gpipe.input "x"
// CHECK: %[[UP:.*]] = gpipe.layer "mlp:1" -> tensor<4x32xf32> attributes {cost = #gpipe.cost<flops = 3456, param_bytes = 1228, activation_bytes = 1152>}
// CHECK-DAG: gpipe.param "mlp.ln.gamma"
// CHECK-DAG: gpipe.param "mlp.ln.beta"
// CHECK-DAG: gpipe.param "mlp.fc1.w"
// CHECK-DAG: gpipe.param "mlp.fc1.b"
// CHECK-DAG: gpipe.param "mlp.spare"
// CHECK: gpipe.layer_norm %[[X]]
// CHECK: gpipe.dense
// CHECK: %[[G:.*]] = gpipe.gelu
// CHECK: gpipe.yield %[[G]] : tensor<4x32xf32>
// CHECK: %[[DOWN:.*]] = gpipe.layer "mlp:2" -> tensor<4x8xf32> attributes {cost = #gpipe.cost<flops = 2080, param_bytes = 1024, activation_bytes = 256>}
// CHECK-NEXT: %[[W2:.*]] = gpipe.param "mlp.fc2.w"
// CHECK-NEXT: %[[D:.*]] = gpipe.dense %[[UP]], %[[W2]]
// CHECK-NEXT: %[[S:.*]] = gpipe.add %[[X]], %[[D]]
// CHECK-NEXT: gpipe.yield %[[S]]
// CHECK: gpipe.layer "loss"
// CHECK: gpipe.mse_loss %[[DOWN]], %[[X]]
gpipe.model @ffn batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %h = gpipe.layer "mlp" -> tensor<4x8xf32> {
    %g = gpipe.param "mlp.ln.gamma" ones : tensor<8xf32>
    %b = gpipe.param "mlp.ln.beta" zeros : tensor<8xf32>
    %w1 = gpipe.param "mlp.fc1.w" glorot_uniform : tensor<8x32xf32>
    %b1 = gpipe.param "mlp.fc1.b" zeros : tensor<32xf32>
    %w2 = gpipe.param "mlp.fc2.w" glorot_uniform : tensor<32x8xf32>
    %spare = gpipe.param "mlp.spare" zeros : tensor<3xf32>
    %0 = gpipe.layer_norm %x, %g, %b : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %1 = gpipe.dense %0, %w1, %b1 : (tensor<4x8xf32>, tensor<8x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
    %2 = gpipe.gelu %1 : tensor<4x32xf32>
    %3 = gpipe.dense %2, %w2 : (tensor<4x32xf32>, tensor<32x8xf32>) -> tensor<4x8xf32>
    %4 = gpipe.add %x, %3 : tensor<4x8xf32>
    gpipe.yield %4 : tensor<4x8xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %h, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// One weight read by both products: no cut keeps each parameter on one side.
// CHECK-LABEL: gpipe.model @tied
// CHECK: gpipe.layer "twice" ->
// CHECK-NOT: :1"
gpipe.model @tied batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %h = gpipe.layer "twice" -> tensor<4x8xf32> {
    %w = gpipe.param "w" glorot_uniform : tensor<8x8xf32>
    %0 = gpipe.dense %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %1 = gpipe.relu %0 : tensor<4x8xf32>
    %2 = gpipe.dense %1, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    gpipe.yield %2 : tensor<4x8xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %h, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// Two values of the first part are read after the second product (the first product's and the residual's): no cut.
// CHECK-LABEL: gpipe.model @two_values
// CHECK: gpipe.layer "block" ->
// CHECK-NOT: :1"
gpipe.model @two_values batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %h = gpipe.layer "block" -> tensor<4x8xf32> {
    %w1 = gpipe.param "w1" glorot_uniform : tensor<8x8xf32>
    %w2 = gpipe.param "w2" glorot_uniform : tensor<8x8xf32>
    %0 = gpipe.dense %x, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %1 = gpipe.relu %0 : tensor<4x8xf32>
    %2 = gpipe.dense %1, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %3 = gpipe.add %0, %2 : tensor<4x8xf32>
    gpipe.yield %3 : tensor<4x8xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %h, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A cost written on the layer by hand cannot be shared out; a layer below the model's mean (here the first, 1024
// FLOPs against a mean of 6884) is not worth cutting; one product with element-wise ops stays whole.
// CHECK-LABEL: gpipe.model @whole
// CHECK: gpipe.layer "small" ->
// CHECK: gpipe.layer "pinned" -> tensor<4x8xf32> attributes {cost = #gpipe.cost<flops = 9000, param_bytes = 0, activation_bytes = 0>}
// CHECK: gpipe.layer "one_product" ->
// CHECK-NOT: :1"
gpipe.model @whole batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %s = gpipe.layer "small" -> tensor<4x8xf32> {
    %w1 = gpipe.param "s.w1" glorot_uniform : tensor<8x8xf32>
    %w2 = gpipe.param "s.w2" glorot_uniform : tensor<8x8xf32>
    %0 = gpipe.dense %x, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %1 = gpipe.dense %0, %w2 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    gpipe.yield %1 : tensor<4x8xf32>
  }
  %p = gpipe.layer "pinned" -> tensor<4x8xf32> attributes {cost = #gpipe.cost<flops = 9000, param_bytes = 0, activation_bytes = 0>} {
    %w1 = gpipe.param "p.w1" glorot_uniform : tensor<8x64xf32>
    %w2 = gpipe.param "p.w2" glorot_uniform : tensor<64x8xf32>
    %0 = gpipe.dense %s, %w1 : (tensor<4x8xf32>, tensor<8x64xf32>) -> tensor<4x64xf32>
    %1 = gpipe.dense %0, %w2 : (tensor<4x64xf32>, tensor<64x8xf32>) -> tensor<4x8xf32>
    gpipe.yield %1 : tensor<4x8xf32>
  }
  %o = gpipe.layer "one_product" -> tensor<4x8xf32> {
    %w = gpipe.param "o.w" glorot_uniform : tensor<8x256xf32>
    %w2 = gpipe.param "o.w2" glorot_uniform : tensor<256x8xf32>
    %0 = gpipe.dense %p, %w : (tensor<4x8xf32>, tensor<8x256xf32>) -> tensor<4x256xf32>
    %1 = gpipe.relu %0 : tensor<4x256xf32>
    %2 = gpipe.dense %1, %w2 {cost = #gpipe.cost<flops = 10, param_bytes = 8192, activation_bytes = 128>} : (tensor<4x256xf32>, tensor<256x8xf32>) -> tensor<4x8xf32>
    gpipe.yield %2 : tensor<4x8xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %o, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
