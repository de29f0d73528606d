// The general element-wise ops take float tensors; binary ones operands that
// broadcast (NumPy's rules) to their result; reductions ascending axes in
// range and a result of the input's shape with those axes kept as 1 or
// dropped.
// RUN: gpipe-opt %s --split-input-file --verify-diagnostics

gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %b = gpipe.input "b" : tensor<2x2xf32>
  %y = gpipe.layer "l" -> tensor<2x3xf32> {
    // expected-error @+1 {{'gpipe.mul' op expects operands that broadcast (aligned at their last dimension, each pair of sizes equal or one of them 1), got 'tensor<2x3xf32>' and 'tensor<2x2xf32>'}}
    %0 = "gpipe.mul"(%x, %b) : (tensor<2x3xf32>, tensor<2x2xf32>) -> tensor<2x3xf32>
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

// -----

gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %y = gpipe.layer "l" -> tensor<2x3xf32> {
    %c = gpipe.param "c" zeros : tensor<3xf32>
    // expected-error @+1 {{'gpipe.sub' op expects result type 'tensor<2x3xf32>' (the operands broadcast), got 'tensor<2x1xf32>'}}
    %0 = "gpipe.sub"(%x, %c) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x1xf32>
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
    %c = gpipe.param "c" zeros : tensor<2xf32>
    // expected-error @+1 {{'gpipe.add' op expects operands that broadcast (aligned at their last dimension, each pair of sizes equal or one of them 1), got 'tensor<2x3xf32>' and 'tensor<2xf32>'}}
    %0 = gpipe.add %x, %c : tensor<2x3xf32>, tensor<2xf32> -> tensor<2x3xf32>
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
    %c = gpipe.param "c" zeros : tensor<2xf32>
    // expected-error @+1 {{'gpipe.broadcast_to' op expects an input that broadcasts to the result 'tensor<2x3xf32>', got 'tensor<2xf32>'}}
    %0 = gpipe.broadcast_to %c : tensor<2xf32> -> tensor<2x3xf32>
    gpipe.yield %x : tensor<2x3xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// `batch` stretches size 1 in dimension 0 over the batch, so the input has
// the result's rank.
gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %y = gpipe.layer "l" -> tensor<2x3xf32> {
    %c = gpipe.param "c" zeros : tensor<3xf32>
    // expected-error @+1 {{'gpipe.broadcast_to' op stretches its input over the batch (`batch`), which needs an input of the result's rank with size 1 in dimension 0, got 'tensor<3xf32>' for 'tensor<2x3xf32>'}}
    %0 = gpipe.broadcast_to %c batch : tensor<3xf32> -> tensor<2x3xf32>
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
    // expected-error @+1 {{'gpipe.sum_to' op expects a result that broadcasts to the input 'tensor<2x3xf32>', got 'tensor<2xf32>'}}
    %0 = gpipe.sum_to %x : tensor<2x3xf32> -> tensor<2xf32>
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
    // expected-error @+1 {{'gpipe.reduce_sum' op expects at least one axis to reduce}}
    %0 = gpipe.reduce_sum %x axes [] : tensor<2x3xf32> -> tensor<2x3xf32>
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
    // expected-error @+1 {{'gpipe.reduce_mean' op expects axes in [0, 2) for 'tensor<2x3xf32>', got 2}}
    %0 = gpipe.reduce_mean %x axes [2] : tensor<2x3xf32> -> tensor<2x3xf32>
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
    // expected-error @+1 {{'gpipe.reduce_max' op expects strictly ascending axes, got 1 then 1}}
    %0 = gpipe.reduce_max %x axes [1, 1] : tensor<2x3xf32> -> tensor<2x1xf32>
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
    // expected-error @+1 {{'gpipe.reduce_sum' op expects result type 'tensor<2x1xf32>' (reduced axes kept) or 'tensor<2xf32>' (dropped), got 'tensor<1x3xf32>'}}
    %0 = gpipe.reduce_sum %x axes [1] : tensor<2x3xf32> -> tensor<1x3xf32>
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
    %c = gpipe.reduce_sum %x axes [1] : tensor<2x3xf32> -> tensor<2x1xf32>
    // No value is empty, so that no reduction is: an empty axis is refused
    // where it would first appear.
    // expected-error @+1 {{'gpipe.broadcast_to' op expects every dimension to be at least 1, got 'tensor<2x0xf32>'}}
    %e = gpipe.broadcast_to %c : tensor<2x1xf32> -> tensor<2x0xf32>
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
    // expected-error @+1 {{'gpipe.reshape' op expects a result of the input's 6 elements of type 'f32', got 'tensor<2x4xf32>'}}
    %0 = gpipe.reshape %x : tensor<2x3xf32> -> tensor<2x4xf32>
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
    // expected-error @+1 {{'gpipe.transpose' op expects a permutation of [0, 2) for 'tensor<2x3xf32>', got [0, 0]}}
    %0 = gpipe.transpose %x perm [0, 0] : tensor<2x3xf32> -> tensor<2x3xf32>
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
    // expected-error @+1 {{'gpipe.transpose' op expects result type 'tensor<3x2xf32>', got 'tensor<2x3xf32>'}}
    %0 = gpipe.transpose %x perm [1, 0] : tensor<2x3xf32> -> tensor<2x3xf32>
    gpipe.yield %x : tensor<2x3xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
