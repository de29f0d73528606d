// Remat selective keeps the products' results (the attention's, with its saved state, and the first
// dense's) for the backward: the recompute reruns only the cheap ops the gradients read past them. Under
// full the recompute also reruns the attention and the dense.
// RUN: gpipe-opt %s -gpipe-compile="stages=1 microbatches=2 remat=selective" | gpipe-translate --gpipe-to-bundle | FileCheck %s --check-prefix=SELECTIVE
// RUN: gpipe-opt %s -gpipe-compile="stages=1 microbatches=2 remat=full" | gpipe-translate --gpipe-to-bundle | FileCheck %s --check-prefix=FULL

// The policy is the bundle's; the recompute follows the forward (layer norm, attention, add, layer
// norm, dense, GELU, dense, add, loss) without its products.
// SELECTIVE: "remat": "selective",
// SELECTIVE: "recompute": [
// SELECTIVE-NOT: "op": "attention"
// SELECTIVE-NOT: "op": "dense"
// SELECTIVE: "op": "layer_norm",
// SELECTIVE-NOT: "op": "attention"
// SELECTIVE-NOT: "op": "dense"
// SELECTIVE: "op": "add",
// SELECTIVE-NOT: "op": "attention"
// SELECTIVE-NOT: "op": "dense"
// SELECTIVE: "op": "layer_norm",
// SELECTIVE-NOT: "op": "attention"
// SELECTIVE-NOT: "op": "dense"
// SELECTIVE: "op": "gelu",
// SELECTIVE-NOT: "op": "attention"
// SELECTIVE-NOT: "op": "dense"
// SELECTIVE: "op": "add",
// SELECTIVE-NOT: "op": "attention"
// SELECTIVE-NOT: "op": "dense"
// SELECTIVE: "values": [

// FULL: "remat": "full",
// FULL: "recompute": [
// FULL: "op": "layer_norm",
// FULL: "op": "attention",
// FULL: "op": "add",
// FULL: "op": "layer_norm",
// FULL: "op": "dense",
// FULL: "op": "gelu",
// FULL: "op": "dense",
// FULL: "op": "add",
// FULL: "values": [
gpipe.model @block batch 4 {
  %x = gpipe.input "x" : tensor<4x8x16xf32>
  %y = gpipe.input "y" : tensor<4x8x16xf32>
  %h1 = gpipe.layer "attn" -> tensor<4x8x16xf32> {
    %g = gpipe.param "attn.ln.gamma" ones : tensor<16xf32>
    %b = gpipe.param "attn.ln.beta" zeros : tensor<16xf32>
    %wqkv = gpipe.param "attn.qkv" glorot_uniform : tensor<16x48xf32>
    %wo = gpipe.param "attn.out" glorot_uniform : tensor<16x16xf32>
    %0 = gpipe.layer_norm %x, %g, %b : (tensor<4x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
    %1 = gpipe.attention %0, %wqkv, %wo heads 2 causal : (tensor<4x8x16xf32>, tensor<16x48xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
    %2 = gpipe.add %x, %1 : tensor<4x8x16xf32>
    gpipe.yield %2 : tensor<4x8x16xf32>
  }
  %h2 = gpipe.layer "mlp" -> tensor<4x8x16xf32> {
    %g = gpipe.param "mlp.ln.gamma" ones : tensor<16xf32>
    %b = gpipe.param "mlp.ln.beta" zeros : tensor<16xf32>
    %w1 = gpipe.param "mlp.fc1.w" glorot_uniform : tensor<16x64xf32>
    %b1 = gpipe.param "mlp.fc1.b" zeros : tensor<64xf32>
    %w2 = gpipe.param "mlp.fc2.w" glorot_uniform : tensor<64x16xf32>
    %b2 = gpipe.param "mlp.fc2.b" zeros : tensor<16xf32>
    %0 = gpipe.layer_norm %h1, %g, %b : (tensor<4x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
    %1 = gpipe.dense %0, %w1, %b1 : (tensor<4x8x16xf32>, tensor<16x64xf32>, tensor<64xf32>) -> tensor<4x8x64xf32>
    %2 = gpipe.gelu %1 : tensor<4x8x64xf32>
    %3 = gpipe.dense %2, %w2, %b2 : (tensor<4x8x64xf32>, tensor<64x16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
    %4 = gpipe.add %h1, %3 : tensor<4x8x16xf32>
    gpipe.yield %4 : tensor<4x8x16xf32>
  }
  %loss = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %h2, %y : (tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %loss : tensor<f32>
}
