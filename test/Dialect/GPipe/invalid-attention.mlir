// gpipe.attention's optional biases and gpipe.attention_grad's bias gradients: every malformed form gets a diagnostic naming what was expected.
// RUN: gpipe-opt %s --split-input-file --verify-diagnostics

// qkv_bias without out_bias (only the generic form can write it).
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %seq = gpipe.input "seq" : tensor<4x16x64xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %qkv = gpipe.param "qkv" glorot_uniform : tensor<64x192xf32>
    %out = gpipe.param "out" glorot_uniform : tensor<64x64xf32>
    %bqkv = gpipe.param "bqkv" zeros : tensor<192xf32>
    // expected-error @+1 {{'gpipe.attention' op expects qkv_bias and out_bias together, got only qkv_bias}}
    %0 = "gpipe.attention"(%seq, %qkv, %out, %bqkv) <{heads = 4 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 0>}> : (tensor<4x16x64xf32>, tensor<64x192xf32>, tensor<64x64xf32>, tensor<192xf32>) -> tensor<4x16x64xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// out_bias without qkv_bias.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %seq = gpipe.input "seq" : tensor<4x16x64xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %qkv = gpipe.param "qkv" glorot_uniform : tensor<64x192xf32>
    %out = gpipe.param "out" glorot_uniform : tensor<64x64xf32>
    %bo = gpipe.param "bo" zeros : tensor<64xf32>
    // expected-error @+1 {{'gpipe.attention' op expects qkv_bias and out_bias together, got only out_bias}}
    %0 = "gpipe.attention"(%seq, %qkv, %out, %bo) <{heads = 4 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 0, 1>}> : (tensor<4x16x64xf32>, tensor<64x192xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<4x16x64xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// qkv_bias must be [3D].
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %seq = gpipe.input "seq" : tensor<4x16x64xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %qkv = gpipe.param "qkv" glorot_uniform : tensor<64x192xf32>
    %out = gpipe.param "out" glorot_uniform : tensor<64x64xf32>
    %bqkv = gpipe.param "bqkv" zeros : tensor<64xf32>
    %bo = gpipe.param "bo" zeros : tensor<64xf32>
    // expected-error @+1 {{'gpipe.attention' op expects qkv_bias of shape [192], got 'tensor<64xf32>'}}
    %0 = gpipe.attention %seq, %qkv, %out bias %bqkv, %bo heads 4 : (tensor<4x16x64xf32>, tensor<64x192xf32>, tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<4x16x64xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// out_bias must be [D].
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %seq = gpipe.input "seq" : tensor<4x16x64xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %qkv = gpipe.param "qkv" glorot_uniform : tensor<64x192xf32>
    %out = gpipe.param "out" glorot_uniform : tensor<64x64xf32>
    %bqkv = gpipe.param "bqkv" zeros : tensor<192xf32>
    %bo = gpipe.param "bo" zeros : tensor<192xf32>
    // expected-error @+1 {{'gpipe.attention' op expects out_bias of shape [64], got 'tensor<192xf32>'}}
    %0 = gpipe.attention %seq, %qkv, %out bias %bqkv, %bo heads 4 : (tensor<4x16x64xf32>, tensor<64x192xf32>, tensor<64x64xf32>, tensor<192xf32>, tensor<192xf32>) -> tensor<4x16x64xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// a bias of rank 2 is not a bias.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %seq = gpipe.input "seq" : tensor<4x16x64xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %qkv = gpipe.param "qkv" glorot_uniform : tensor<64x192xf32>
    %out = gpipe.param "out" glorot_uniform : tensor<64x64xf32>
    %bqkv = gpipe.param "bqkv" zeros : tensor<1x192xf32>
    %bo = gpipe.param "bo" zeros : tensor<64xf32>
    // expected-error @+1 {{'gpipe.attention' op expects qkv_bias of shape [192], got 'tensor<1x192xf32>'}}
    %0 = gpipe.attention %seq, %qkv, %out bias %bqkv, %bo heads 4 : (tensor<4x16x64xf32>, tensor<64x192xf32>, tensor<64x64xf32>, tensor<1x192xf32>, tensor<64xf32>) -> tensor<4x16x64xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// the biases have the input's element type.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %seq = gpipe.input "seq" : tensor<4x16x64xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %qkv = gpipe.param "qkv" glorot_uniform : tensor<64x192xf32>
    %out = gpipe.param "out" glorot_uniform : tensor<64x64xf32>
    %bqkv = gpipe.param "bqkv" zeros : tensor<192xf32>
    %bo = gpipe.param "bo" zeros : tensor<64xbf16>
    // expected-error @+1 {{'gpipe.attention' op expects the out_bias to have element type 'f32', got 'bf16'}}
    %0 = gpipe.attention %seq, %qkv, %out bias %bqkv, %bo heads 4 : (tensor<4x16x64xf32>, tensor<64x192xf32>, tensor<64x64xf32>, tensor<192xf32>, tensor<64xbf16>) -> tensor<4x16x64xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// a biased attention_grad returns both bias gradients.
gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %s = gpipe.stage @stage0 index 0 (%x) : (tensor<2x3xf32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<2x3xf32>):
    %a = gpipe.layer "a" -> tensor<f32> {
      %0 = gpipe.mse_loss %arg0, %arg0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.yield %a : tensor<f32>
  }
  gpipe.stage_backward @stage0 : (tensor<2x3xf32>) -> () {
  ^bb0(%arg0: tensor<2x3xf32>):
    %y = gpipe.zeros : tensor<1x2x4xf32>
    %wqkv = gpipe.param_ref "wqkv" : tensor<4x12xf32>
    %wo = gpipe.param_ref "wo" : tensor<4x4xf32>
    %bqkv = gpipe.param_ref "bqkv" : tensor<12xf32>
    %bo = gpipe.param_ref "bo" : tensor<4xf32>
    // expected-error @+1 {{'gpipe.attention_grad' op expects 2 bias gradients (one per bias operand), got 0}}
    %dx, %dqkv, %dwo = gpipe.attention_grad %y, %y, %y, %wqkv, %wo bias %bqkv, %bo heads 2 : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<4x12xf32>, tensor<4x4xf32>, tensor<12xf32>, tensor<4xf32>) -> (tensor<1x2x4xf32>, tensor<4x12xf32>, tensor<4x4xf32>)
    gpipe.yield
  }
  gpipe.return %s : tensor<f32>
}

