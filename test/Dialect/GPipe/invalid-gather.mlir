// gather takes an axis in range (past the batch when batched), 1-D i32
// indices (or [batch, k] when batched), and the result of the input with its
// axis the indices' size; gather_grad the same of its dy and output.
// RUN: gpipe-opt %s --split-input-file --verify-diagnostics

gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x6xf32>
  %ids = gpipe.input "ids" : tensor<2x3xi32>
  %y = gpipe.layer "l" -> tensor<2x6xf32> {
    %p = gpipe.param "p" zeros frozen : tensor<3xf32>
    %f = gpipe.neg %p : tensor<3xf32>
    %i = gpipe.cast %p : tensor<3xf32> -> tensor<3xi32>
    // expected-error @+1 {{'gpipe.gather' op expects axis in [0, 2) for 'tensor<2x6xf32>', got 2}}
    %0 = gpipe.gather %x[%i] axis 2 : tensor<2x6xf32>, tensor<3xi32> -> tensor<2x3xf32>
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
  %ids = gpipe.input "ids" : tensor<2x3xi32>
  %y = gpipe.layer "l" -> tensor<2x6xf32> {
    %p = gpipe.param "p" zeros frozen : tensor<3xf32>
    %f = gpipe.neg %p : tensor<3xf32>
    %i = gpipe.cast %p : tensor<3xf32> -> tensor<3xi32>
    // expected-error @+1 {{'gpipe.gather' op expects axis in [1, 2) for 'tensor<2x6xf32>' (batched: dimension 0 pairs with the indices'), got 0}}
    %0 = gpipe.gather %x[%ids] axis 0 batched : tensor<2x6xf32>, tensor<2x3xi32> -> tensor<2x6xf32>
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
  %ids = gpipe.input "ids" : tensor<2x3xi32>
  %y = gpipe.layer "l" -> tensor<2x6xf32> {
    %p = gpipe.param "p" zeros frozen : tensor<3xf32>
    %f = gpipe.neg %p : tensor<3xf32>
    %i = gpipe.cast %p : tensor<3xf32> -> tensor<3xi32>
    // expected-error @+1 {{'gpipe.gather' op expects 1-D indices, got 'tensor<2x3xi32>' (N-D indices: reshape them to 1-D, gather, and reshape the result; per-example indices [batch, k]: `batched`)}}
    %0 = gpipe.gather %x[%ids] axis 1 : tensor<2x6xf32>, tensor<2x3xi32> -> tensor<2x2x3xf32>
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
  %ids = gpipe.input "ids" : tensor<2x3xi32>
  %y = gpipe.layer "l" -> tensor<2x6xf32> {
    %p = gpipe.param "p" zeros frozen : tensor<3xf32>
    %f = gpipe.neg %p : tensor<3xf32>
    %i = gpipe.cast %p : tensor<3xf32> -> tensor<3xi32>
    // expected-error @+1 {{'gpipe.gather' op expects batched indices of shape [2, k] (dimension 0 of 'tensor<2x6xf32>', then the positions), got 'tensor<3xi32>'}}
    %0 = gpipe.gather %x[%i] axis 1 batched : tensor<2x6xf32>, tensor<3xi32> -> tensor<2x3xf32>
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
  %ids = gpipe.input "ids" : tensor<2x3xi32>
  %y = gpipe.layer "l" -> tensor<2x6xf32> {
    %p = gpipe.param "p" zeros frozen : tensor<3xf32>
    %f = gpipe.neg %p : tensor<3xf32>
    %i = gpipe.cast %p : tensor<3xf32> -> tensor<3xi32>
    // expected-error @+1 {{'gpipe.gather' op expects a result 'tensor<2x3xf32>' ('tensor<2x6xf32>' with dimension 1 the indices' 3), got 'tensor<2x6xf32>'}}
    %0 = gpipe.gather %x[%i] axis 1 : tensor<2x6xf32>, tensor<3xi32> -> tensor<2x6xf32>
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
  %ids = gpipe.input "ids" : tensor<2x3xi32>
  %y = gpipe.layer "l" -> tensor<2x6xf32> {
    %p = gpipe.param "p" zeros frozen : tensor<3xf32>
    %f = gpipe.neg %p : tensor<3xf32>
    %i = gpipe.cast %p : tensor<3xf32> -> tensor<3xi32>
    // expected-error @+1 {{'gpipe.gather' op operand #1 must be ranked tensor of 32-bit signless integer values, but got 'tensor<3xf32>'}}
    %0 = gpipe.gather %x[%f] axis 1 : tensor<2x6xf32>, tensor<3xf32> -> tensor<2x3xf32>
    gpipe.yield %x : tensor<2x6xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

gpipe.model @grad batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %s = gpipe.stage @s index 0 (%x) : (tensor<2x3xf32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<2x3xf32>):
    %a = gpipe.layer "a" -> tensor<f32> {
      %0 = gpipe.mse_loss %arg0, %arg0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.yield %a : tensor<f32>
  }
  gpipe.stage_backward @s : (tensor<2x3xf32>) -> () {
  ^bb0(%arg0: tensor<2x3xf32>):
    %r = gpipe.reduce_sum %arg0 axes [0] : tensor<2x3xf32> -> tensor<3xf32>
    %i = gpipe.cast %r : tensor<3xf32> -> tensor<3xi32>
    // expected-error @+1 {{'gpipe.gather_grad' op expects dy 'tensor<2x3x5xf32>' ('tensor<2x6x5xf32>' with dimension 1 the indices' 3), got 'tensor<2x3xf32>'}}
    %g = gpipe.gather_grad %arg0[%i] axis 1 : tensor<2x3xf32>, tensor<3xi32> -> tensor<2x6x5xf32>
    gpipe.yield
  }
  gpipe.return %s : tensor<f32>
}
