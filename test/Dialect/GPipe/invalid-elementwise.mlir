// The general element-wise ops take operands of one shape (no broadcasting
// yet) and float tensors.
// RUN: gpipe-opt %s --split-input-file --verify-diagnostics

gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %b = gpipe.input "b" : tensor<2x1xf32>
  %y = gpipe.layer "l" -> tensor<2x3xf32> {
    // expected-error @+1 {{'gpipe.mul' op failed to verify that all of {lhs, rhs, result} have same type}}
    %0 = "gpipe.mul"(%x, %b) : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
    gpipe.yield %0 : tensor<2x3xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %y = gpipe.layer "l" -> tensor<2x3xf32> {
    // expected-error @+1 {{'gpipe.exp' op failed to verify that all of {input, result} have same type}}
    %0 = "gpipe.exp"(%x) : (tensor<2x3xf32>) -> tensor<3x2xf32>
    gpipe.yield %x : tensor<2x3xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %i = gpipe.input "i" : tensor<2x3xi32>
  %y = gpipe.layer "l" -> tensor<2x3xf32> {
    // expected-error @+1 {{'gpipe.sigmoid' op operand #0 must be ranked tensor of 32-bit float or bfloat16 type or 16-bit float values, but got 'tensor<2x3xi32>'}}
    %0 = "gpipe.sigmoid"(%i) : (tensor<2x3xi32>) -> tensor<2x3xi32>
    gpipe.yield %x : tensor<2x3xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %y = gpipe.layer "l" -> tensor<2x3xf32> {
    // expected-error @+1 {{'gpipe.exp_grad' op expects parent op 'gpipe.stage_backward'}}
    %0 = gpipe.exp_grad %x, %x : tensor<2x3xf32>
    gpipe.yield %0 : tensor<2x3xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %y = gpipe.layer "l" -> tensor<2x3xf32> {
    // expected-error @+1 {{'gpipe.clip' op expects min <= max, got min 6 and max 0}}
    %0 = gpipe.clip %x min 6.0 max 0.0 : tensor<2x3xf32>
    gpipe.yield %0 : tensor<2x3xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %y = gpipe.layer "l" -> tensor<2x3xf32> {
    // expected-error @+1 {{'gpipe.clip' op expects finite bounds, got min -inf and max 0}}
    %0 = gpipe.clip %x min 0xFF800000 max 0.0 : tensor<2x3xf32>
    gpipe.yield %0 : tensor<2x3xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
