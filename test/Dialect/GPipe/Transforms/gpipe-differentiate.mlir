// gpipe-differentiate writes, for every stage, a backward that recomputes the stage's forward and then runs the gradient ops in reverse.
// The recompute keeps only the copies the gradients read, directly or through other copies.
// RUN: gpipe-opt %s -split-input-file -gpipe-differentiate --verify-roundtrip | FileCheck %s

// Stage 0 (dense + bias + relu) gets the gradient of its output and has nothing to send back (its input is a model input);
// stage 1 (tanh, then an MSE loss against a model input) seeds itself with the loss and sends back the gradient of its channel input.
// The relu's gradient reads its input, and the MSE's gradient reads its operands, not the loss: neither is recomputed.
// CHECK-LABEL: gpipe.model @two
// CHECK: gpipe.stage_backward @stage0 : (tensor<4x3xf32>, tensor<4x2xf32>) -> () {
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<4x3xf32>, %[[DOUT:.*]]: tensor<4x2xf32>):
// CHECK-NEXT: %[[W:.*]] = gpipe.param_ref "w" : tensor<3x2xf32>
// CHECK-NEXT: %[[B:.*]] = gpipe.param_ref "b" : tensor<2xf32>
// CHECK-NEXT: %[[H:.*]] = gpipe.dense %[[X]], %[[W]], %[[B]] {gpipe.recompute}
// CHECK-NEXT: %[[DH:.*]] = gpipe.relu_grad %[[DOUT]], %[[H]] : tensor<4x2xf32>
// CHECK-NEXT: %[[DX:.*]], %[[DW:.*]] = gpipe.dense_grad %[[DH]], %[[X]], %[[W]] : (tensor<4x2xf32>, tensor<4x3xf32>, tensor<3x2xf32>) -> (tensor<4x3xf32>, tensor<3x2xf32>)
// CHECK-NEXT: gpipe.accumulate_grad "w", %[[DW]] : tensor<3x2xf32>
// CHECK-NEXT: %[[DB:.*]] = gpipe.bias_grad %[[DH]] : (tensor<4x2xf32>) -> tensor<2xf32>
// CHECK-NEXT: gpipe.accumulate_grad "b", %[[DB]] : tensor<2xf32>
// CHECK-NEXT: gpipe.yield{{$}}
// CHECK: gpipe.stage_backward @stage1 : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32> {
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<4x2xf32>, %[[T:.*]]: tensor<4x2xf32>):
// CHECK-NEXT: %[[Y:.*]] = gpipe.tanh %[[A]] {gpipe.recompute}
// CHECK-NEXT: %[[DY:.*]] = gpipe.mse_loss_grad %[[Y]], %[[T]] : tensor<4x2xf32>
// CHECK-NEXT: %[[DA:.*]] = gpipe.tanh_grad %[[DY]], %[[Y]] : tensor<4x2xf32>
// CHECK-NEXT: gpipe.yield %[[DA]] : tensor<4x2xf32>
// CHECK: gpipe.return
gpipe.model @two batch 4 {
  %x = gpipe.input "x" : tensor<4x3xf32>
  %t = gpipe.input "t" : tensor<4x2xf32>
  %s0 = gpipe.stage @stage0 index 0 (%x) : (tensor<4x3xf32>) -> tensor<4x2xf32> {
  ^bb0(%arg0: tensor<4x3xf32>):
    %h = gpipe.layer "fc" -> tensor<4x2xf32> {
      %w = gpipe.param "w" glorot_uniform : tensor<3x2xf32>
      %b = gpipe.param "b" zeros : tensor<2xf32>
      %0 = gpipe.dense %arg0, %w, %b : (tensor<4x3xf32>, tensor<3x2xf32>, tensor<2xf32>) -> tensor<4x2xf32>
      %1 = gpipe.relu %0 : tensor<4x2xf32>
      gpipe.yield %1 : tensor<4x2xf32>
    }
    gpipe.yield %h : tensor<4x2xf32>
  }
  %s1 = gpipe.stage @stage1 index 1 (%s0, %t) : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<4x2xf32>, %arg1: tensor<4x2xf32>):
    %l = gpipe.layer "head" -> tensor<f32> {
      %0 = gpipe.tanh %arg0 : tensor<4x2xf32>
      %1 = gpipe.mse_loss %0, %arg1 : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<f32>
      gpipe.yield %1 : tensor<f32>
    }
    gpipe.yield %l : tensor<f32>
  }
  gpipe.return %s1 : tensor<f32>
}

// -----

