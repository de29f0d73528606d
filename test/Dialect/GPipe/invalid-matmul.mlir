// gpipe.matmul takes operands of rank >= 2 whose contracted sizes agree
// (after the transposes) and whose batch dimensions broadcast, and the
// result they give.
// RUN: gpipe-opt %s --split-input-file --verify-diagnostics

gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x3x4xf32>
  %y = gpipe.layer "l" -> tensor<2x3x4xf32> {
    %v = gpipe.param "v" normal : tensor<4xf32>
    // expected-error @+1 {{'gpipe.matmul' op expects operands of rank >= 2 (batch dimensions, then a matrix), got 'tensor<2x3x4xf32>' and 'tensor<4xf32>'}}
    %0 = gpipe.matmul %x, %v : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3xf32>
    gpipe.yield %x : tensor<2x3x4xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x3x4xf32>
  %y = gpipe.layer "l" -> tensor<2x3x4xf32> {
    // expected-error @+1 {{'gpipe.matmul' op expects the lhs's columns (4) to equal the rhs's rows (3) after the transposes, got 'tensor<2x3x4xf32>' and 'tensor<2x3x4xf32>'}}
    %0 = gpipe.matmul %x, %x : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
    gpipe.yield %x : tensor<2x3x4xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x3x4xf32>
  %y = gpipe.layer "l" -> tensor<2x3x4xf32> {
    %w = gpipe.param "w" normal : tensor<3x4x4xf32>
    // expected-error @+1 {{'gpipe.matmul' op expects batch dimensions that broadcast, got 'tensor<2x3x4xf32>' and 'tensor<3x4x4xf32>'}}
    %0 = gpipe.matmul %x, %w : (tensor<2x3x4xf32>, tensor<3x4x4xf32>) -> tensor<2x3x4xf32>
    gpipe.yield %x : tensor<2x3x4xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x3x4xf32>
  %y = gpipe.layer "l" -> tensor<2x3x4xf32> {
    // expected-error @+1 {{'gpipe.matmul' op expects result type 'tensor<2x3x3xf32>', got 'tensor<2x3x4xf32>'}}
    %0 = gpipe.matmul %x, %x transpose_rhs : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
    gpipe.yield %x : tensor<2x3x4xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
