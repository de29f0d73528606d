// Every gpipe op in every form parses, verifies, prints as checked here and round-trips.
// RUN: gpipe-opt %s --split-input-file --verify-roundtrip | FileCheck %s
// RUN: gpipe-opt %s --split-input-file --mlir-print-op-generic | gpipe-opt --split-input-file | FileCheck %s

// The smallest model: one input, one layer computing the loss, the return.
// CHECK-LABEL: gpipe.model @minimal batch 4 {
// CHECK:         %[[X:.*]] = gpipe.input "x" : tensor<4x8xf32>
// CHECK:         %[[LOSS:.*]] = gpipe.layer "loss" -> tensor<f32> {
// CHECK:           %[[L:.*]] = gpipe.mse_loss %[[X]], %[[X]] : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
// CHECK:           gpipe.yield %[[L]] : tensor<f32>
// CHECK:         gpipe.return %[[LOSS]] : tensor<f32>
gpipe.model @minimal batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %loss = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %loss : tensor<f32>
}

// -----

// Every initializer; `scale` only with normal and uniform, printed in full precision.
// CHECK-LABEL: gpipe.model @initializers batch 2 {
// CHECK:         gpipe.param "p.zeros" zeros : tensor<4xf32>
// CHECK:         gpipe.param "p.ones" ones : tensor<4xf32>
// CHECK:         gpipe.param "p.normal" normal : tensor<4x4xf32>
// CHECK:         gpipe.param "p.normal.scaled" normal scale 2.000000e-02 : tensor<4x4xf32>
// CHECK:         gpipe.param "p.uniform" uniform : tensor<4x4xf32>
// CHECK:         gpipe.param "p.uniform.scaled" uniform scale 5.000000e-01 : tensor<4x4xf32>
// CHECK:         gpipe.param "p.glorot" glorot_uniform : tensor<4x4xf32>
// CHECK:         gpipe.param "p.scalar" zeros : tensor<f32>
gpipe.model @initializers batch 2 {
  %x = gpipe.input "x" : tensor<2x4xf32>
  %loss = gpipe.layer "params" -> tensor<f32> {
    %z = gpipe.param "p.zeros" zeros : tensor<4xf32>
    %o = gpipe.param "p.ones" ones : tensor<4xf32>
    %n = gpipe.param "p.normal" normal : tensor<4x4xf32>
    %ns = gpipe.param "p.normal.scaled" normal scale 0.02 : tensor<4x4xf32>
    %u = gpipe.param "p.uniform" uniform : tensor<4x4xf32>
    %us = gpipe.param "p.uniform.scaled" uniform scale 0.5 : tensor<4x4xf32>
    %g = gpipe.param "p.glorot" glorot_uniform : tensor<4x4xf32>
    %s = gpipe.param "p.scalar" zeros : tensor<f32>
    %0 = gpipe.mse_loss %x, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %loss : tensor<f32>
}

// -----

// Dense with and without bias, the element-wise ops, add and dropout.
// CHECK-LABEL: gpipe.model @elementwise batch 8 {
// CHECK:         %[[X:.*]] = gpipe.input "x" : tensor<8x16xf32>
// CHECK:         %[[H:.*]] = gpipe.layer "block" -> tensor<8x32xf32> {
// CHECK:           %[[W:.*]] = gpipe.param "block.w" glorot_uniform : tensor<16x32xf32>
// CHECK:           %[[B:.*]] = gpipe.param "block.b" zeros : tensor<32xf32>
// CHECK:           %[[V:.*]] = gpipe.param "block.v" glorot_uniform : tensor<32x32xf32>
// CHECK:           %[[D0:.*]] = gpipe.dense %[[X]], %[[W]], %[[B]]
// CHECK-SAME:        : (tensor<8x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
// CHECK:           %[[D1:.*]] = gpipe.dense %[[D0]], %[[V]]
// CHECK-SAME:        : (tensor<8x32xf32>, tensor<32x32xf32>) -> tensor<8x32xf32>
// CHECK:           %[[R:.*]] = gpipe.relu %[[D1]] : tensor<8x32xf32>
// CHECK:           %[[G:.*]] = gpipe.gelu %[[R]] : tensor<8x32xf32>
// CHECK:           %[[T:.*]] = gpipe.tanh %[[G]] : tensor<8x32xf32>
// CHECK:           %[[S:.*]] = gpipe.softmax %[[T]] : tensor<8x32xf32>
// CHECK:           %[[A:.*]] = gpipe.add %[[S]], %[[D0]] : tensor<8x32xf32>
// CHECK:           %[[DR:.*]] = gpipe.dropout %[[A]] rate 1.000000e-01 seed 7 : tensor<8x32xf32>
// CHECK:           gpipe.yield %[[DR]] : tensor<8x32xf32>
gpipe.model @elementwise batch 8 {
  %x = gpipe.input "x" : tensor<8x16xf32>
  %h = gpipe.layer "block" -> tensor<8x32xf32> {
    %w = gpipe.param "block.w" glorot_uniform : tensor<16x32xf32>
    %b = gpipe.param "block.b" zeros : tensor<32xf32>
    %v = gpipe.param "block.v" glorot_uniform : tensor<32x32xf32>
    %0 = gpipe.dense %x, %w, %b : (tensor<8x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
    %1 = gpipe.dense %0, %v : (tensor<8x32xf32>, tensor<32x32xf32>) -> tensor<8x32xf32>
    %2 = gpipe.relu %1 : tensor<8x32xf32>
    %3 = gpipe.gelu %2 : tensor<8x32xf32>
    %4 = gpipe.tanh %3 : tensor<8x32xf32>
    %5 = gpipe.softmax %4 : tensor<8x32xf32>
    %6 = gpipe.add %5, %0 : tensor<8x32xf32>
    %7 = gpipe.dropout %6 rate 0.1 seed 7 : tensor<8x32xf32>
    gpipe.yield %7 : tensor<8x32xf32>
  }
  %loss = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %h, %h : (tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %loss : tensor<f32>
}

// -----

// Dense on a rank-3 input contracts the last dimension only; a rate-0 dropout is valid.
// CHECK-LABEL: gpipe.model @dense_rank3 batch 2 {
// CHECK:         gpipe.dense %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x5x16xf32>, tensor<16x4xf32>, tensor<4xf32>) -> tensor<2x5x4xf32>
// CHECK:         gpipe.dropout %{{.*}} rate 0.000000e+00 seed -3 : tensor<2x5x4xf32>
gpipe.model @dense_rank3 batch 2 {
  %x = gpipe.input "x" : tensor<2x5x16xf32>
  %loss = gpipe.layer "proj" -> tensor<f32> {
    %w = gpipe.param "proj.w" glorot_uniform : tensor<16x4xf32>
    %b = gpipe.param "proj.b" zeros : tensor<4xf32>
    %0 = gpipe.dense %x, %w, %b : (tensor<2x5x16xf32>, tensor<16x4xf32>, tensor<4xf32>) -> tensor<2x5x4xf32>
    %1 = gpipe.dropout %0 rate 0.0 seed -3 : tensor<2x5x4xf32>
    %2 = gpipe.mse_loss %1, %0 : (tensor<2x5x4xf32>, tensor<2x5x4xf32>) -> tensor<f32>
    gpipe.yield %2 : tensor<f32>
  }
  gpipe.return %loss : tensor<f32>
}

// -----

// layer_norm elides the default epsilon (1e-5, even when written) and prints any other.
// CHECK-LABEL: gpipe.model @layer_norm batch 4 {
// CHECK:         %[[X:.*]] = gpipe.input "x" : tensor<4x8xf32>
// CHECK:         %[[G:.*]] = gpipe.param "ln.gamma" ones : tensor<8xf32>
// CHECK:         %[[B:.*]] = gpipe.param "ln.beta" zeros : tensor<8xf32>
// CHECK:         gpipe.layer_norm %[[X]], %[[G]], %[[B]] : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK:         gpipe.layer_norm %[[X]], %[[G]], %[[B]] : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK:         gpipe.layer_norm %[[X]], %[[G]], %[[B]] {epsilon = 1.000000e-03 : f64}
// CHECK-SAME:      : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
gpipe.model @layer_norm batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %loss = gpipe.layer "ln" -> tensor<f32> {
    %g = gpipe.param "ln.gamma" ones : tensor<8xf32>
    %b = gpipe.param "ln.beta" zeros : tensor<8xf32>
    %0 = gpipe.layer_norm %x, %g, %b : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %1 = gpipe.layer_norm %x, %g, %b {epsilon = 1.0e-5 : f64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %2 = gpipe.layer_norm %x, %g, %b {epsilon = 1.0e-3 : f64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %3 = gpipe.add %0, %1 : tensor<4x8xf32>
    %4 = gpipe.mse_loss %3, %2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %4 : tensor<f32>
  }
  gpipe.return %loss : tensor<f32>
}

// -----

// A small transformer: embedding with i32 and i64 ids, attention with and without
// `causal`, and a cross-entropy loss over rank-3 logits.
// CHECK-LABEL: gpipe.model @transformer batch 2 {
// CHECK:         %[[TOK:.*]] = gpipe.input "tokens" : tensor<2x16xi32>
// CHECK:         %[[POS:.*]] = gpipe.input "positions" : tensor<2x16xi64>
// CHECK:         %[[TGT:.*]] = gpipe.input "targets" : tensor<2x16xi64>
// CHECK:         %[[E:.*]] = gpipe.layer "embed" -> tensor<2x16x64xf32> {
// CHECK:           %[[TT:.*]] = gpipe.param "embed.tokens" normal scale 2.000000e-02 : tensor<96x64xf32>
// CHECK:           %[[PT:.*]] = gpipe.param "embed.positions" normal scale 1.000000e-02 : tensor<16x64xf32>
// CHECK:           %[[E0:.*]] = gpipe.embedding %[[TOK]], %[[TT]] : (tensor<2x16xi32>, tensor<96x64xf32>) -> tensor<2x16x64xf32>
// CHECK:           %[[E1:.*]] = gpipe.embedding %[[POS]], %[[PT]] : (tensor<2x16xi64>, tensor<16x64xf32>) -> tensor<2x16x64xf32>
// CHECK:           %[[E2:.*]] = gpipe.add %[[E0]], %[[E1]] : tensor<2x16x64xf32>
// CHECK:           gpipe.yield %[[E2]] : tensor<2x16x64xf32>
// CHECK:         gpipe.layer "attn" -> tensor<2x16x64xf32> {
// CHECK:           %[[QKV:.*]] = gpipe.param "attn.qkv" glorot_uniform : tensor<64x192xf32>
// CHECK:           %[[OUT:.*]] = gpipe.param "attn.out" glorot_uniform : tensor<64x64xf32>
// CHECK:           gpipe.attention %[[E]], %[[QKV]], %[[OUT]] heads 4 causal
// CHECK-SAME:        : (tensor<2x16x64xf32>, tensor<64x192xf32>, tensor<64x64xf32>) -> tensor<2x16x64xf32>
// CHECK:           gpipe.attention %{{.*}}, %[[QKV]], %[[OUT]] heads 1 :
// CHECK-SAME:        (tensor<2x16x64xf32>, tensor<64x192xf32>, tensor<64x64xf32>) -> tensor<2x16x64xf32>
// CHECK:         gpipe.layer "head" -> tensor<f32> {
// CHECK:           gpipe.softmax_cross_entropy %{{.*}}, %[[TGT]] : (tensor<2x16x96xf32>, tensor<2x16xi64>) -> tensor<f32>
gpipe.model @transformer batch 2 {
  %tokens = gpipe.input "tokens" : tensor<2x16xi32>
  %positions = gpipe.input "positions" : tensor<2x16xi64>
  %targets = gpipe.input "targets" : tensor<2x16xi64>
  %e = gpipe.layer "embed" -> tensor<2x16x64xf32> {
    %tt = gpipe.param "embed.tokens" normal scale 0.02 : tensor<96x64xf32>
    %pt = gpipe.param "embed.positions" normal scale 0.01 : tensor<16x64xf32>
    %0 = gpipe.embedding %tokens, %tt : (tensor<2x16xi32>, tensor<96x64xf32>) -> tensor<2x16x64xf32>
    %1 = gpipe.embedding %positions, %pt : (tensor<2x16xi64>, tensor<16x64xf32>) -> tensor<2x16x64xf32>
    %2 = gpipe.add %0, %1 : tensor<2x16x64xf32>
    gpipe.yield %2 : tensor<2x16x64xf32>
  }
  %a = gpipe.layer "attn" -> tensor<2x16x64xf32> {
    %qkv = gpipe.param "attn.qkv" glorot_uniform : tensor<64x192xf32>
    %out = gpipe.param "attn.out" glorot_uniform : tensor<64x64xf32>
    %0 = gpipe.attention %e, %qkv, %out heads 4 causal : (tensor<2x16x64xf32>, tensor<64x192xf32>, tensor<64x64xf32>) -> tensor<2x16x64xf32>
    %1 = gpipe.attention %0, %qkv, %out heads 1 : (tensor<2x16x64xf32>, tensor<64x192xf32>, tensor<64x64xf32>) -> tensor<2x16x64xf32>
    gpipe.yield %1 : tensor<2x16x64xf32>
  }
  %loss = gpipe.layer "head" -> tensor<f32> {
    %w = gpipe.param "head.w" glorot_uniform : tensor<64x96xf32>
    %0 = gpipe.dense %a, %w : (tensor<2x16x64xf32>, tensor<64x96xf32>) -> tensor<2x16x96xf32>
    %1 = gpipe.softmax_cross_entropy %0, %targets : (tensor<2x16x96xf32>, tensor<2x16xi64>) -> tensor<f32>
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %loss : tensor<f32>
}

// -----

// A classifier: cross-entropy over rank-2 logits against i32 labels.
// CHECK-LABEL: gpipe.model @classifier batch 32 {
// CHECK:         %[[X:.*]] = gpipe.input "x" : tensor<32x784xf32>
// CHECK:         %[[Y:.*]] = gpipe.input "labels" : tensor<32xi32>
// CHECK:         %[[H:.*]] = gpipe.layer "fc" -> tensor<32x10xf32> {
// CHECK:         gpipe.layer "loss" -> tensor<f32> {
// CHECK:           gpipe.softmax_cross_entropy %[[H]], %[[Y]] : (tensor<32x10xf32>, tensor<32xi32>) -> tensor<f32>
gpipe.model @classifier batch 32 {
  %x = gpipe.input "x" : tensor<32x784xf32>
  %y = gpipe.input "labels" : tensor<32xi32>
  %h = gpipe.layer "fc" -> tensor<32x10xf32> {
    %w = gpipe.param "fc.w" glorot_uniform : tensor<784x10xf32>
    %0 = gpipe.dense %x, %w : (tensor<32x784xf32>, tensor<784x10xf32>) -> tensor<32x10xf32>
    gpipe.yield %0 : tensor<32x10xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.softmax_cross_entropy %h, %y : (tensor<32x10xf32>, tensor<32xi32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// `cost` on ops and layers and `cell` on layers print in the attribute dictionary.
// CHECK-LABEL: gpipe.model @annotated batch 4 {
// CHECK:         gpipe.layer "fc" -> tensor<4x2xf32> attributes {
// CHECK-SAME:      cell = 0 : i64
// CHECK-SAME:      cost = #gpipe.cost<flops = 80, param_bytes = 64, activation_bytes = 64>
// CHECK:           gpipe.dense %{{.*}}, %{{.*}} {cost = #gpipe.cost<flops = 64, param_bytes = 64, activation_bytes = 32>} : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
// CHECK:           gpipe.tanh %{{.*}} {cost = #gpipe.cost<flops = 16, param_bytes = 0, activation_bytes = 32>} : tensor<4x2xf32>
// CHECK:         gpipe.layer "loss" -> tensor<f32> attributes {cell = 1 : i64} {
// CHECK:           gpipe.mse_loss %{{.*}}, %{{.*}} {cost = #gpipe.cost<flops = 24, param_bytes = 0, activation_bytes = 4>} : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<f32>
gpipe.model @annotated batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %y = gpipe.input "y" : tensor<4x2xf32>
  %h = gpipe.layer "fc" -> tensor<4x2xf32> attributes {cell = 0 : i64, cost = #gpipe.cost<flops = 80, param_bytes = 64, activation_bytes = 64>} {
    %w = gpipe.param "fc.w" glorot_uniform : tensor<8x2xf32>
    %0 = gpipe.dense %x, %w {cost = #gpipe.cost<flops = 64, param_bytes = 64, activation_bytes = 32>} : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
    %1 = gpipe.tanh %0 {cost = #gpipe.cost<flops = 16, param_bytes = 0, activation_bytes = 32>} : tensor<4x2xf32>
    gpipe.yield %1 : tensor<4x2xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> attributes {cell = 1 : i64} {
    %0 = gpipe.mse_loss %h, %y {cost = #gpipe.cost<flops = 24, param_bytes = 0, activation_bytes = 4>} : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A layer may return several values (here a residual kept for later) and a model
// may carry extra attributes.
// CHECK-LABEL: gpipe.model @multi_result batch 4 attributes {note = "kept"} {
// CHECK:         %[[H:.*]]:2 = gpipe.layer "split" -> tensor<4x8xf32>, tensor<4x8xf32> {
// CHECK:           gpipe.yield %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<4x8xf32>
// CHECK:         gpipe.add %[[H]]#0, %[[H]]#1 : tensor<4x8xf32>
gpipe.model @multi_result batch 4 attributes {note = "kept"} {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %h:2 = gpipe.layer "split" -> tensor<4x8xf32>, tensor<4x8xf32> {
    %0 = gpipe.relu %x : tensor<4x8xf32>
    gpipe.yield %0, %x : tensor<4x8xf32>, tensor<4x8xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.add %h#0, %h#1 : tensor<4x8xf32>
    %1 = gpipe.mse_loss %0, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A model computing in bf16 end to end, loss included.
// CHECK-LABEL: gpipe.model @bf16 batch 4 {
// CHECK:         gpipe.input "x" : tensor<4x8xbf16>
// CHECK:         gpipe.param "fc.w" glorot_uniform : tensor<8x8xbf16>
// CHECK:         gpipe.dense %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x8xbf16>, tensor<8x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
// CHECK:         gpipe.gelu %{{.*}} : tensor<4x8xbf16>
// CHECK:         gpipe.layer_norm %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x8xbf16>, tensor<8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
// CHECK:         gpipe.softmax_cross_entropy %{{.*}}, %{{.*}} : (tensor<4x8xbf16>, tensor<4xi32>) -> tensor<bf16>
// CHECK:         gpipe.return %{{.*}} : tensor<bf16>
gpipe.model @bf16 batch 4 {
  %x = gpipe.input "x" : tensor<4x8xbf16>
  %y = gpipe.input "y" : tensor<4xi32>
  %l = gpipe.layer "fc" -> tensor<bf16> {
    %w = gpipe.param "fc.w" glorot_uniform : tensor<8x8xbf16>
    %b = gpipe.param "fc.b" zeros : tensor<8xbf16>
    %g = gpipe.param "fc.gamma" ones : tensor<8xbf16>
    %0 = gpipe.dense %x, %w, %b : (tensor<4x8xbf16>, tensor<8x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
    %1 = gpipe.gelu %0 : tensor<4x8xbf16>
    %2 = gpipe.layer_norm %1, %g, %b : (tensor<4x8xbf16>, tensor<8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
    %3 = gpipe.softmax_cross_entropy %2, %y : (tensor<4x8xbf16>, tensor<4xi32>) -> tensor<bf16>
    gpipe.yield %3 : tensor<bf16>
  }
  gpipe.return %l : tensor<bf16>
}

// -----

// A model computing in f16 end to end, attention and mse_loss included.
// CHECK-LABEL: gpipe.model @f16 batch 2 {
// CHECK:         gpipe.input "x" : tensor<2x4x8xf16>
// CHECK:         gpipe.attention %{{.*}}, %{{.*}}, %{{.*}} heads 2 causal : (tensor<2x4x8xf16>, tensor<8x24xf16>, tensor<8x8xf16>) -> tensor<2x4x8xf16>
// CHECK:         gpipe.dropout %{{.*}} rate 5.000000e-01 seed 1 : tensor<2x4x8xf16>
// CHECK:         gpipe.mse_loss %{{.*}}, %{{.*}} : (tensor<2x4x8xf16>, tensor<2x4x8xf16>) -> tensor<f16>
// CHECK:         gpipe.return %{{.*}} : tensor<f16>
gpipe.model @f16 batch 2 {
  %x = gpipe.input "x" : tensor<2x4x8xf16>
  %l = gpipe.layer "attn" -> tensor<f16> {
    %qkv = gpipe.param "attn.qkv" glorot_uniform : tensor<8x24xf16>
    %out = gpipe.param "attn.out" uniform scale 0.125 : tensor<8x8xf16>
    %0 = gpipe.attention %x, %qkv, %out heads 2 causal : (tensor<2x4x8xf16>, tensor<8x24xf16>, tensor<8x8xf16>) -> tensor<2x4x8xf16>
    %1 = gpipe.dropout %0 rate 0.5 seed 1 : tensor<2x4x8xf16>
    %2 = gpipe.mse_loss %1, %x : (tensor<2x4x8xf16>, tensor<2x4x8xf16>) -> tensor<f16>
    gpipe.yield %2 : tensor<f16>
  }
  gpipe.return %l : tensor<f16>
}

// -----

// A model after gpipe-form-stages and gpipe-insert-send-recv: stages with block
// arguments for their inputs, a value passed through a stage, and one channel per
// value crossing a boundary.
// CHECK-LABEL: gpipe.model @staged batch 4 {
// CHECK:         %[[X:.*]] = gpipe.input "x" : tensor<4x8xf32>
// CHECK:         %[[Y:.*]] = gpipe.input "y" : tensor<4x8xf32>
// CHECK:         %[[S0:.*]]:2 = gpipe.stage @stage0 index 0 (%[[X]]) attributes {
// CHECK-SAME:      cost = #gpipe.cost<flops = 32, param_bytes = 0, activation_bytes = 128>
// CHECK-SAME:      memory_bytes = 256 : i64
// CHECK-SAME:      : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
// CHECK:         ^bb0(%[[A0:.*]]: tensor<4x8xf32>):
// CHECK:           %[[H:.*]] = gpipe.layer "act" -> tensor<4x8xf32> attributes {cell = 0 : i64} {
// CHECK:             gpipe.relu %[[A0]] : tensor<4x8xf32>
// CHECK:           gpipe.yield %[[H]], %[[A0]] : tensor<4x8xf32>, tensor<4x8xf32>
// CHECK:         gpipe.send %[[S0]]#0 from 0 to 1 channel 0 : tensor<4x8xf32>
// CHECK:         gpipe.send %[[S0]]#1 from 0 to 1 channel 1 : tensor<4x8xf32>
// CHECK:         %[[R0:.*]] = gpipe.recv from 0 to 1 channel 0 : tensor<4x8xf32>
// CHECK:         %[[R1:.*]] = gpipe.recv from 0 to 1 channel 1 : tensor<4x8xf32>
// CHECK:         %[[S1:.*]] = gpipe.stage @stage1 index 1 (%[[R0]], %[[R1]], %[[Y]])
// CHECK-SAME:      : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32> {
// CHECK:         ^bb0(%[[B0:.*]]: tensor<4x8xf32>, %[[B1:.*]]: tensor<4x8xf32>, %[[B2:.*]]: tensor<4x8xf32>):
// CHECK:           gpipe.add %[[B0]], %[[B1]] : tensor<4x8xf32>
// CHECK:         gpipe.return %[[S1]] : tensor<f32>
gpipe.model @staged batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %y = gpipe.input "y" : tensor<4x8xf32>
  %s0:2 = gpipe.stage @stage0 index 0 (%x) attributes {cost = #gpipe.cost<flops = 32, param_bytes = 0, activation_bytes = 128>, memory_bytes = 256 : i64} : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  ^bb0(%a0: tensor<4x8xf32>):
    %h = gpipe.layer "act" -> tensor<4x8xf32> attributes {cell = 0 : i64} {
      %0 = gpipe.relu %a0 : tensor<4x8xf32>
      gpipe.yield %0 : tensor<4x8xf32>
    }
    gpipe.yield %h, %a0 : tensor<4x8xf32>, tensor<4x8xf32>
  }
  gpipe.send %s0#0 from 0 to 1 channel 0 : tensor<4x8xf32>
  gpipe.send %s0#1 from 0 to 1 channel 1 : tensor<4x8xf32>
  %r0 = gpipe.recv from 0 to 1 channel 0 : tensor<4x8xf32>
  %r1 = gpipe.recv from 0 to 1 channel 1 : tensor<4x8xf32>
  %s1 = gpipe.stage @stage1 index 1 (%r0, %r1, %y) : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32> {
  ^bb0(%b0: tensor<4x8xf32>, %b1: tensor<4x8xf32>, %b2: tensor<4x8xf32>):
    %l = gpipe.layer "loss" -> tensor<f32> attributes {cell = 1 : i64} {
      %0 = gpipe.add %b0, %b1 : tensor<4x8xf32>
      %1 = gpipe.mse_loss %0, %b2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
      gpipe.yield %1 : tensor<f32>
    }
    gpipe.yield %l : tensor<f32>
  }
  gpipe.return %s1 : tensor<f32>
}

// -----

// A stage without inputs prints an empty operand list and no block arguments.
// CHECK-LABEL: gpipe.model @stage_without_inputs batch 1 {
// CHECK:         %[[S:.*]] = gpipe.stage @only index 0 () : () -> tensor<f32> {
// CHECK-NEXT:      gpipe.layer "loss" -> tensor<f32> {
gpipe.model @stage_without_inputs batch 1 {
  %s = gpipe.stage @only index 0 () : () -> tensor<f32> {
    %l = gpipe.layer "loss" -> tensor<f32> {
      %p = gpipe.param "p" ones : tensor<1x2xf32>
      %0 = gpipe.mse_loss %p, %p : (tensor<1x2xf32>, tensor<1x2xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.yield %l : tensor<f32>
  }
  gpipe.return %s : tensor<f32>
}

// -----

// An unrolled schedule: one program per device using every instruction, with the
// micro-batch row counts uneven when the batch does not divide.
// CHECK-LABEL: gpipe.schedule @staged_schedule model @staged microbatches 3 rows [2, 1, 1] {
// CHECK:         gpipe.program device 0 {
// CHECK-NEXT:      gpipe.load_input "x" mb 0 rows 2
// CHECK-NEXT:      gpipe.forward @stage0 mb 0 rows 2
// CHECK-NEXT:      gpipe.send_activation to 1 mb 0 channel 0 : tensor<2x8xf32>
// CHECK-NEXT:      gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<2x8xf32>
// CHECK-NEXT:      gpipe.backward @stage0 mb 0 rows 2
// CHECK-NEXT:      gpipe.optimizer_step
// CHECK:         gpipe.program device 1 {
// CHECK-NEXT:      gpipe.recv_activation from 0 mb 0 channel 0 : tensor<2x8xf32>
// CHECK-NEXT:      gpipe.load_input "y" mb 0 rows 2
// CHECK-NEXT:      gpipe.forward @stage1 mb 0 rows 2
// CHECK-NEXT:      gpipe.backward @stage1 mb 0 rows 2
// CHECK-NEXT:      gpipe.send_gradient to 0 mb 0 channel 0 : tensor<2x8xf32>
// CHECK-NEXT:      gpipe.optimizer_step
// CHECK:         gpipe.program device 2 {
// CHECK-NOT:       gpipe.
gpipe.schedule @staged_schedule model @staged microbatches 3 rows [2, 1, 1] {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 2
    gpipe.forward @stage0 mb 0 rows 2
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<2x8xf32>
    gpipe.recv_gradient from 1 mb 0 channel 0 : tensor<2x8xf32>
    gpipe.backward @stage0 mb 0 rows 2
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<2x8xf32>
    gpipe.load_input "y" mb 0 rows 2
    gpipe.forward @stage1 mb 0 rows 2
    gpipe.backward @stage1 mb 0 rows 2
    gpipe.send_gradient to 0 mb 0 channel 0 : tensor<2x8xf32>
    gpipe.optimizer_step
  }
  gpipe.program device 2 {
  }
}

// -----

// The convolutional ops: groups is printed only when it is not 1.
// CHECK-LABEL: gpipe.model @conv
// CHECK: gpipe.conv2d %{{.*}}, %{{.*}}, %{{.*}} stride [1, 1] padding [1, 1] : (tensor<2x4x4x1xf32>, tensor<3x3x1x2xf32>, tensor<2xf32>) -> tensor<2x4x4x2xf32>
// CHECK: gpipe.conv2d %{{.*}}, %{{.*}} stride [2, 1] padding [0, 0] groups 2 : (tensor<2x4x4x2xf32>, tensor<1x1x1x4xf32>) -> tensor<2x2x4x4xf32>
// CHECK: gpipe.global_avg_pool %{{.*}} : (tensor<2x4x4x2xf32>) -> tensor<2x2xf32>
// CHECK: gpipe.flatten %{{.*}} : (tensor<2x2x4x4xf32>) -> tensor<2x32xf32>
gpipe.model @conv batch 2 {
  %x = gpipe.input "x" : tensor<2x4x4x1xf32>
  %h = gpipe.layer "conv" -> tensor<2x2xf32> {
    %w = gpipe.param "w" glorot_uniform : tensor<3x3x1x2xf32>
    %b = gpipe.param "b" zeros : tensor<2xf32>
    %0 = gpipe.conv2d %x, %w, %b stride [1, 1] padding [1, 1] groups 1 : (tensor<2x4x4x1xf32>, tensor<3x3x1x2xf32>, tensor<2xf32>) -> tensor<2x4x4x2xf32>
    %v = gpipe.param "v" glorot_uniform : tensor<1x1x1x4xf32>
    %1 = gpipe.conv2d %0, %v stride [2, 1] padding [0, 0] groups 2 : (tensor<2x4x4x2xf32>, tensor<1x1x1x4xf32>) -> tensor<2x2x4x4xf32>
    %2 = gpipe.global_avg_pool %0 : (tensor<2x4x4x2xf32>) -> tensor<2x2xf32>
    %3 = gpipe.flatten %1 : (tensor<2x2x4x4xf32>) -> tensor<2x32xf32>
    gpipe.yield %2 : tensor<2x2xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %h, %h : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// The pools: window, stride and padding, each [rows, columns].
// CHECK-LABEL: gpipe.model @pools
// CHECK: gpipe.max_pool2d %{{.*}} window [3, 3] stride [2, 2] padding [1, 1] : (tensor<2x8x7x4xf32>) -> tensor<2x4x4x4xf32>
// CHECK: gpipe.avg_pool2d %{{.*}} window [2, 1] stride [2, 1] padding [0, 0] : (tensor<2x4x4x4xf32>) -> tensor<2x2x4x4xf32>
gpipe.model @pools batch 2 {
  %x = gpipe.input "x" : tensor<2x8x7x4xf32>
  %h = gpipe.layer "pools" -> tensor<2x2x4x4xf32> {
    %0 = gpipe.max_pool2d %x window [3, 3] stride [2, 2] padding [1, 1] : (tensor<2x8x7x4xf32>) -> tensor<2x4x4x4xf32>
    %1 = gpipe.avg_pool2d %0 window [2, 1] stride [2, 1] padding [0, 0] : (tensor<2x4x4x4xf32>) -> tensor<2x2x4x4xf32>
    gpipe.yield %1 : tensor<2x2x4x4xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %h, %h : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// batch_norm prints epsilon and momentum only when they are not the defaults (1e-5, 0.1).
// CHECK-LABEL: gpipe.model @norms
// CHECK: gpipe.batch_norm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x3x3x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x3x3x4xf32>
// CHECK: gpipe.batch_norm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-03 : f64, momentum = 0.000000e+00 : f64} : (tensor<2x36xf32>, tensor<36xf32>, tensor<36xf32>, tensor<36xf32>, tensor<36xf32>) -> tensor<2x36xf32>
gpipe.model @norms batch 2 {
  %x = gpipe.input "x" : tensor<2x3x3x4xf32>
  %h = gpipe.layer "norms" -> tensor<2x36xf32> {
    %g = gpipe.param "g" ones : tensor<4xf32>
    %b = gpipe.param "b" zeros : tensor<4xf32>
    %m = gpipe.param "m" zeros : tensor<4xf32>
    %v = gpipe.param "v" ones : tensor<4xf32>
    %0 = gpipe.batch_norm %x, %g, %b, %m, %v {epsilon = 1.0e-5 : f64, momentum = 0.1 : f64} : (tensor<2x3x3x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x3x3x4xf32>
    %1 = gpipe.flatten %0 : (tensor<2x3x3x4xf32>) -> tensor<2x36xf32>
    %g2 = gpipe.param "g2" ones : tensor<36xf32>
    %b2 = gpipe.param "b2" zeros : tensor<36xf32>
    %m2 = gpipe.param "m2" zeros : tensor<36xf32>
    %v2 = gpipe.param "v2" ones : tensor<36xf32>
    %2 = gpipe.batch_norm %1, %g2, %b2, %m2, %v2 {epsilon = 1.0e-3 : f64, momentum = 0.0 : f64} : (tensor<2x36xf32>, tensor<36xf32>, tensor<36xf32>, tensor<36xf32>, tensor<36xf32>) -> tensor<2x36xf32>
    gpipe.yield %2 : tensor<2x36xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %h, %h : (tensor<2x36xf32>, tensor<2x36xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// The exact GELU (erf) beside the tanh approximation, in f32 and bf16.
// CHECK-LABEL: gpipe.model @gelu_erf batch 4 {
// CHECK:         %[[E:.*]] = gpipe.gelu_erf %{{.*}} : tensor<4x8xf32>
// CHECK:         %[[G:.*]] = gpipe.gelu %[[E]] : tensor<4x8xf32>
// CHECK:         gpipe.gelu_erf %{{.*}} : tensor<4x8xbf16>
gpipe.model @gelu_erf batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %h = gpipe.layer "act" -> tensor<4x8xf32> {
    %0 = gpipe.gelu_erf %x : tensor<4x8xf32>
    %1 = gpipe.gelu %0 : tensor<4x8xf32>
    gpipe.yield %1 : tensor<4x8xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %w = gpipe.param "w" zeros : tensor<4x8xbf16>
    %0 = gpipe.gelu_erf %w : tensor<4x8xbf16>
    %1 = gpipe.mse_loss %h, %h : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// attention with its projections' biases, causal and not.
// CHECK-LABEL: gpipe.model @biased_attention batch 2 {
// CHECK:         %[[QKV:.*]] = gpipe.param "qkv" glorot_uniform : tensor<8x24xf32>
// CHECK:         %[[OUT:.*]] = gpipe.param "out" glorot_uniform : tensor<8x8xf32>
// CHECK:         %[[BQKV:.*]] = gpipe.param "bqkv" zeros : tensor<24xf32>
// CHECK:         %[[BO:.*]] = gpipe.param "bo" zeros : tensor<8xf32>
// CHECK:         %[[A:.*]] = gpipe.attention %{{.*}}, %[[QKV]], %[[OUT]] bias %[[BQKV]], %[[BO]] heads 2 causal
// CHECK-SAME:      : (tensor<2x4x8xf32>, tensor<8x24xf32>, tensor<8x8xf32>, tensor<24xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
// CHECK:         gpipe.attention %[[A]], %[[QKV]], %[[OUT]] bias %[[BQKV]], %[[BO]] heads 4 :
gpipe.model @biased_attention batch 2 {
  %x = gpipe.input "x" : tensor<2x4x8xf32>
  %h = gpipe.layer "attn" -> tensor<2x4x8xf32> {
    %qkv = gpipe.param "qkv" glorot_uniform : tensor<8x24xf32>
    %out = gpipe.param "out" glorot_uniform : tensor<8x8xf32>
    %bqkv = gpipe.param "bqkv" zeros : tensor<24xf32>
    %bo = gpipe.param "bo" zeros : tensor<8xf32>
    %0 = gpipe.attention %x, %qkv, %out bias %bqkv, %bo heads 2 causal : (tensor<2x4x8xf32>, tensor<8x24xf32>, tensor<8x8xf32>, tensor<24xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %1 = gpipe.attention %0, %qkv, %out bias %bqkv, %bo heads 4 : (tensor<2x4x8xf32>, tensor<8x24xf32>, tensor<8x8xf32>, tensor<24xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    gpipe.yield %1 : tensor<2x4x8xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %h, %x : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