// A value used twice (a residual) sums its gradients; a value only passed through (carried to the next stage) gets its output gradient;
// an input no gradient reaches gets zeros.
// CHECK-LABEL: gpipe.model @residual
// CHECK: gpipe.stage_backward @stage1 : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<2x4xf32>, %[[SKIP:.*]]: tensor<2x4xf32>, %[[UNUSED:.*]]: tensor<2x4xf32>, %[[DOUT0:.*]]: tensor<2x4xf32>, %[[DOUT1:.*]]: tensor<2x4xf32>):
// Nothing is recomputed: the GELU's gradient reads its input, and the add's output nothing.
// CHECK-NEXT: %[[DG:.*]] = gpipe.gelu_grad %[[DOUT0]], %[[A]]
// CHECK-NEXT: %[[DA:.*]] = gpipe.add %[[DOUT0]], %[[DG]] : tensor<2x4xf32>
// CHECK-NEXT: %[[Z:.*]] = gpipe.zeros : tensor<2x4xf32>
// CHECK-NEXT: gpipe.yield %[[DA]], %[[DOUT1]], %[[Z]]
gpipe.model @residual batch 2 {
  %x = gpipe.input "x" : tensor<2x4xf32>
  %t = gpipe.input "t" : tensor<2x4xf32>
  %s0:3 = gpipe.stage @stage0 index 0 (%x) : (tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  ^bb0(%arg0: tensor<2x4xf32>):
    %a = gpipe.layer "a" -> tensor<2x4xf32> {
      %0 = gpipe.relu %arg0 : tensor<2x4xf32>
      gpipe.yield %0 : tensor<2x4xf32>
    }
    gpipe.yield %a, %a, %a : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
  }
  %s1:2 = gpipe.stage @stage1 index 1 (%s0#0, %s0#1, %s0#2) : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  ^bb0(%arg0: tensor<2x4xf32>, %arg1: tensor<2x4xf32>, %arg2: tensor<2x4xf32>):
    %b = gpipe.layer "b" -> tensor<2x4xf32> {
      %0 = gpipe.gelu %arg0 : tensor<2x4xf32>
      %1 = gpipe.add %0, %arg0 : tensor<2x4xf32>
      gpipe.yield %1 : tensor<2x4xf32>
    }
    gpipe.yield %b, %arg1 : tensor<2x4xf32>, tensor<2x4xf32>
  }
  %s2 = gpipe.stage @stage2 index 2 (%s1#0, %s1#1, %t) : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<2x4xf32>, %arg1: tensor<2x4xf32>, %arg2: tensor<2x4xf32>):
    %l = gpipe.layer "l" -> tensor<f32> {
      %0 = gpipe.add %arg0, %arg1 : tensor<2x4xf32>
      %1 = gpipe.mse_loss %0, %arg2 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<f32>
      gpipe.yield %1 : tensor<f32>
    }
    gpipe.yield %l : tensor<f32>
  }
  gpipe.return %s2 : tensor<f32>
}

// -----