// -----

// an unbiased attention_grad returns no bias gradients.
gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %s = gpipe.stage @stage0 index 0 (%x) : (tensor<2x3xf32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<2x3xf32>):
    %a = gpipe.layer "a" -> tensor<f32> {
      %0 = gpipe.mse_loss %arg0, %arg0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.yield %a : tensor<f32>
  }
  gpipe.stage_backward @stage0 : (tensor<2x3xf32>) -> () {
  ^bb0(%arg0: tensor<2x3xf32>):
    %y = gpipe.zeros : tensor<1x2x4xf32>
    %wqkv = gpipe.param_ref "wqkv" : tensor<4x12xf32>
    %wo = gpipe.param_ref "wo" : tensor<4x4xf32>
    %bqkv = gpipe.param_ref "bqkv" : tensor<12xf32>
    %bo = gpipe.param_ref "bo" : tensor<4xf32>
    // expected-error @+1 {{'gpipe.attention_grad' op expects 0 bias gradients (one per bias operand), got 2}}
    %dx, %dqkv, %dwo, %db:2 = gpipe.attention_grad %y, %y, %y, %wqkv, %wo heads 2 : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<4x12xf32>, tensor<4x4xf32>) -> (tensor<1x2x4xf32>, tensor<4x12xf32>, tensor<4x4xf32>, tensor<12xf32>, tensor<4xf32>)
    gpipe.yield
  }
  gpipe.return %s : tensor<f32>
}

// -----

// the bias gradients have their biases' types, in order.
gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %s = gpipe.stage @stage0 index 0 (%x) : (tensor<2x3xf32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<2x3xf32>):
    %a = gpipe.layer "a" -> tensor<f32> {
      %0 = gpipe.mse_loss %arg0, %arg0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.yield %a : tensor<f32>
  }
  gpipe.stage_backward @stage0 : (tensor<2x3xf32>) -> () {
  ^bb0(%arg0: tensor<2x3xf32>):
    %y = gpipe.zeros : tensor<1x2x4xf32>
    %wqkv = gpipe.param_ref "wqkv" : tensor<4x12xf32>
    %wo = gpipe.param_ref "wo" : tensor<4x4xf32>
    %bqkv = gpipe.param_ref "bqkv" : tensor<12xf32>
    %bo = gpipe.param_ref "bo" : tensor<4xf32>
    // expected-error @+1 {{'gpipe.attention_grad' op expects dqkv_bias of type 'tensor<12xf32>', got 'tensor<4xf32>'}}
    %dx, %dqkv, %dwo, %db:2 = gpipe.attention_grad %y, %y, %y, %wqkv, %wo bias %bqkv, %bo heads 2 : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<4x12xf32>, tensor<4x4xf32>, tensor<12xf32>, tensor<4xf32>) -> (tensor<1x2x4xf32>, tensor<4x12xf32>, tensor<4x4xf32>, tensor<4xf32>, tensor<12xf32>)
    gpipe.yield
  }
  gpipe.return %s : tensor<f32>
}

// -----

// attention_grad's biases follow the forward's rules.
gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %s = gpipe.stage @stage0 index 0 (%x) : (tensor<2x3xf32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<2x3xf32>):
    %a = gpipe.layer "a" -> tensor<f32> {
      %0 = gpipe.mse_loss %arg0, %arg0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.yield %a : tensor<f32>
  }
  gpipe.stage_backward @stage0 : (tensor<2x3xf32>) -> () {
  ^bb0(%arg0: tensor<2x3xf32>):
    %y = gpipe.zeros : tensor<1x2x4xf32>
    %wqkv = gpipe.param_ref "wqkv" : tensor<4x12xf32>
    %wo = gpipe.param_ref "wo" : tensor<4x4xf32>
    %bqkv = gpipe.param_ref "bqkv" : tensor<12xf32>
    %bo = gpipe.param_ref "bo" : tensor<4xf32>
    // expected-error @+1 {{'gpipe.attention_grad' op expects out_bias of shape [4], got 'tensor<12xf32>'}}
    %dx, %dqkv, %dwo, %db:2 = gpipe.attention_grad %y, %y, %y, %wqkv, %wo bias %bqkv, %bqkv heads 2 : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<4x12xf32>, tensor<4x4xf32>, tensor<12xf32>, tensor<12xf32>) -> (tensor<1x2x4xf32>, tensor<4x12xf32>, tensor<4x4xf32>, tensor<12xf32>, tensor<12xf32>)
    gpipe.yield
  }
  gpipe.return %s : tensor<f32>
}
