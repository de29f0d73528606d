// slice takes one start (in range) and one step (>= 1) per dimension and a
// result that fits; concat two or more inputs equal but along an axis in
// range, whose sizes sum to the result's.
// RUN: gpipe-opt %s --split-input-file --verify-diagnostics

gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x6xf32>
  %y = gpipe.layer "l" -> tensor<2x6xf32> {
    // expected-error @+1 {{'gpipe.slice' op expects one start and one step per dimension of 'tensor<2x6xf32>' (2), got 1 starts and 2 steps}}
    %0 = gpipe.slice %x starts [0] steps [1, 1] : tensor<2x6xf32> -> tensor<2x3xf32>
    gpipe.yield %x : tensor<2x6xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x6xf32>
  %y = gpipe.layer "l" -> tensor<2x6xf32> {
    // expected-error @+1 {{'gpipe.slice' op expects starts[1] in [0, 6), got 6}}
    %0 = gpipe.slice %x starts [0, 6] steps [1, 1] : tensor<2x6xf32> -> tensor<2x3xf32>
    gpipe.yield %x : tensor<2x6xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x6xf32>
  %y = gpipe.layer "l" -> tensor<2x6xf32> {
    // expected-error @+1 {{'gpipe.slice' op expects steps[1] >= 1, got 0}}
    %0 = gpipe.slice %x starts [0, 0] steps [1, 0] : tensor<2x6xf32> -> tensor<2x3xf32>
    gpipe.yield %x : tensor<2x6xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x6xf32>
  %y = gpipe.layer "l" -> tensor<2x6xf32> {
    // expected-error @+1 {{'gpipe.slice' op expects a result dimension 1 in [1, 3] (the elements from 1 by steps of 2 in 6), got 4}}
    %0 = gpipe.slice %x starts [0, 1] steps [1, 2] : tensor<2x6xf32> -> tensor<2x4xf32>
    gpipe.yield %x : tensor<2x6xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x6xf32>
  %y = gpipe.layer "l" -> tensor<2x6xf32> {
    // expected-error @+1 {{'gpipe.slice' op expects a result of rank 2 and element type 'f32', got 'tensor<2x3x1xf32>'}}
    %0 = gpipe.slice %x starts [0, 0] steps [1, 1] : tensor<2x6xf32> -> tensor<2x3x1xf32>
    gpipe.yield %x : tensor<2x6xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x6xf32>
  %y = gpipe.layer "l" -> tensor<2x6xf32> {
    // expected-error @+1 {{'gpipe.concat' op expects axis in [0, 2) for 'tensor<2x12xf32>', got 2}}
    %0 = gpipe.concat %x, %x axis 2 : tensor<2x6xf32>, tensor<2x6xf32> -> tensor<2x12xf32>
    gpipe.yield %x : tensor<2x6xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x6xf32>
  %y = gpipe.layer "l" -> tensor<2x6xf32> {
    // expected-error @+1 {{'gpipe.concat' op expects two or more inputs, got 1}}
    %0 = gpipe.concat %x axis 1 : tensor<2x6xf32> -> tensor<2x6xf32>
    gpipe.yield %x : tensor<2x6xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x6xf32>
  %y = gpipe.layer "l" -> tensor<2x6xf32> {
    // expected-error @+1 {{'gpipe.concat' op expects the result's dimension 1 to be the inputs' sum, 12, got 11}}
    %0 = gpipe.concat %x, %x axis 1 : tensor<2x6xf32>, tensor<2x6xf32> -> tensor<2x11xf32>
    gpipe.yield %x : tensor<2x6xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x6xf32>
  %y = gpipe.layer "l" -> tensor<2x6xf32> {
    // expected-error @+1 {{'gpipe.concat' op expects input 0 to match the result 'tensor<4x5xf32>' in every dimension but 0, got 'tensor<2x6xf32>'}}
    %0 = gpipe.concat %x, %x axis 0 : tensor<2x6xf32>, tensor<2x6xf32> -> tensor<4x5xf32>
    gpipe.yield %x : tensor<2x6xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