// Every Transformer op has its gradient: ops whose kernels need what the forward saved take the forward's result.
// CHECK-LABEL: gpipe.model @block
// CHECK: gpipe.stage_backward @stage0 : (tensor<2x4xi32>, tensor<2x4xi32>) -> () {
// CHECK-NEXT: ^bb0(%[[IDS:.*]]: tensor<2x4xi32>, %[[LABELS:.*]]: tensor<2x4xi32>):
// CHECK: %[[E:.*]] = gpipe.embedding %[[IDS]], %[[TABLE:.*]] {gpipe.recompute}
// CHECK: %[[N:.*]] = gpipe.layer_norm %[[E]], %[[G:.*]], %[[BETA:.*]] {gpipe.recompute}
// CHECK: %[[ATT:.*]] = gpipe.attention %[[N]], %[[WQKV:.*]], %[[WO:.*]] heads 2 causal {gpipe.recompute}
// CHECK: %[[D:.*]] = gpipe.dropout %[[ATT]] rate {{.*}} seed 5 {gpipe.recompute}
// CHECK: %[[S:.*]] = gpipe.softmax %[[D]] {gpipe.recompute}
// CHECK: %[[L:.*]] = gpipe.softmax_cross_entropy %[[S]], %[[LABELS]] {gpipe.recompute}
// CHECK-NEXT: %[[DS:.*]] = gpipe.softmax_cross_entropy_grad %[[L]], %[[LABELS]] : (tensor<f32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[DD:.*]] = gpipe.softmax_grad %[[DS]], %[[S]]
// CHECK-NEXT: %[[DATT:.*]] = gpipe.dropout_grad %[[DD]], %[[D]]
// CHECK-NEXT: %[[DN:.*]], %[[DWQKV:.*]], %[[DWO:.*]] = gpipe.attention_grad %[[DATT]], %[[ATT]], %[[N]], %[[WQKV]], %[[WO]] heads 2 causal
// CHECK-NEXT: gpipe.accumulate_grad "wqkv", %[[DWQKV]]
// CHECK-NEXT: gpipe.accumulate_grad "wo", %[[DWO]]
// CHECK-NEXT: %[[DE:.*]], %[[DG:.*]], %[[DB:.*]] = gpipe.layer_norm_grad %[[DN]], %[[N]], %[[E]], %[[G]]
// CHECK-NEXT: gpipe.accumulate_grad "ln.g", %[[DG]]
// CHECK-NEXT: gpipe.accumulate_grad "ln.b", %[[DB]]
// CHECK-NEXT: %[[DT:.*]] = gpipe.embedding_grad %[[DE]], %[[IDS]] : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<10x8xf32>
// CHECK-NEXT: gpipe.accumulate_grad "table", %[[DT]]
// CHECK-NEXT: gpipe.yield{{$}}
gpipe.model @block batch 2 {
  %ids = gpipe.input "ids" : tensor<2x4xi32>
  %labels = gpipe.input "labels" : tensor<2x4xi32>
  %s = gpipe.stage @stage0 index 0 (%ids, %labels) : (tensor<2x4xi32>, tensor<2x4xi32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<2x4xi32>, %arg1: tensor<2x4xi32>):
    %l = gpipe.layer "all" -> tensor<f32> {
      %t = gpipe.param "table" normal scale 0.02 : tensor<10x8xf32>
      %g = gpipe.param "ln.g" ones : tensor<8xf32>
      %b = gpipe.param "ln.b" zeros : tensor<8xf32>
      %wqkv = gpipe.param "wqkv" glorot_uniform : tensor<8x24xf32>
      %wo = gpipe.param "wo" glorot_uniform : tensor<8x8xf32>
      %0 = gpipe.embedding %arg0, %t : (tensor<2x4xi32>, tensor<10x8xf32>) -> tensor<2x4x8xf32>
      %1 = gpipe.layer_norm %0, %g, %b : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
      %2 = gpipe.attention %1, %wqkv, %wo heads 2 causal : (tensor<2x4x8xf32>, tensor<8x24xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
      %3 = gpipe.dropout %2 rate 1.000000e-01 seed 5 : tensor<2x4x8xf32>
      %4 = gpipe.softmax %3 : tensor<2x4x8xf32>
      %5 = gpipe.softmax_cross_entropy %4, %arg1 : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
      gpipe.yield %5 : tensor<f32>
    }
    gpipe.yield %l : tensor<f32>
  }
  gpipe.return %s : tensor<f32>
}

// -----

// The exact GELU's gradient reads the forward's input, as the tanh GELU's does.
// CHECK-LABEL: gpipe.model @gelu_erf
// CHECK: gpipe.stage_backward @stage1 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<2x4xf32>, %[[T:.*]]: tensor<2x4xf32>):
// CHECK-NEXT: %[[G:.*]] = gpipe.gelu_erf %[[A]] {gpipe.recompute} : tensor<2x4xf32>
// CHECK-NEXT: %[[DG:.*]] = gpipe.mse_loss_grad %[[G]], %[[T]] : tensor<2x4xf32>
// CHECK-NEXT: %[[DA:.*]] = gpipe.gelu_erf_grad %[[DG]], %[[A]] : tensor<2x4xf32>
// CHECK-NEXT: gpipe.yield %[[DA]] : tensor<2x4xf32>
gpipe.model @gelu_erf batch 2 {
  %x = gpipe.input "x" : tensor<2x4xf32>
  %t = gpipe.input "t" : tensor<2x4xf32>
  %s0 = gpipe.stage @stage0 index 0 (%x) : (tensor<2x4xf32>) -> tensor<2x4xf32> {
  ^bb0(%arg0: tensor<2x4xf32>):
    %a = gpipe.layer "a" -> tensor<2x4xf32> {
      %0 = gpipe.relu %arg0 : tensor<2x4xf32>
      gpipe.yield %0 : tensor<2x4xf32>
    }
    gpipe.yield %a : tensor<2x4xf32>
  }
  %s1 = gpipe.stage @stage1 index 1 (%s0, %t) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<2x4xf32>, %arg1: tensor<2x4xf32>):
    %l = gpipe.layer "l" -> tensor<f32> {
      %0 = gpipe.gelu_erf %arg0 : tensor<2x4xf32>
      %1 = gpipe.mse_loss %0, %arg1 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<f32>
      gpipe.yield %1 : tensor<f32>
    }
    gpipe.yield %l : tensor<f32>
  }
  gpipe.return %s1 : tensor<f32>
}

