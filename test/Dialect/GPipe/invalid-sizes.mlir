// Sizes the compiler and the runtime could not count are refused before any pass multiplies by them: zero dimensions,
// tensors of 2^63 bytes or more, and costs that do not fit below 2^63 (a negative cost written by hand reads as a huge
// unsigned number).
// RUN: gpipe-opt %s --split-input-file --verify-diagnostics

// A zero-width dense layer (the cost model divided by it).
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x3xf32>
  %y = gpipe.input "y" : tensor<4xi32>
  %h = gpipe.layer "fc" -> tensor<4x5xf32> {
    // expected-error @+1 {{'gpipe.param' op expects every dimension to be at least 1, got 'tensor<3x0xf32>'}}
    %w = gpipe.param "w" glorot_uniform : tensor<3x0xf32>
    %0 = gpipe.dense %x, %w : (tensor<4x3xf32>, tensor<3x0xf32>) -> tensor<4x5xf32>
    gpipe.yield %0 : tensor<4x5xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.softmax_cross_entropy %h, %y : (tensor<4x5xf32>, tensor<4xi32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A 2^67-byte parameter (2^65 floats).
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x4xf32>
  %y = gpipe.input "y" : tensor<4xi32>
  %h = gpipe.layer "fc" -> tensor<4x4xf32> {
    // expected-error @+1 {{'gpipe.param' op expects a tensor of fewer than 2^63 bytes, got 'tensor<8589934592x4294967296xf32>'}}
    %w = gpipe.param "w" glorot_uniform : tensor<8589934592x4294967296xf32>
    gpipe.yield %x : tensor<4x4xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.softmax_cross_entropy %h, %y : (tensor<4x4xf32>, tensor<4xi32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A hidden width of 2^62: its activation alone is 2^66 bytes.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x3xf32>
  %y = gpipe.input "y" : tensor<4xi32>
  %h = gpipe.layer "fc" -> tensor<4x4611686018427387904xf32> {
    // expected-error @+1 {{'gpipe.param' op expects a tensor of fewer than 2^63 bytes, got 'tensor<3x4611686018427387904xf32>'}}
    %w = gpipe.param "w" glorot_uniform : tensor<3x4611686018427387904xf32>
    %0 = gpipe.dense %x, %w : (tensor<4x3xf32>, tensor<3x4611686018427387904xf32>) -> tensor<4x4611686018427387904xf32>
    gpipe.yield %0 : tensor<4x4611686018427387904xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.softmax_cross_entropy %h, %y : (tensor<4x4611686018427387904xf32>, tensor<4xi32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A negative cost written by hand.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x3xf32>
  // expected-error @+1 {{expects 'flops' to be a non-negative integer below 2^63, got 18446744073709551611 (-5 as a signed number)}}
  %l = gpipe.layer "loss" -> tensor<f32> attributes {cost = #gpipe.cost<flops = -5, param_bytes = 0, activation_bytes = 0>} {
    %0 = gpipe.mse_loss %x, %x : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
