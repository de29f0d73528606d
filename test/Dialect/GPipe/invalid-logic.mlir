// Comparisons take float operands that broadcast and give i1; and/or take
// i1; where's branches share the result's element type; cast keeps the
// shape and converts only between f32, i32 and i1.
// RUN: gpipe-opt %s --split-input-file --verify-diagnostics

gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %b = gpipe.input "b" : tensor<2x2xf32>
  %y = gpipe.layer "l" -> tensor<2x3xf32> {
    // expected-error @+1 {{'gpipe.lt' op expects operands that broadcast (aligned at their last dimension, each pair of sizes equal or one of them 1), got 'tensor<2x3xf32>', 'tensor<2x2xf32>'}}
    %0 = gpipe.lt %x, %b : tensor<2x3xf32>, tensor<2x2xf32> -> tensor<2x3xi1>
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
  %b = gpipe.input "b" : tensor<2x2xf32>
  %y = gpipe.layer "l" -> tensor<2x3xf32> {
    // expected-error @+1 {{'gpipe.lt' op expects result type 'tensor<2x3xi1>' (the operands broadcast), got 'tensor<3xi1>'}}
    %0 = gpipe.lt %x, %x : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<3xi1>
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
  %b = gpipe.input "b" : tensor<2x2xf32>
  %y = gpipe.layer "l" -> tensor<2x3xf32> {
    // expected-error @+1 {{'gpipe.eq' op result #0 must be ranked tensor of 1-bit signless integer values, but got 'tensor<2x3xf32>'}}
    %0 = "gpipe.eq"(%x, %x) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
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
  %b = gpipe.input "b" : tensor<2x2xf32>
  %y = gpipe.layer "l" -> tensor<2x3xf32> {
    // expected-error @+1 {{'gpipe.and' op operand #0 must be ranked tensor of 1-bit signless integer values, but got 'tensor<2x3xf32>'}}
    %0 = "gpipe.and"(%x, %x) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
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
  %b = gpipe.input "b" : tensor<2x2xf32>
  %h = gpipe.input "h" : tensor<2x3xf16>
  %y = gpipe.layer "l" -> tensor<2x3xf32> {
    %c = gpipe.gt %x, %x : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xi1>
    // expected-error @+1 {{'gpipe.where' op expects lhs and rhs of the result's element type 'f32', got 'tensor<2x3xf16>'}}
    %0 = gpipe.where %c, %x, %h : tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf16> -> tensor<2x3xf32>
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
  %b = gpipe.input "b" : tensor<2x2xf32>
  %y = gpipe.layer "l" -> tensor<2x3xf32> {
    // expected-error @+1 {{'gpipe.cast' op expects a result of the input's shape, got 'tensor<2x3xf32>' and 'tensor<3x2xi32>'}}
    %0 = gpipe.cast %x : tensor<2x3xf32> -> tensor<3x2xi32>
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
  %b = gpipe.input "b" : tensor<2x2xf32>
  %y = gpipe.layer "l" -> tensor<2x3xf32> {
    // expected-error @+1 {{'gpipe.cast' op result #0 must be ranked tensor of 32-bit float or 32-bit signless integer or 1-bit signless integer values, but got 'tensor<2x3xi64>'}}
    %0 = gpipe.cast %x : tensor<2x3xf32> -> tensor<2x3xi64>
    gpipe.yield %x : tensor<2x3xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
