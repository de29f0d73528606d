// A decoder-only character-level Transformer: token and position embeddings,
// 4 pre-norm blocks (causal multi-head self-attention and a GELU MLP, each
// with a residual connection), a final layer norm and softmax cross-entropy
// against the next character. Batch 32 sequences of 32 characters, width 64,
// 4 heads, vocabulary 96. Each sub-block is one layer, so the partitioner can
// cut between attention and MLP; every residual crosses the cut it spans.
gpipe.model @transformer batch 32 {
  %ids = gpipe.input "ids" : tensor<32x32xi32>
  %positions = gpipe.input "positions" : tensor<32x32xi32>
  %targets = gpipe.input "targets" : tensor<32x32xi32>
  %h0 = gpipe.layer "embed" -> tensor<32x32x64xf32> {
    %tok = gpipe.param "embed.tokens" normal scale 0.02 : tensor<96x64xf32>
    %pos = gpipe.param "embed.positions" normal scale 0.02 : tensor<32x64xf32>
    %0 = gpipe.embedding %ids, %tok : (tensor<32x32xi32>, tensor<96x64xf32>) -> tensor<32x32x64xf32>
    %1 = gpipe.embedding %positions, %pos : (tensor<32x32xi32>, tensor<32x64xf32>) -> tensor<32x32x64xf32>
    %2 = gpipe.add %0, %1 : tensor<32x32x64xf32>
    gpipe.yield %2 : tensor<32x32x64xf32>
  }
  %h1 = gpipe.layer "block0.attn" -> tensor<32x32x64xf32> {
    %g = gpipe.param "block0.attn.ln.gamma" ones : tensor<64xf32>
    %b = gpipe.param "block0.attn.ln.beta" zeros : tensor<64xf32>
    %wqkv = gpipe.param "block0.attn.qkv" glorot_uniform : tensor<64x192xf32>
    %wo = gpipe.param "block0.attn.out" glorot_uniform : tensor<64x64xf32>
    %0 = gpipe.layer_norm %h0, %g, %b : (tensor<32x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<32x32x64xf32>
    %1 = gpipe.attention %0, %wqkv, %wo heads 4 causal : (tensor<32x32x64xf32>, tensor<64x192xf32>, tensor<64x64xf32>) -> tensor<32x32x64xf32>
    %2 = gpipe.dropout %1 rate 1.000000e-01 seed 1 : tensor<32x32x64xf32>
    %3 = gpipe.add %h0, %2 : tensor<32x32x64xf32>
    gpipe.yield %3 : tensor<32x32x64xf32>
  }
  %h2 = gpipe.layer "block0.mlp" -> tensor<32x32x64xf32> {
    %g = gpipe.param "block0.mlp.ln.gamma" ones : tensor<64xf32>
    %b = gpipe.param "block0.mlp.ln.beta" zeros : tensor<64xf32>
    %w1 = gpipe.param "block0.mlp.fc1.w" glorot_uniform : tensor<64x256xf32>
    %b1 = gpipe.param "block0.mlp.fc1.b" zeros : tensor<256xf32>
    %w2 = gpipe.param "block0.mlp.fc2.w" glorot_uniform : tensor<256x64xf32>
    %b2 = gpipe.param "block0.mlp.fc2.b" zeros : tensor<64xf32>
    %0 = gpipe.layer_norm %h1, %g, %b : (tensor<32x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<32x32x64xf32>
    %1 = gpipe.dense %0, %w1, %b1 : (tensor<32x32x64xf32>, tensor<64x256xf32>, tensor<256xf32>) -> tensor<32x32x256xf32>
    %2 = gpipe.gelu %1 : tensor<32x32x256xf32>
    %3 = gpipe.dense %2, %w2, %b2 : (tensor<32x32x256xf32>, tensor<256x64xf32>, tensor<64xf32>) -> tensor<32x32x64xf32>
    %4 = gpipe.dropout %3 rate 1.000000e-01 seed 2 : tensor<32x32x64xf32>
    %5 = gpipe.add %h1, %4 : tensor<32x32x64xf32>
    gpipe.yield %5 : tensor<32x32x64xf32>
  }
  %h3 = gpipe.layer "block1.attn" -> tensor<32x32x64xf32> {
    %g = gpipe.param "block1.attn.ln.gamma" ones : tensor<64xf32>
    %b = gpipe.param "block1.attn.ln.beta" zeros : tensor<64xf32>
    %wqkv = gpipe.param "block1.attn.qkv" glorot_uniform : tensor<64x192xf32>
    %wo = gpipe.param "block1.attn.out" glorot_uniform : tensor<64x64xf32>
    %0 = gpipe.layer_norm %h2, %g, %b : (tensor<32x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<32x32x64xf32>
    %1 = gpipe.attention %0, %wqkv, %wo heads 4 causal : (tensor<32x32x64xf32>, tensor<64x192xf32>, tensor<64x64xf32>) -> tensor<32x32x64xf32>
    %2 = gpipe.dropout %1 rate 1.000000e-01 seed 3 : tensor<32x32x64xf32>
    %3 = gpipe.add %h2, %2 : tensor<32x32x64xf32>
    gpipe.yield %3 : tensor<32x32x64xf32>
  }
  %h4 = gpipe.layer "block1.mlp" -> tensor<32x32x64xf32> {
    %g = gpipe.param "block1.mlp.ln.gamma" ones : tensor<64xf32>
    %b = gpipe.param "block1.mlp.ln.beta" zeros : tensor<64xf32>
    %w1 = gpipe.param "block1.mlp.fc1.w" glorot_uniform : tensor<64x256xf32>
    %b1 = gpipe.param "block1.mlp.fc1.b" zeros : tensor<256xf32>
    %w2 = gpipe.param "block1.mlp.fc2.w" glorot_uniform : tensor<256x64xf32>
    %b2 = gpipe.param "block1.mlp.fc2.b" zeros : tensor<64xf32>
    %0 = gpipe.layer_norm %h3, %g, %b : (tensor<32x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<32x32x64xf32>
    %1 = gpipe.dense %0, %w1, %b1 : (tensor<32x32x64xf32>, tensor<64x256xf32>, tensor<256xf32>) -> tensor<32x32x256xf32>
    %2 = gpipe.gelu %1 : tensor<32x32x256xf32>
    %3 = gpipe.dense %2, %w2, %b2 : (tensor<32x32x256xf32>, tensor<256x64xf32>, tensor<64xf32>) -> tensor<32x32x64xf32>
    %4 = gpipe.dropout %3 rate 1.000000e-01 seed 4 : tensor<32x32x64xf32>
    %5 = gpipe.add %h3, %4 : tensor<32x32x64xf32>
    gpipe.yield %5 : tensor<32x32x64xf32>
  }
  %h5 = gpipe.layer "block2.attn" -> tensor<32x32x64xf32> {
    %g = gpipe.param "block2.attn.ln.gamma" ones : tensor<64xf32>
    %b = gpipe.param "block2.attn.ln.beta" zeros : tensor<64xf32>
    %wqkv = gpipe.param "block2.attn.qkv" glorot_uniform : tensor<64x192xf32>
    %wo = gpipe.param "block2.attn.out" glorot_uniform : tensor<64x64xf32>
    %0 = gpipe.layer_norm %h4, %g, %b : (tensor<32x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<32x32x64xf32>
    %1 = gpipe.attention %0, %wqkv, %wo heads 4 causal : (tensor<32x32x64xf32>, tensor<64x192xf32>, tensor<64x64xf32>) -> tensor<32x32x64xf32>
    %2 = gpipe.dropout %1 rate 1.000000e-01 seed 5 : tensor<32x32x64xf32>
    %3 = gpipe.add %h4, %2 : tensor<32x32x64xf32>
    gpipe.yield %3 : tensor<32x32x64xf32>
  }
  %h6 = gpipe.layer "block2.mlp" -> tensor<32x32x64xf32> {
    %g = gpipe.param "block2.mlp.ln.gamma" ones : tensor<64xf32>
    %b = gpipe.param "block2.mlp.ln.beta" zeros : tensor<64xf32>
    %w1 = gpipe.param "block2.mlp.fc1.w" glorot_uniform : tensor<64x256xf32>
    %b1 = gpipe.param "block2.mlp.fc1.b" zeros : tensor<256xf32>
    %w2 = gpipe.param "block2.mlp.fc2.w" glorot_uniform : tensor<256x64xf32>
    %b2 = gpipe.param "block2.mlp.fc2.b" zeros : tensor<64xf32>
    %0 = gpipe.layer_norm %h5, %g, %b : (tensor<32x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<32x32x64xf32>
    %1 = gpipe.dense %0, %w1, %b1 : (tensor<32x32x64xf32>, tensor<64x256xf32>, tensor<256xf32>) -> tensor<32x32x256xf32>
    %2 = gpipe.gelu %1 : tensor<32x32x256xf32>
    %3 = gpipe.dense %2, %w2, %b2 : (tensor<32x32x256xf32>, tensor<256x64xf32>, tensor<64xf32>) -> tensor<32x32x64xf32>
    %4 = gpipe.dropout %3 rate 1.000000e-01 seed 6 : tensor<32x32x64xf32>
    %5 = gpipe.add %h5, %4 : tensor<32x32x64xf32>
    gpipe.yield %5 : tensor<32x32x64xf32>
  }
  %h7 = gpipe.layer "block3.attn" -> tensor<32x32x64xf32> {
    %g = gpipe.param "block3.attn.ln.gamma" ones : tensor<64xf32>
    %b = gpipe.param "block3.attn.ln.beta" zeros : tensor<64xf32>
    %wqkv = gpipe.param "block3.attn.qkv" glorot_uniform : tensor<64x192xf32>
    %wo = gpipe.param "block3.attn.out" glorot_uniform : tensor<64x64xf32>
    %0 = gpipe.layer_norm %h6, %g, %b : (tensor<32x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<32x32x64xf32>
    %1 = gpipe.attention %0, %wqkv, %wo heads 4 causal : (tensor<32x32x64xf32>, tensor<64x192xf32>, tensor<64x64xf32>) -> tensor<32x32x64xf32>
    %2 = gpipe.dropout %1 rate 1.000000e-01 seed 7 : tensor<32x32x64xf32>
    %3 = gpipe.add %h6, %2 : tensor<32x32x64xf32>
    gpipe.yield %3 : tensor<32x32x64xf32>
  }
  %h8 = gpipe.layer "block3.mlp" -> tensor<32x32x64xf32> {
    %g = gpipe.param "block3.mlp.ln.gamma" ones : tensor<64xf32>
    %b = gpipe.param "block3.mlp.ln.beta" zeros : tensor<64xf32>
    %w1 = gpipe.param "block3.mlp.fc1.w" glorot_uniform : tensor<64x256xf32>
    %b1 = gpipe.param "block3.mlp.fc1.b" zeros : tensor<256xf32>
    %w2 = gpipe.param "block3.mlp.fc2.w" glorot_uniform : tensor<256x64xf32>
    %b2 = gpipe.param "block3.mlp.fc2.b" zeros : tensor<64xf32>
    %0 = gpipe.layer_norm %h7, %g, %b : (tensor<32x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<32x32x64xf32>
    %1 = gpipe.dense %0, %w1, %b1 : (tensor<32x32x64xf32>, tensor<64x256xf32>, tensor<256xf32>) -> tensor<32x32x256xf32>
    %2 = gpipe.gelu %1 : tensor<32x32x256xf32>
    %3 = gpipe.dense %2, %w2, %b2 : (tensor<32x32x256xf32>, tensor<256x64xf32>, tensor<64xf32>) -> tensor<32x32x64xf32>
    %4 = gpipe.dropout %3 rate 1.000000e-01 seed 8 : tensor<32x32x64xf32>
    %5 = gpipe.add %h7, %4 : tensor<32x32x64xf32>
    gpipe.yield %5 : tensor<32x32x64xf32>
  }
  %logits = gpipe.layer "head" -> tensor<32x32x96xf32> {
    %g = gpipe.param "head.ln.gamma" ones : tensor<64xf32>
    %b = gpipe.param "head.ln.beta" zeros : tensor<64xf32>
    %w = gpipe.param "head.w" glorot_uniform : tensor<64x96xf32>
    %0 = gpipe.layer_norm %h8, %g, %b : (tensor<32x32x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<32x32x64xf32>
    %1 = gpipe.dense %0, %w : (tensor<32x32x64xf32>, tensor<64x96xf32>) -> tensor<32x32x96xf32>
    gpipe.yield %1 : tensor<32x32x96xf32>
  }
  %loss = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.softmax_cross_entropy %logits, %targets : (tensor<32x32x96xf32>, tensor<32x32xi32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %loss : tensor<f32>
}