// -----

// A biased attention's gradient takes the biases after the weights and returns their gradients (the column sums of dqkv
// and dy) after the weights', each accumulated into its parameter; the gradient of the stage input is sent back.
// CHECK-LABEL: gpipe.model @biased_attention
// CHECK: gpipe.stage_backward @stage1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<2x4x8xf32>, %[[T:.*]]: tensor<2x4x8xf32>):
// CHECK-NEXT: %[[WQKV:.*]] = gpipe.param_ref "wqkv" : tensor<8x24xf32>
// CHECK-NEXT: %[[WO:.*]] = gpipe.param_ref "wo" : tensor<8x8xf32>
// CHECK-NEXT: %[[BQKV:.*]] = gpipe.param_ref "bqkv" : tensor<24xf32>
// CHECK-NEXT: %[[BO:.*]] = gpipe.param_ref "bo" : tensor<8xf32>
// CHECK-NEXT: %[[ATT:.*]] = gpipe.attention %[[X]], %[[WQKV]], %[[WO]] bias %[[BQKV]], %[[BO]] heads 2 causal {gpipe.recompute}
// CHECK-NEXT: %[[DATT:.*]] = gpipe.mse_loss_grad %[[ATT]], %[[T]] : tensor<2x4x8xf32>
// CHECK-NEXT: %[[DX:.*]], %[[DWQKV:.*]], %[[DWO:.*]], %[[DB:.*]]:2 = gpipe.attention_grad %[[DATT]], %[[ATT]], %[[X]], %[[WQKV]], %[[WO]] bias %[[BQKV]], %[[BO]] heads 2 causal
// CHECK-SAME: -> (tensor<2x4x8xf32>, tensor<8x24xf32>, tensor<8x8xf32>, tensor<24xf32>, tensor<8xf32>)
// CHECK-NEXT: gpipe.accumulate_grad "wqkv", %[[DWQKV]] : tensor<8x24xf32>
// CHECK-NEXT: gpipe.accumulate_grad "wo", %[[DWO]] : tensor<8x8xf32>
// CHECK-NEXT: gpipe.accumulate_grad "bqkv", %[[DB]]#0 : tensor<24xf32>
// CHECK-NEXT: gpipe.accumulate_grad "bo", %[[DB]]#1 : tensor<8xf32>
// CHECK-NEXT: gpipe.yield %[[DX]] : tensor<2x4x8xf32>
gpipe.model @biased_attention batch 2 {
  %x = gpipe.input "x" : tensor<2x4x8xf32>
  %t = gpipe.input "t" : tensor<2x4x8xf32>
  %s0 = gpipe.stage @stage0 index 0 (%x) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  ^bb0(%arg0: tensor<2x4x8xf32>):
    %a = gpipe.layer "a" -> tensor<2x4x8xf32> {
      %0 = gpipe.relu %arg0 : tensor<2x4x8xf32>
      gpipe.yield %0 : tensor<2x4x8xf32>
    }
    gpipe.yield %a : tensor<2x4x8xf32>
  }
  %s1 = gpipe.stage @stage1 index 1 (%s0, %t) : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<2x4x8xf32>, %arg1: tensor<2x4x8xf32>):
    %l = gpipe.layer "attn" -> tensor<f32> {
      %wqkv = gpipe.param "wqkv" glorot_uniform : tensor<8x24xf32>
      %wo = gpipe.param "wo" glorot_uniform : tensor<8x8xf32>
      %bqkv = gpipe.param "bqkv" zeros : tensor<24xf32>
      %bo = gpipe.param "bo" zeros : tensor<8xf32>
      %0 = gpipe.attention %arg0, %wqkv, %wo bias %bqkv, %bo heads 2 causal : (tensor<2x4x8xf32>, tensor<8x24xf32>, tensor<8x8xf32>, tensor<24xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
      %1 = gpipe.mse_loss %0, %arg1 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<f32>
      gpipe.yield %1 : tensor<f32>
    }
    gpipe.yield %l : tensor<f32>
  }
  gpipe.return %s1 : tensor<f32>
}
