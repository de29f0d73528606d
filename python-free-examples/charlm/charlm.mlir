// A decoder-only character-level Transformer language model, trained on the
// Debian fortunes corpus by gpipe-run (docs/LanguageModel.md): token and
// position embeddings, 4 pre-norm blocks (causal multi-head self-attention
// and a GELU MLP, each with a residual connection), a final layer norm and
// softmax cross-entropy against the next character. Batch 32 windows of 64
// characters, width 128, 4 heads, MLP width 512, vocabulary 96 ('\n' and
// printable ASCII; runtime/include/gpipe/runtime/data/TextCorpus.h).
//
// Each attention and each MLP is one layer that yields two values: the
// residual stream it was given and its branch. The add that closes the
// residual is done by the next layer, so wherever the partitioner cuts, the
// skip value and the branch cross the stage boundary separately and are
// summed on the next stage.
gpipe.model @charlm batch 32 {
  %ids = gpipe.input "ids" : tensor<32x64xi32>
  %positions = gpipe.input "positions" : tensor<32x64xi32>
  %targets = gpipe.input "targets" : tensor<32x64xi32>
  %h = gpipe.layer "embed" -> tensor<32x64x128xf32> {
    %tok = gpipe.param "embed.tokens" normal scale 0.02 : tensor<96x128xf32>
    %pos = gpipe.param "embed.positions" normal scale 0.02 : tensor<64x128xf32>
    %0 = gpipe.embedding %ids, %tok : (tensor<32x64xi32>, tensor<96x128xf32>) -> tensor<32x64x128xf32>
    %1 = gpipe.embedding %positions, %pos : (tensor<32x64xi32>, tensor<64x128xf32>) -> tensor<32x64x128xf32>
    %2 = gpipe.add %0, %1 : tensor<32x64x128xf32>
    gpipe.yield %2 : tensor<32x64x128xf32>
  }
  %x0, %a0 = gpipe.layer "block0.attn" -> tensor<32x64x128xf32>, tensor<32x64x128xf32> {
    %g = gpipe.param "block0.attn.ln.gamma" ones : tensor<128xf32>
    %b = gpipe.param "block0.attn.ln.beta" zeros : tensor<128xf32>
    %wqkv = gpipe.param "block0.attn.qkv" glorot_uniform : tensor<128x384xf32>
    %wo = gpipe.param "block0.attn.out" glorot_uniform : tensor<128x128xf32>
    %0 = gpipe.layer_norm %h, %g, %b : (tensor<32x64x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<32x64x128xf32>
    %1 = gpipe.attention %0, %wqkv, %wo heads 4 causal : (tensor<32x64x128xf32>, tensor<128x384xf32>, tensor<128x128xf32>) -> tensor<32x64x128xf32>
    gpipe.yield %h, %1 : tensor<32x64x128xf32>, tensor<32x64x128xf32>
  }
  %r0, %m0 = gpipe.layer "block0.mlp" -> tensor<32x64x128xf32>, tensor<32x64x128xf32> {
    %g = gpipe.param "block0.mlp.ln.gamma" ones : tensor<128xf32>
    %b = gpipe.param "block0.mlp.ln.beta" zeros : tensor<128xf32>
    %w1 = gpipe.param "block0.mlp.fc1.w" glorot_uniform : tensor<128x512xf32>
    %b1 = gpipe.param "block0.mlp.fc1.b" zeros : tensor<512xf32>
    %w2 = gpipe.param "block0.mlp.fc2.w" glorot_uniform : tensor<512x128xf32>
    %b2 = gpipe.param "block0.mlp.fc2.b" zeros : tensor<128xf32>
    %r = gpipe.add %x0, %a0 : tensor<32x64x128xf32>
    %0 = gpipe.layer_norm %r, %g, %b : (tensor<32x64x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<32x64x128xf32>
    %1 = gpipe.dense %0, %w1, %b1 : (tensor<32x64x128xf32>, tensor<128x512xf32>, tensor<512xf32>) -> tensor<32x64x512xf32>
    %2 = gpipe.gelu %1 : tensor<32x64x512xf32>
    %3 = gpipe.dense %2, %w2, %b2 : (tensor<32x64x512xf32>, tensor<512x128xf32>, tensor<128xf32>) -> tensor<32x64x128xf32>
    gpipe.yield %r, %3 : tensor<32x64x128xf32>, tensor<32x64x128xf32>
  }
  %x1, %a1 = gpipe.layer "block1.attn" -> tensor<32x64x128xf32>, tensor<32x64x128xf32> {
    %g = gpipe.param "block1.attn.ln.gamma" ones : tensor<128xf32>
    %b = gpipe.param "block1.attn.ln.beta" zeros : tensor<128xf32>
    %wqkv = gpipe.param "block1.attn.qkv" glorot_uniform : tensor<128x384xf32>
    %wo = gpipe.param "block1.attn.out" glorot_uniform : tensor<128x128xf32>
    %x = gpipe.add %r0, %m0 : tensor<32x64x128xf32>
    %0 = gpipe.layer_norm %x, %g, %b : (tensor<32x64x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<32x64x128xf32>
    %1 = gpipe.attention %0, %wqkv, %wo heads 4 causal : (tensor<32x64x128xf32>, tensor<128x384xf32>, tensor<128x128xf32>) -> tensor<32x64x128xf32>
    gpipe.yield %x, %1 : tensor<32x64x128xf32>, tensor<32x64x128xf32>
  }
  %r1, %m1 = gpipe.layer "block1.mlp" -> tensor<32x64x128xf32>, tensor<32x64x128xf32> {
    %g = gpipe.param "block1.mlp.ln.gamma" ones : tensor<128xf32>
    %b = gpipe.param "block1.mlp.ln.beta" zeros : tensor<128xf32>
    %w1 = gpipe.param "block1.mlp.fc1.w" glorot_uniform : tensor<128x512xf32>
    %b1 = gpipe.param "block1.mlp.fc1.b" zeros : tensor<512xf32>
    %w2 = gpipe.param "block1.mlp.fc2.w" glorot_uniform : tensor<512x128xf32>
    %b2 = gpipe.param "block1.mlp.fc2.b" zeros : tensor<128xf32>
    %r = gpipe.add %x1, %a1 : tensor<32x64x128xf32>
    %0 = gpipe.layer_norm %r, %g, %b : (tensor<32x64x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<32x64x128xf32>
    %1 = gpipe.dense %0, %w1, %b1 : (tensor<32x64x128xf32>, tensor<128x512xf32>, tensor<512xf32>) -> tensor<32x64x512xf32>
    %2 = gpipe.gelu %1 : tensor<32x64x512xf32>
    %3 = gpipe.dense %2, %w2, %b2 : (tensor<32x64x512xf32>, tensor<512x128xf32>, tensor<128xf32>) -> tensor<32x64x128xf32>
    gpipe.yield %r, %3 : tensor<32x64x128xf32>, tensor<32x64x128xf32>
  }
  %x2, %a2 = gpipe.layer "block2.attn" -> tensor<32x64x128xf32>, tensor<32x64x128xf32> {
    %g = gpipe.param "block2.attn.ln.gamma" ones : tensor<128xf32>
    %b = gpipe.param "block2.attn.ln.beta" zeros : tensor<128xf32>
    %wqkv = gpipe.param "block2.attn.qkv" glorot_uniform : tensor<128x384xf32>
    %wo = gpipe.param "block2.attn.out" glorot_uniform : tensor<128x128xf32>
    %x = gpipe.add %r1, %m1 : tensor<32x64x128xf32>
    %0 = gpipe.layer_norm %x, %g, %b : (tensor<32x64x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<32x64x128xf32>
    %1 = gpipe.attention %0, %wqkv, %wo heads 4 causal : (tensor<32x64x128xf32>, tensor<128x384xf32>, tensor<128x128xf32>) -> tensor<32x64x128xf32>
    gpipe.yield %x, %1 : tensor<32x64x128xf32>, tensor<32x64x128xf32>
  }
  %r2, %m2 = gpipe.layer "block2.mlp" -> tensor<32x64x128xf32>, tensor<32x64x128xf32> {
    %g = gpipe.param "block2.mlp.ln.gamma" ones : tensor<128xf32>
    %b = gpipe.param "block2.mlp.ln.beta" zeros : tensor<128xf32>
    %w1 = gpipe.param "block2.mlp.fc1.w" glorot_uniform : tensor<128x512xf32>
    %b1 = gpipe.param "block2.mlp.fc1.b" zeros : tensor<512xf32>
    %w2 = gpipe.param "block2.mlp.fc2.w" glorot_uniform : tensor<512x128xf32>
    %b2 = gpipe.param "block2.mlp.fc2.b" zeros : tensor<128xf32>
    %r = gpipe.add %x2, %a2 : tensor<32x64x128xf32>
    %0 = gpipe.layer_norm %r, %g, %b : (tensor<32x64x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<32x64x128xf32>
    %1 = gpipe.dense %0, %w1, %b1 : (tensor<32x64x128xf32>, tensor<128x512xf32>, tensor<512xf32>) -> tensor<32x64x512xf32>
    %2 = gpipe.gelu %1 : tensor<32x64x512xf32>
    %3 = gpipe.dense %2, %w2, %b2 : (tensor<32x64x512xf32>, tensor<512x128xf32>, tensor<128xf32>) -> tensor<32x64x128xf32>
    gpipe.yield %r, %3 : tensor<32x64x128xf32>, tensor<32x64x128xf32>
  }
  %x3, %a3 = gpipe.layer "block3.attn" -> tensor<32x64x128xf32>, tensor<32x64x128xf32> {
    %g = gpipe.param "block3.attn.ln.gamma" ones : tensor<128xf32>
    %b = gpipe.param "block3.attn.ln.beta" zeros : tensor<128xf32>
    %wqkv = gpipe.param "block3.attn.qkv" glorot_uniform : tensor<128x384xf32>
    %wo = gpipe.param "block3.attn.out" glorot_uniform : tensor<128x128xf32>
    %x = gpipe.add %r2, %m2 : tensor<32x64x128xf32>
    %0 = gpipe.layer_norm %x, %g, %b : (tensor<32x64x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<32x64x128xf32>
    %1 = gpipe.attention %0, %wqkv, %wo heads 4 causal : (tensor<32x64x128xf32>, tensor<128x384xf32>, tensor<128x128xf32>) -> tensor<32x64x128xf32>
    gpipe.yield %x, %1 : tensor<32x64x128xf32>, tensor<32x64x128xf32>
  }
  %r3, %m3 = gpipe.layer "block3.mlp" -> tensor<32x64x128xf32>, tensor<32x64x128xf32> {
    %g = gpipe.param "block3.mlp.ln.gamma" ones : tensor<128xf32>
    %b = gpipe.param "block3.mlp.ln.beta" zeros : tensor<128xf32>
    %w1 = gpipe.param "block3.mlp.fc1.w" glorot_uniform : tensor<128x512xf32>
    %b1 = gpipe.param "block3.mlp.fc1.b" zeros : tensor<512xf32>
    %w2 = gpipe.param "block3.mlp.fc2.w" glorot_uniform : tensor<512x128xf32>
    %b2 = gpipe.param "block3.mlp.fc2.b" zeros : tensor<128xf32>
    %r = gpipe.add %x3, %a3 : tensor<32x64x128xf32>
    %0 = gpipe.layer_norm %r, %g, %b : (tensor<32x64x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<32x64x128xf32>
    %1 = gpipe.dense %0, %w1, %b1 : (tensor<32x64x128xf32>, tensor<128x512xf32>, tensor<512xf32>) -> tensor<32x64x512xf32>
    %2 = gpipe.gelu %1 : tensor<32x64x512xf32>
    %3 = gpipe.dense %2, %w2, %b2 : (tensor<32x64x512xf32>, tensor<512x128xf32>, tensor<128xf32>) -> tensor<32x64x128xf32>
    gpipe.yield %r, %3 : tensor<32x64x128xf32>, tensor<32x64x128xf32>
  }
  %logits = gpipe.layer "head" -> tensor<32x64x96xf32> {
    %g = gpipe.param "head.ln.gamma" ones : tensor<128xf32>
    %b = gpipe.param "head.ln.beta" zeros : tensor<128xf32>
    %w = gpipe.param "head.w" normal scale 0.02 : tensor<128x96xf32>
    %bias = gpipe.param "head.b" zeros : tensor<96xf32>
    %x = gpipe.add %r3, %m3 : tensor<32x64x128xf32>
    %0 = gpipe.layer_norm %x, %g, %b : (tensor<32x64x128xf32>, tensor<128xf32>, tensor<128xf32>) -> tensor<32x64x128xf32>
    %1 = gpipe.dense %0, %w, %bias : (tensor<32x64x128xf32>, tensor<128x96xf32>, tensor<96xf32>) -> tensor<32x64x96xf32>
    gpipe.yield %1 : tensor<32x64x96xf32>
  }
  %loss = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.softmax_cross_entropy %logits, %targets : (tensor<32x64x96xf32>, tensor<32x64xi32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %loss : tensor<f32>
}
