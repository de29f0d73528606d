// gpipe-estimate-cost fills in FLOPs, parameter bytes and activation bytes from shapes (values worked out by hand in the comments), and never replaces a cost the user wrote.
// RUN: gpipe-opt %s -split-input-file -gpipe-estimate-cost | FileCheck %s

// dense 4x8 * 8x16 + bias: 2*4*8*16 + 4*16 = 1088 FLOPs; params (8*16 + 16) * 4 B = 576; result 4*16*4 B = 256.
// relu: 64 FLOPs, 256 B. The layer sums its ops and counts each parameter once.
// CHECK-LABEL: gpipe.model @dense
// CHECK: gpipe.layer "fc" -> tensor<4x16xf32> attributes {cost = #gpipe.cost<flops = 1152, param_bytes = 576, activation_bytes = 512>}
// CHECK: gpipe.dense {{.*}} {cost = #gpipe.cost<flops = 1088, param_bytes = 576, activation_bytes = 256>}
// CHECK: gpipe.relu {{.*}} {cost = #gpipe.cost<flops = 64, param_bytes = 0, activation_bytes = 256>}
gpipe.model @dense batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %h = gpipe.layer "fc" -> tensor<4x16xf32> {
    %w = gpipe.param "w" glorot_uniform : tensor<8x16xf32>
    %b = gpipe.param "b" zeros : tensor<16xf32>
    %0 = gpipe.dense %x, %w, %b : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
    %1 = gpipe.relu %0 : tensor<4x16xf32>
    gpipe.yield %1 : tensor<4x16xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %h, %h : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A cost written on an op is kept and summed into its layer; a cost written on a layer is kept while its ops are still filled in.
// CHECK-LABEL: gpipe.model @user
// CHECK: gpipe.layer "mixed" -> tensor<4x16xf32> attributes {cost = #gpipe.cost<flops = 1007, param_bytes = 0, activation_bytes = 256>}
// CHECK: gpipe.relu {{.*}} {cost = #gpipe.cost<flops = 1000, param_bytes = 0, activation_bytes = 0>}
// CHECK: gpipe.tanh {{.*}} {cost = #gpipe.cost<flops = 7, param_bytes = 0, activation_bytes = 256>}
// CHECK: gpipe.layer "pinned" -> tensor<f32> attributes {cost = #gpipe.cost<flops = 5, param_bytes = 6, activation_bytes = 7>}
// CHECK: gpipe.mse_loss {{.*}} {cost = #gpipe.cost<flops = 192, param_bytes = 0, activation_bytes = 4>}
gpipe.model @user batch 4 {
  %x = gpipe.input "x" : tensor<4x16xf32>
  %h = gpipe.layer "mixed" -> tensor<4x16xf32> {
    %0 = gpipe.relu %x {cost = #gpipe.cost<flops = 1000, param_bytes = 0, activation_bytes = 0>} : tensor<4x16xf32>
    %1 = gpipe.tanh %0 {cost = #gpipe.cost<flops = 7, param_bytes = 0, activation_bytes = 256>} : tensor<4x16xf32>
    gpipe.yield %1 : tensor<4x16xf32>
  }
  %l = gpipe.layer "pinned" -> tensor<f32> attributes {cost = #gpipe.cost<flops = 5, param_bytes = 6, activation_bytes = 7>} {
    %0 = gpipe.mse_loss %h, %h : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// Transformer ops on [B=2, S=4, D=8] with 2 heads.
// embedding: 2*4*8 = 64 copied elements; table 10*8*4 B = 320; result 256 B.
// layer_norm: 8 FLOPs per element = 512; params 2*8*4 B = 64.
// attention: QKV 2*2*4*8*24 = 3072, scores 2*2*16*8 = 512, weighted sum 512, output 2*2*4*8*8 = 1024,
//   softmax 5*2*2*16 = 320, total 5440; params (8*24 + 8*8)*4 B = 1024;
//   kept: result 256 + (q,k,v 192 + weights 2*2*16 = 64 + context 64) * 4 B = 1280, total 1536.
// gelu 8*64 = 512; dropout 2*64 = 128 FLOPs and a one-byte mask per element (256 + 64 B); add 64.
// dense to 10 classes without bias: 2*8*8*10 = 1280 FLOPs, params 320 B, result 320 B.
// softmax_cross_entropy on 8x10 logits: 5*80 = 400 FLOPs, a 4 B scalar.
// CHECK-LABEL: gpipe.model @transformer
// CHECK: gpipe.embedding {{.*}} {cost = #gpipe.cost<flops = 64, param_bytes = 320, activation_bytes = 256>}
// CHECK: gpipe.layer_norm {{.*}} {cost = #gpipe.cost<flops = 512, param_bytes = 64, activation_bytes = 256>}
// CHECK: gpipe.attention {{.*}} {cost = #gpipe.cost<flops = 5440, param_bytes = 1024, activation_bytes = 1536>}
// CHECK: gpipe.gelu {{.*}} {cost = #gpipe.cost<flops = 512, param_bytes = 0, activation_bytes = 256>}
// CHECK: gpipe.dropout {{.*}} {cost = #gpipe.cost<flops = 128, param_bytes = 0, activation_bytes = 320>}
// CHECK: gpipe.add {{.*}} {cost = #gpipe.cost<flops = 64, param_bytes = 0, activation_bytes = 256>}
// CHECK: gpipe.dense {{.*}} {cost = #gpipe.cost<flops = 1280, param_bytes = 320, activation_bytes = 320>}
// CHECK: gpipe.softmax_cross_entropy {{.*}} {cost = #gpipe.cost<flops = 400, param_bytes = 0, activation_bytes = 4>}
gpipe.model @transformer batch 2 {
  %ids = gpipe.input "ids" : tensor<2x4xi32>
  %labels = gpipe.input "labels" : tensor<2x4xi32>
  %e = gpipe.layer "embed" -> tensor<2x4x8xf32> {
    %t = gpipe.param "table" normal scale 0.02 : tensor<10x8xf32>
    %0 = gpipe.embedding %ids, %t : (tensor<2x4xi32>, tensor<10x8xf32>) -> tensor<2x4x8xf32>
    gpipe.yield %0 : tensor<2x4x8xf32>
  }
  %blk = gpipe.layer "block" -> tensor<2x4x8xf32> {
    %g = gpipe.param "ln.g" ones : tensor<8xf32>
    %b = gpipe.param "ln.b" zeros : tensor<8xf32>
    %wqkv = gpipe.param "wqkv" glorot_uniform : tensor<8x24xf32>
    %wo = gpipe.param "wo" glorot_uniform : tensor<8x8xf32>
    %0 = gpipe.layer_norm %e, %g, %b : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %1 = gpipe.attention %0, %wqkv, %wo heads 2 causal : (tensor<2x4x8xf32>, tensor<8x24xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %2 = gpipe.gelu %1 : tensor<2x4x8xf32>
    %3 = gpipe.dropout %2 rate 1.000000e-01 seed 3 : tensor<2x4x8xf32>
    %4 = gpipe.add %3, %e : tensor<2x4x8xf32>
    gpipe.yield %4 : tensor<2x4x8xf32>
  }
  %loss = gpipe.layer "head" -> tensor<f32> {
    %w = gpipe.param "head.w" glorot_uniform : tensor<8x10xf32>
    %0 = gpipe.dense %blk, %w : (tensor<2x4x8xf32>, tensor<8x10xf32>) -> tensor<2x4x10xf32>
    %1 = gpipe.softmax_cross_entropy %0, %labels : (tensor<2x4x10xf32>, tensor<2x4xi32>) -> tensor<f32>
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %loss : tensor<f32>
}

// -----

// bf16 halves every byte count; FLOPs do not change. softmax 5 FLOPs per element.
// CHECK-LABEL: gpipe.model @half
// CHECK: gpipe.dense {{.*}} {cost = #gpipe.cost<flops = 1024, param_bytes = 256, activation_bytes = 128>}
// CHECK: gpipe.softmax {{.*}} {cost = #gpipe.cost<flops = 320, param_bytes = 0, activation_bytes = 128>}
gpipe.model @half batch 4 {
  %x = gpipe.input "x" : tensor<4x8xbf16>
  %h = gpipe.layer "fc" -> tensor<4x16xbf16> {
    %w = gpipe.param "w" glorot_uniform : tensor<8x16xbf16>
    %0 = gpipe.dense %x, %w : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
    %1 = gpipe.softmax %0 : tensor<4x16xbf16>
    gpipe.yield %1 : tensor<4x16xbf16>
  }
  %l = gpipe.layer "loss" -> tensor<bf16> {
    %0 = gpipe.mse_loss %h, %h : (tensor<4x16xbf16>, tensor<4x16xbf16>) -> tensor<bf16>
    gpipe.yield %0 : tensor<bf16>
  }
  gpipe.return %l : tensor<bf16>
}

// -----

// conv2d [2, 4, 4, 1] * [3, 3, 1, 2] + bias, stride 1, padding 1: 2 x 4 x 4 x 2 = 64 outputs, each a
// 3 x 3 x 1 window: 2*64*9 + 64 = 1216 FLOPs; params (18 + 2) * 4 B = 80; result 64 * 4 B = 256.
// With 2 groups over [2, 4, 4, 2] into 4 filters, stride 2: 2 x 2 x 2 x 4 = 32 outputs over windows of
// 3 x 3 x 1: 2*32*9 = 576 FLOPs; params 3*3*1*4 * 4 B = 144; result 32 * 4 B = 128.
// global_avg_pool adds up 64 elements (64 FLOPs) into [2, 2] (16 B); flatten is free, 64 * 4 B.
// CHECK-LABEL: gpipe.model @conv
// CHECK: gpipe.conv2d {{.*}} {cost = #gpipe.cost<flops = 1216, param_bytes = 80, activation_bytes = 256>}
// CHECK: gpipe.conv2d {{.*}} {cost = #gpipe.cost<flops = 576, param_bytes = 144, activation_bytes = 128>}
// CHECK: gpipe.global_avg_pool {{.*}} {cost = #gpipe.cost<flops = 64, param_bytes = 0, activation_bytes = 16>}
// CHECK: gpipe.flatten {{.*}} {cost = #gpipe.cost<flops = 0, param_bytes = 0, activation_bytes = 256>}
gpipe.model @conv batch 2 {
  %x = gpipe.input "x" : tensor<2x4x4x1xf32>
  %h = gpipe.layer "conv" -> tensor<2x2xf32> {
    %w = gpipe.param "w" glorot_uniform : tensor<3x3x1x2xf32>
    %b = gpipe.param "b" zeros : tensor<2xf32>
    %0 = gpipe.conv2d %x, %w, %b stride [1, 1] padding [1, 1] : (tensor<2x4x4x1xf32>, tensor<3x3x1x2xf32>, tensor<2xf32>) -> tensor<2x4x4x2xf32>
    %v = gpipe.param "v" glorot_uniform : tensor<3x3x1x4xf32>
    %1 = gpipe.conv2d %0, %v stride [2, 2] padding [1, 1] groups 2 : (tensor<2x4x4x2xf32>, tensor<3x3x1x4xf32>) -> tensor<2x2x2x4xf32>
    %2 = gpipe.global_avg_pool %0 : (tensor<2x4x4x2xf32>) -> tensor<2x2xf32>
    %3 = gpipe.flatten %0 : (tensor<2x4x4x2xf32>) -> tensor<2x32xf32>
    gpipe.yield %2 : tensor<2x2xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %h, %h : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// max_pool2d 3x3 (stride 2, padding 1) of [2, 8, 8, 4] into [2, 4, 4, 4]: 128 outputs x 9 compares = 1152
// FLOPs, 512 B; avg_pool2d 2x2 (stride 2) of that into [2, 2, 2, 4]: 32 outputs x 4 adds = 128 FLOPs, 128 B.
// CHECK-LABEL: gpipe.model @pools
// CHECK: gpipe.max_pool2d {{.*}} {cost = #gpipe.cost<flops = 1152, param_bytes = 0, activation_bytes = 512>}
// CHECK: gpipe.avg_pool2d {{.*}} {cost = #gpipe.cost<flops = 128, param_bytes = 0, activation_bytes = 128>}
gpipe.model @pools batch 2 {
  %x = gpipe.input "x" : tensor<2x8x8x4xf32>
  %h = gpipe.layer "pools" -> tensor<2x2x2x4xf32> {
    %0 = gpipe.max_pool2d %x window [3, 3] stride [2, 2] padding [1, 1] : (tensor<2x8x8x4xf32>) -> tensor<2x4x4x4xf32>
    %1 = gpipe.avg_pool2d %0 window [2, 2] stride [2, 2] padding [0, 0] : (tensor<2x4x4x4xf32>) -> tensor<2x2x2x4xf32>
    gpipe.yield %1 : tensor<2x2x2x4xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %h, %h : (tensor<2x2x2x4xf32>, tensor<2x2x2x4xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// gelu_erf is charged as gelu: 8 FLOPs per element, 8*32 = 256; result 128 B.
// CHECK-LABEL: gpipe.model @gelu_erf
// CHECK: gpipe.gelu_erf {{.*}} {cost = #gpipe.cost<flops = 256, param_bytes = 0, activation_bytes = 128>}
gpipe.model @gelu_erf batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %0 = gpipe.gelu_erf %x : tensor<4x8xf32>
    %1 = gpipe.mse_loss %0, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A biased attention on [B=2, S=4, D=8] with 2 heads costs the unbiased 5440 FLOPs (above) plus one add per
// element of qkv (2*4*24 = 192) and of the result (64): 5696; params (8*24 + 8*8 + 24 + 8)*4 B = 1152; kept 1536 B.
// CHECK-LABEL: gpipe.model @biased_attention
// CHECK: gpipe.attention {{.*}} {cost = #gpipe.cost<flops = 5696, param_bytes = 1152, activation_bytes = 1536>}
gpipe.model @biased_attention batch 2 {
  %x = gpipe.input "x" : tensor<2x4x8xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %wqkv = gpipe.param "wqkv" glorot_uniform : tensor<8x24xf32>
    %wo = gpipe.param "wo" glorot_uniform : tensor<8x8xf32>
    %bqkv = gpipe.param "bqkv" zeros : tensor<24xf32>
    %bo = gpipe.param "bo" zeros : tensor<8xf32>
    %0 = gpipe.attention %x, %wqkv, %wo bias %bqkv, %bo heads 2 causal : (tensor<2x4x8xf32>, tensor<8x24xf32>, tensor<8x8xf32>, tensor<24xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %1 = gpipe.mse_loss %0, %x : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<f32>
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
