// Every verifier error of the gpipe ops, and the ODS constraints worth showing.
// RUN: gpipe-opt %s --split-input-file --verify-diagnostics

// A model's batch must be positive.
// expected-error @+1 {{'gpipe.model' op attribute 'batch' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
gpipe.model @m batch 0 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A model's body must end with gpipe.return.
// expected-error @+1 {{'gpipe.model' op expects its body to end with 'gpipe.return'}}
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
}

// -----

// Two inputs may not share a name.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  // expected-error @+1 {{'gpipe.input' op name 'x' is used by another input}}
  %y = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %x, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A model needs at least one layer (or stage) to compute its loss.
// expected-error @+1 {{'gpipe.model' op expects at least one 'gpipe.layer'}}
gpipe.model @m batch 4 {
  %l = gpipe.recv from 0 to 1 channel 0 : tensor<f32>
  gpipe.return %l : tensor<f32>
}

// -----

// Two layers may not share a name.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %h = gpipe.layer "fc" -> tensor<4x8xf32> {
    %0 = gpipe.relu %x : tensor<4x8xf32>
    gpipe.yield %0 : tensor<4x8xf32>
  }
  // expected-error @+1 {{'gpipe.layer' op name 'fc' is used by another layer}}
  %l = gpipe.layer "fc" -> tensor<f32> {
    %0 = gpipe.mse_loss %h, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// Two parameters may not share a name, even in different layers.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %h = gpipe.layer "fc1" -> tensor<4x8xf32> {
    %w = gpipe.param "w" glorot_uniform : tensor<8x8xf32>
    %0 = gpipe.dense %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    gpipe.yield %0 : tensor<4x8xf32>
  }
  %l = gpipe.layer "fc2" -> tensor<f32> {
    // expected-error @+1 {{'gpipe.param' op name 'w' is used by another parameter}}
    %w = gpipe.param "w" glorot_uniform : tensor<8x8xf32>
    %0 = gpipe.dense %h, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %1 = gpipe.mse_loss %0, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// The loss must come from the last layer, not an earlier one.
// expected-error @+1 {{'gpipe.model' op expects the returned loss to be a result of the last 'gpipe.layer' in the body}}
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  %h = gpipe.layer "after" -> tensor<4x8xf32> {
    %0 = gpipe.relu %x : tensor<4x8xf32>
    gpipe.yield %0 : tensor<4x8xf32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// The loss must be a scalar.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %h = gpipe.layer "act" -> tensor<4x8xf32> {
    %0 = gpipe.relu %x : tensor<4x8xf32>
    gpipe.yield %0 : tensor<4x8xf32>
  }
  // expected-error @+1 {{'gpipe.return' op operand #0 must be 0D tensor of 32-bit float or bfloat16 type or 16-bit float values, but got 'tensor<4x8xf32>'}}
  gpipe.return %h : tensor<4x8xf32>
}

// -----

// An input's leading dimension must be the batch.
gpipe.model @m batch 4 {
  // expected-error @+1 {{'gpipe.input' op expects a static shape with the batch size 4 as leading dimension, got 'tensor<8x8xf32>'}}
  %x = gpipe.input "x" : tensor<8x8xf32>
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %x, %x : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// An input may not be a scalar: it has no batch dimension.
gpipe.model @m batch 4 {
  // expected-error @+1 {{'gpipe.input' op expects a static shape with the batch size 4 as leading dimension, got 'tensor<f32>'}}
  %x = gpipe.input "x" : tensor<f32>
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %x, %x : (tensor<f32>, tensor<f32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// An input's shape must be static.
gpipe.model @m batch 4 {
  // expected-error @+1 {{'gpipe.input' op result #0 must be statically shaped tensor of any type values, but got 'tensor<4x?xf32>'}}
  %x = gpipe.input "x" : tensor<4x?xf32>
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %x, %x : (tensor<4x?xf32>, tensor<4x?xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// An input belongs to a model.
// expected-error @+1 {{'gpipe.input' op expects parent op 'gpipe.model'}}
%x = gpipe.input "x" : tensor<4x8xf32>

// -----

// A parameter's shape must be static.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    // expected-error @+1 {{'gpipe.param' op expects a static shape, got 'tensor<?x8xf32>'}}
    %w = gpipe.param "w" zeros : tensor<?x8xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// Only normal and uniform take a scale.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    // expected-error @+1 {{'gpipe.param' op takes a scale only with the normal or uniform initializer, got glorot_uniform}}
    %w = gpipe.param "w" glorot_uniform scale 2.0 : tensor<8x8xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A scale must be positive.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    // expected-error @+1 {{'gpipe.param' op expects a positive scale, got 0.000000e+00}}
    %w = gpipe.param "w" normal scale 0.0 : tensor<8x8xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A negative scale is rejected too.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    // expected-error @+1 {{'gpipe.param' op expects a positive scale, got -5.000000e-01}}
    %w = gpipe.param "w" uniform scale -0.5 : tensor<8x8xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A parameter holds floats.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    // expected-error @+1 {{'gpipe.param' op result #0 must be ranked tensor of 32-bit float or bfloat16 type or 16-bit float values, but got 'tensor<8xi32>'}}
    %w = gpipe.param "w" zeros : tensor<8xi32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A parameter belongs to a layer, not to the model.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  // expected-error @+1 {{'gpipe.param' op expects parent op 'gpipe.layer'}}
  %w = gpipe.param "w" zeros : tensor<8x8xf32>
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// An unknown initializer is a parse error.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "loss" -> tensor<f32> {
    // expected-error @+1 {{custom op 'gpipe.param' expected string or keyword containing one of the following enum values for attribute 'init' [zeros, ones, normal, uniform, glorot_uniform, pretrained]}}
    %w = gpipe.param "w" xavier : tensor<8x8xf32>
    %0 = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A layer needs a non-empty name.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  // expected-error @+1 {{'gpipe.layer' op expects a non-empty name}}
  %l = gpipe.layer "" -> tensor<f32> {
    %0 = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A layer's cell may not be negative.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  // expected-error @+1 {{'gpipe.layer' op attribute 'cell' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  %l = gpipe.layer "loss" -> tensor<f32> attributes {cell = -1 : i64} {
    %0 = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A layer's cost must be a #gpipe.cost.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  // expected-error @+1 {{'gpipe.layer' op attribute 'cost' failed to satisfy constraint: forward cost of an op, a layer or a stage}}
  %l = gpipe.layer "loss" -> tensor<f32> attributes {cost = 12 : i64} {
    %0 = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A layer sits in a model or a stage.
// expected-error @+1 {{'gpipe.layer' op expects parent op to be one of 'gpipe.model, gpipe.stage'}}
gpipe.layer "orphan" {
  gpipe.yield
}

// -----

// A layer's result types must match what it yields.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %h = gpipe.layer "act" -> tensor<4x8xbf16> {
    %0 = gpipe.relu %x : tensor<4x8xf32>
    // expected-error @+1 {{'gpipe.yield' op expects value #0 to have type 'tensor<4x8xbf16>', got 'tensor<4x8xf32>'}}
    gpipe.yield %0 : tensor<4x8xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A layer must yield as many values as it has results.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %h:2 = gpipe.layer "act" -> tensor<4x8xf32>, tensor<4x8xf32> {
    %0 = gpipe.relu %x : tensor<4x8xf32>
    // expected-error @+1 {{'gpipe.yield' op expects 2 values matching the results of 'gpipe.layer', got 1}}
    gpipe.yield %0 : tensor<4x8xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// gpipe.yield terminates a layer or a stage only.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  // expected-error @+1 {{'gpipe.yield' op expects parent op to be one of 'gpipe.layer, gpipe.stage, gpipe.stage_backward'}}
  gpipe.yield %l : tensor<f32>
  gpipe.return %l : tensor<f32>
}

// -----

// A stage has one block argument per input.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  // expected-error @+1 {{'gpipe.stage' op expects 2 block arguments matching its inputs, got 1}}
  %s = gpipe.stage @stage0 index 0 (%x, %x) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32> {
  ^bb0(%a: tensor<4x8xf32>):
    %l = gpipe.layer "loss" -> tensor<f32> {
      %0 = gpipe.mse_loss %a, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.yield %l : tensor<f32>
  }
  gpipe.return %s : tensor<f32>
}

// -----

// A stage's block arguments have its inputs' types.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %y = gpipe.input "y" : tensor<4x8xbf16>
  // expected-error @+1 {{'gpipe.stage' op expects block argument #1 to have the input's type 'tensor<4x8xbf16>', got 'tensor<4x8xf32>'}}
  %s = gpipe.stage @stage0 index 0 (%x, %y) : (tensor<4x8xf32>, tensor<4x8xbf16>) -> tensor<f32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>):
    %l = gpipe.layer "loss" -> tensor<f32> {
      %0 = gpipe.mse_loss %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.yield %l : tensor<f32>
  }
  gpipe.return %s : tensor<f32>
}

// -----

// A stage's results must match what it yields.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %s = gpipe.stage @stage0 index 0 (%x) : (tensor<4x8xf32>) -> tensor<f32> {
  ^bb0(%a: tensor<4x8xf32>):
    %l = gpipe.layer "loss" -> tensor<f32> {
      %0 = gpipe.mse_loss %a, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    // expected-error @+1 {{'gpipe.yield' op expects 1 value matching the results of 'gpipe.stage', got 2}}
    gpipe.yield %l, %a : tensor<f32>, tensor<4x8xf32>
  }
  gpipe.return %s : tensor<f32>
}

// -----

// Two stages may not share a name.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %s0 = gpipe.stage @stage0 index 0 (%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    %h = gpipe.layer "act" -> tensor<4x8xf32> {
      %0 = gpipe.relu %a : tensor<4x8xf32>
      gpipe.yield %0 : tensor<4x8xf32>
    }
    gpipe.yield %h : tensor<4x8xf32>
  }
  // expected-error @+1 {{'gpipe.stage' op name @stage0 is used by another stage}}
  %s = gpipe.stage @stage0 index 1 (%s0) : (tensor<4x8xf32>) -> tensor<f32> {
  ^bb0(%a: tensor<4x8xf32>):
    %l = gpipe.layer "loss" -> tensor<f32> {
      %0 = gpipe.mse_loss %a, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.yield %l : tensor<f32>
  }
  gpipe.return %s : tensor<f32>
}

// -----

// A stage is isolated from above: it reads model values through its inputs.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  // expected-note @+1 {{required by region isolation constraints}}
  %s = gpipe.stage @stage0 index 0 () : () -> tensor<f32> {
    %l = gpipe.layer "loss" -> tensor<f32> {
      // expected-error @+1 {{using value defined outside the region}}
      %0 = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.yield %l : tensor<f32>
  }
  gpipe.return %s : tensor<f32>
}

// -----

// A stage sits directly in a model.
// expected-error @+1 {{'gpipe.stage' op expects parent op 'gpipe.model'}}
%s = gpipe.stage @stage0 index 0 () : () -> tensor<f32> {
  %l = gpipe.layer "loss" -> tensor<f32> {
    %p = gpipe.param "p" ones : tensor<4x8xf32>
    %0 = gpipe.mse_loss %p, %p : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.yield %l : tensor<f32>
}

// -----

// A channel connects a stage to the next one: send.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  // expected-error @+1 {{'gpipe.send' op expects 'to' to be 'from' + 1 (channels connect adjacent stages), got from 0 to 2}}
  gpipe.send %x from 0 to 2 channel 0 : tensor<4x8xf32>
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A channel connects a stage to the next one: recv, never backwards.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  // expected-error @+1 {{'gpipe.recv' op expects 'to' to be 'from' + 1 (channels connect adjacent stages), got from 1 to 0}}
  %r = gpipe.recv from 1 to 0 channel 0 : tensor<4x8xf32>
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// Channel ends are device indices, never negative.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  // expected-error @+1 {{'gpipe.send' op attribute 'from' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  gpipe.send %x from -1 to 0 channel 0 : tensor<4x8xf32>
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// send and recv sit directly in a model, not in a stage.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %s = gpipe.stage @stage0 index 0 (%x) : (tensor<4x8xf32>) -> tensor<f32> {
  ^bb0(%a: tensor<4x8xf32>):
    // expected-error @+1 {{'gpipe.send' op expects parent op 'gpipe.model'}}
    gpipe.send %a from 0 to 1 channel 0 : tensor<4x8xf32>
    %l = gpipe.layer "loss" -> tensor<f32> {
      %0 = gpipe.mse_loss %a, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.yield %l : tensor<f32>
  }
  gpipe.return %s : tensor<f32>
}

// -----

// Compute ops sit in a layer, not directly in the model.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  // expected-error @+1 {{'gpipe.relu' op expects parent op to be one of 'gpipe.layer, gpipe.stage_backward'}}
  %r = gpipe.relu %x : tensor<4x8xf32>
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// relu computes on floats only.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %ids = gpipe.input "ids" : tensor<4xi32>
  %l = gpipe.layer "l" -> tensor<f32> {
    // expected-error @+1 {{'gpipe.relu' op operand #0 must be ranked tensor of 32-bit float or bfloat16 type or 16-bit float values, but got 'tensor<4xi32>'}}
    %0 = gpipe.relu %ids : tensor<4xi32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// add needs operands of one type.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %y = gpipe.param "y" zeros : tensor<4x8xbf16>
    // expected-error @+1 {{'gpipe.add' op expects operands of the result's element type 'f32', got 'tensor<4x8xf32>' and 'tensor<4x8xbf16>'}}
    %0 = "gpipe.add"(%x, %y) : (tensor<4x8xf32>, tensor<4x8xbf16>) -> tensor<4x8xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A cost attribute must be a #gpipe.cost.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    // expected-error @+1 {{'gpipe.tanh' op attribute 'cost' failed to satisfy constraint: forward cost of an op, a layer or a stage}}
    %0 = gpipe.tanh %x {cost = "cheap"} : tensor<4x8xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// dense needs an input of rank >= 1.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %s = gpipe.param "s" zeros : tensor<f32>
    %w = gpipe.param "w" zeros : tensor<1x8xf32>
    // expected-error @+1 {{'gpipe.dense' op expects a static input of rank >= 1, got 'tensor<f32>'}}
    %0 = gpipe.dense %s, %w : (tensor<f32>, tensor<1x8xf32>) -> tensor<8xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A value received from another stage has a static shape (so no op ever sees a dynamic one).
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  // expected-error @+1 {{'gpipe.recv' op result #0 must be statically shaped tensor of any type values, but got 'tensor<?x8xf32>'}}
  %dyn = gpipe.recv from 0 to 1 channel 0 : tensor<?x8xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// dense needs a weight of rank 2.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %w = gpipe.param "w" zeros : tensor<8xf32>
    // expected-error @+1 {{'gpipe.dense' op expects a weight of rank 2, got 'tensor<8xf32>'}}
    %0 = gpipe.dense %x, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// dense needs as many weight rows as input features.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %w = gpipe.param "w" zeros : tensor<16x2xf32>
    // expected-error @+1 {{'gpipe.dense' op expects the weight to have 8 rows (the input's last dimension), got 'tensor<16x2xf32>'}}
    %0 = gpipe.dense %x, %w : (tensor<4x8xf32>, tensor<16x2xf32>) -> tensor<4x2xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// dense needs a bias with one entry per output feature.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %w = gpipe.param "w" zeros : tensor<8x2xf32>
    %b = gpipe.param "b" zeros : tensor<8xf32>
    // expected-error @+1 {{'gpipe.dense' op expects a bias of shape [2], got 'tensor<8xf32>'}}
    %0 = gpipe.dense %x, %w, %b : (tensor<4x8xf32>, tensor<8x2xf32>, tensor<8xf32>) -> tensor<4x2xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// dense needs one element type for input and weight.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %w = gpipe.param "w" zeros : tensor<8x2xbf16>
    // expected-error @+1 {{'gpipe.dense' op expects the weight to have element type 'f32', got 'bf16'}}
    %0 = gpipe.dense %x, %w : (tensor<4x8xf32>, tensor<8x2xbf16>) -> tensor<4x2xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// dense needs one element type for input and bias.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %w = gpipe.param "w" zeros : tensor<8x2xf32>
    %b = gpipe.param "b" zeros : tensor<2xf16>
    // expected-error @+1 {{'gpipe.dense' op expects the bias to have element type 'f32', got 'f16'}}
    %0 = gpipe.dense %x, %w, %b : (tensor<4x8xf32>, tensor<8x2xf32>, tensor<2xf16>) -> tensor<4x2xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// dense computes in the input's element type.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %w = gpipe.param "w" zeros : tensor<8x2xf32>
    // expected-error @+1 {{'gpipe.dense' op expects the result to have element type 'f32', got 'bf16'}}
    %0 = gpipe.dense %x, %w : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xbf16>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// dense's result replaces the last dimension by the weight's columns.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %w = gpipe.param "w" zeros : tensor<8x2xf32>
    // expected-error @+1 {{'gpipe.dense' op expects result type 'tensor<4x2xf32>', got 'tensor<4x8xf32>'}}
    %0 = gpipe.dense %x, %w : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x8xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// layer_norm needs an input of rank >= 1.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %s = gpipe.param "s" zeros : tensor<f32>
    %g = gpipe.param "g" ones : tensor<8xf32>
    // expected-error @+1 {{'gpipe.layer_norm' op expects an input of rank >= 1, got 'tensor<f32>'}}
    %0 = gpipe.layer_norm %s, %g, %g : (tensor<f32>, tensor<8xf32>, tensor<8xf32>) -> tensor<f32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// layer_norm needs gamma of the feature width.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %g = gpipe.param "g" ones : tensor<4xf32>
    %b = gpipe.param "b" zeros : tensor<8xf32>
    // expected-error @+1 {{'gpipe.layer_norm' op expects gamma of shape [8] (the input's last dimension), got 'tensor<4xf32>'}}
    %0 = gpipe.layer_norm %x, %g, %b : (tensor<4x8xf32>, tensor<4xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// layer_norm needs beta of rank 1.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %g = gpipe.param "g" ones : tensor<8xf32>
    %b = gpipe.param "b" zeros : tensor<1x8xf32>
    // expected-error @+1 {{'gpipe.layer_norm' op expects beta of shape [8] (the input's last dimension), got 'tensor<1x8xf32>'}}
    %0 = gpipe.layer_norm %x, %g, %b : (tensor<4x8xf32>, tensor<8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// layer_norm needs a positive epsilon.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %g = gpipe.param "g" ones : tensor<8xf32>
    // expected-error @+1 {{'gpipe.layer_norm' op expects a positive epsilon, got 0.000000e+00}}
    %0 = gpipe.layer_norm %x, %g, %g {epsilon = 0.0 : f64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// layer_norm needs gamma in the input's element type.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %g = gpipe.param "g" ones : tensor<8xbf16>
    %b = gpipe.param "b" zeros : tensor<8xf32>
    // expected-error @+1 {{'gpipe.layer_norm' op expects the gamma to have element type 'f32', got 'bf16'}}
    %0 = gpipe.layer_norm %x, %g, %b : (tensor<4x8xf32>, tensor<8xbf16>, tensor<8xf32>) -> tensor<4x8xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// layer_norm needs beta in the input's element type.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %g = gpipe.param "g" ones : tensor<8xf32>
    %b = gpipe.param "b" zeros : tensor<8xf16>
    // expected-error @+1 {{'gpipe.layer_norm' op expects the beta to have element type 'f32', got 'f16'}}
    %0 = gpipe.layer_norm %x, %g, %b : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf16>) -> tensor<4x8xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// layer_norm keeps the input's type.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %g = gpipe.param "g" ones : tensor<8xf32>
    // expected-error @+1 {{'gpipe.layer_norm' op expects result type 'tensor<4x8xf32>', got 'tensor<4x8xbf16>'}}
    %0 = gpipe.layer_norm %x, %g, %g : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xbf16>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// embedding needs a table of rank 2.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %ids = gpipe.input "ids" : tensor<4x16xi32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %t = gpipe.param "t" normal : tensor<96xf32>
    // expected-error @+1 {{'gpipe.embedding' op expects a table of rank 2 [vocabulary, width], got 'tensor<96xf32>'}}
    %0 = gpipe.embedding %ids, %t : (tensor<4x16xi32>, tensor<96xf32>) -> tensor<4x16xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// embedding's result appends the table width to the ids' shape.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %ids = gpipe.input "ids" : tensor<4x16xi32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %t = gpipe.param "t" normal : tensor<96x64xf32>
    // expected-error @+1 {{'gpipe.embedding' op expects result type 'tensor<4x16x64xf32>', got 'tensor<4x64xf32>'}}
    %0 = gpipe.embedding %ids, %t : (tensor<4x16xi32>, tensor<96x64xf32>) -> tensor<4x64xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// embedding's result has the table's element type.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %ids = gpipe.input "ids" : tensor<4x16xi32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %t = gpipe.param "t" normal : tensor<96x64xbf16>
    // expected-error @+1 {{'gpipe.embedding' op expects result type 'tensor<4x16x64xbf16>', got 'tensor<4x16x64xf32>'}}
    %0 = gpipe.embedding %ids, %t : (tensor<4x16xi32>, tensor<96x64xbf16>) -> tensor<4x16x64xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// embedding ids are integers.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %t = gpipe.param "t" normal : tensor<96x64xf32>
    // expected-error @+1 {{'gpipe.embedding' op operand #0 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4x8xf32>'}}
    %0 = gpipe.embedding %x, %t : (tensor<4x8xf32>, tensor<96x64xf32>) -> tensor<4x8x64xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// attention needs a [batch, sequence, width] input.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %seq = gpipe.input "seq" : tensor<4x16x64xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %qkv = gpipe.param "qkv" glorot_uniform : tensor<8x24xf32>
    %out = gpipe.param "out" glorot_uniform : tensor<8x8xf32>
    // expected-error @+1 {{'gpipe.attention' op expects a static input of rank 3 [batch, sequence, width], got 'tensor<4x8xf32>'}}
    %0 = gpipe.attention %x, %qkv, %out heads 2 : (tensor<4x8xf32>, tensor<8x24xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// attention needs qkv_weight of shape [D, 3D].
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %seq = gpipe.input "seq" : tensor<4x16x64xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %qkv = gpipe.param "qkv" glorot_uniform : tensor<64x128xf32>
    %out = gpipe.param "out" glorot_uniform : tensor<64x64xf32>
    // expected-error @+1 {{'gpipe.attention' op expects qkv_weight of shape [64, 192], got 'tensor<64x128xf32>'}}
    %0 = gpipe.attention %seq, %qkv, %out heads 4 : (tensor<4x16x64xf32>, tensor<64x128xf32>, tensor<64x64xf32>) -> tensor<4x16x64xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// attention needs out_weight of shape [D, D].
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %seq = gpipe.input "seq" : tensor<4x16x64xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %qkv = gpipe.param "qkv" glorot_uniform : tensor<64x192xf32>
    %out = gpipe.param "out" glorot_uniform : tensor<64x32xf32>
    // expected-error @+1 {{'gpipe.attention' op expects out_weight of shape [64, 64], got 'tensor<64x32xf32>'}}
    %0 = gpipe.attention %seq, %qkv, %out heads 4 : (tensor<4x16x64xf32>, tensor<64x192xf32>, tensor<64x32xf32>) -> tensor<4x16x64xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// attention's heads must divide the width.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %seq = gpipe.input "seq" : tensor<4x16x64xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %qkv = gpipe.param "qkv" glorot_uniform : tensor<64x192xf32>
    %out = gpipe.param "out" glorot_uniform : tensor<64x64xf32>
    // expected-error @+1 {{'gpipe.attention' op expects the number of heads to divide the width 64, got 6 heads}}
    %0 = gpipe.attention %seq, %qkv, %out heads 6 : (tensor<4x16x64xf32>, tensor<64x192xf32>, tensor<64x64xf32>) -> tensor<4x16x64xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// attention needs at least one head.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %seq = gpipe.input "seq" : tensor<4x16x64xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %qkv = gpipe.param "qkv" glorot_uniform : tensor<64x192xf32>
    %out = gpipe.param "out" glorot_uniform : tensor<64x64xf32>
    // expected-error @+1 {{'gpipe.attention' op attribute 'heads' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
    %0 = gpipe.attention %seq, %qkv, %out heads 0 : (tensor<4x16x64xf32>, tensor<64x192xf32>, tensor<64x64xf32>) -> tensor<4x16x64xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// attention needs qkv_weight in the input's element type.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %seq = gpipe.input "seq" : tensor<4x16x64xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %qkv = gpipe.param "qkv" glorot_uniform : tensor<64x192xbf16>
    %out = gpipe.param "out" glorot_uniform : tensor<64x64xf32>
    // expected-error @+1 {{'gpipe.attention' op expects the qkv_weight to have element type 'f32', got 'bf16'}}
    %0 = gpipe.attention %seq, %qkv, %out heads 4 : (tensor<4x16x64xf32>, tensor<64x192xbf16>, tensor<64x64xf32>) -> tensor<4x16x64xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// attention needs out_weight in the input's element type.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %seq = gpipe.input "seq" : tensor<4x16x64xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %qkv = gpipe.param "qkv" glorot_uniform : tensor<64x192xf32>
    %out = gpipe.param "out" glorot_uniform : tensor<64x64xf16>
    // expected-error @+1 {{'gpipe.attention' op expects the out_weight to have element type 'f32', got 'f16'}}
    %0 = gpipe.attention %seq, %qkv, %out heads 4 : (tensor<4x16x64xf32>, tensor<64x192xf32>, tensor<64x64xf16>) -> tensor<4x16x64xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// attention keeps the input's type.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %seq = gpipe.input "seq" : tensor<4x16x64xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %qkv = gpipe.param "qkv" glorot_uniform : tensor<64x192xf32>
    %out = gpipe.param "out" glorot_uniform : tensor<64x64xf32>
    // expected-error @+1 {{'gpipe.attention' op expects result type 'tensor<4x16x64xf32>', got 'tensor<4x16x32xf32>'}}
    %0 = gpipe.attention %seq, %qkv, %out heads 4 causal : (tensor<4x16x64xf32>, tensor<64x192xf32>, tensor<64x64xf32>) -> tensor<4x16x32xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// dropout's rate is below 1.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    // expected-error @+1 {{'gpipe.dropout' op expects a rate in [0, 1), got 1.000000e+00}}
    %0 = gpipe.dropout %x rate 1.0 seed 0 : tensor<4x8xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// dropout's rate is not negative.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    // expected-error @+1 {{'gpipe.dropout' op expects a rate in [0, 1), got -1.000000e-01}}
    %0 = gpipe.dropout %x rate -0.1 seed 0 : tensor<4x8xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// dropout keeps the input's type.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    // expected-error @+1 {{'gpipe.dropout' op failed to verify that all of {input, result} have same type}}
    %0 = "gpipe.dropout"(%x) {rate = 0.1 : f64, seed = 0 : i64} : (tensor<4x8xf32>) -> tensor<4x8xbf16>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// softmax_cross_entropy needs logits of rank >= 1.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %y = gpipe.input "y" : tensor<4xi32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %s = gpipe.param "s" zeros : tensor<f32>
    %c = gpipe.param "c" zeros : tensor<f32>
    // expected-error @+1 {{'gpipe.softmax_cross_entropy' op expects logits of rank >= 1, got 'tensor<f32>'}}
    %0 = "gpipe.softmax_cross_entropy"(%s, %y) : (tensor<f32>, tensor<4xi32>) -> tensor<f32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// softmax_cross_entropy needs one label per logits row.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %y = gpipe.input "y" : tensor<4xi32>
  %z = gpipe.input "z" : tensor<4x2x8xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    // expected-error @+1 {{'gpipe.softmax_cross_entropy' op expects labels of the logits' shape without the class dimension, got 'tensor<4xi32>' for logits 'tensor<4x2x8xf32>'}}
    %0 = gpipe.softmax_cross_entropy %z, %y : (tensor<4x2x8xf32>, tensor<4xi32>) -> tensor<f32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// softmax_cross_entropy labels may not keep the class dimension.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %y = gpipe.input "y" : tensor<4xi32>
  %y8 = gpipe.input "y8" : tensor<4x8xi32>
  %l = gpipe.layer "l" -> tensor<f32> {
    // expected-error @+1 {{'gpipe.softmax_cross_entropy' op expects labels of the logits' shape without the class dimension, got 'tensor<4x8xi32>' for logits 'tensor<4x8xf32>'}}
    %0 = gpipe.softmax_cross_entropy %x, %y8 : (tensor<4x8xf32>, tensor<4x8xi32>) -> tensor<f32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// softmax_cross_entropy's loss has the logits' element type.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %y = gpipe.input "y" : tensor<4xi32>
  %l = gpipe.layer "l" -> tensor<f32> {
    // expected-error @+1 {{'gpipe.softmax_cross_entropy' op expects the result to have element type 'f32', got 'bf16'}}
    %0 = gpipe.softmax_cross_entropy %x, %y : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<bf16>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// softmax_cross_entropy's loss is a scalar.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %y = gpipe.input "y" : tensor<4xi32>
  %l = gpipe.layer "l" -> tensor<f32> {
    // expected-error @+1 {{'gpipe.softmax_cross_entropy' op result #0 must be 0D tensor of 32-bit float or bfloat16 type or 16-bit float values, but got 'tensor<4xf32>'}}
    %0 = gpipe.softmax_cross_entropy %x, %y : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<4xf32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// mse_loss compares a prediction with a target of its type.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %t = gpipe.input "t" : tensor<4x1xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    // expected-error @+1 {{'gpipe.mse_loss' op expects the target to have the prediction's type 'tensor<4x8xf32>', got 'tensor<4x1xf32>'}}
    %0 = gpipe.mse_loss %x, %t : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<f32>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// mse_loss's loss has the prediction's element type.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    // expected-error @+1 {{'gpipe.mse_loss' op expects the result to have element type 'f32', got 'f16'}}
    %0 = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f16>
    %loss = gpipe.mse_loss %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A schedule lists one row count per micro-batch.
// expected-error @+1 {{'gpipe.schedule' op expects 3 micro-batch row counts, got 2}}
gpipe.schedule @s model @m microbatches 3 rows [2, 2] {
  gpipe.program device 0 {
    gpipe.optimizer_step
  }
}

// -----

// An instruction's micro-batch is one of the schedule's: 2^32 is not read as
// micro-batch 0 by anything after the verifier.
gpipe.schedule @s model @m microbatches 2 rows [2, 2] {
  gpipe.program device 0 {
    gpipe.forward @stage0 mb 0 rows 2
    // expected-error @+1 {{'gpipe.forward' op names micro-batch 4294967296, but the schedule has 2 micro-batches (0 to 1)}}
    gpipe.forward @stage0 mb 4294967296 rows 2
  }
}

// -----

// Channels and peers are 32-bit indices.
gpipe.schedule @s model @m microbatches 1 rows [2] {
  gpipe.program device 0 {
    // expected-error @+1 {{'gpipe.send_activation' op expects a channel below 2^32, got 4294967296}}
    gpipe.send_activation to 1 mb 0 channel 4294967296 : tensor<2x4xf32>
  }
}

// -----

// A device index fits in 32 bits.
gpipe.schedule @s model @m microbatches 1 rows [2] {
  // expected-error @+1 {{'gpipe.program' op expects a device below 2^32, got 4294967296}}
  gpipe.program device 4294967296 {
    gpipe.optimizer_step
  }
}

// -----

// Every micro-batch has at least one row.
// expected-error @+1 {{'gpipe.schedule' op expects a positive row count for micro-batch 1, got 0}}
gpipe.schedule @s model @m microbatches 2 rows [4, 0] {
  gpipe.program device 0 {
    gpipe.optimizer_step
  }
}

// -----

// A schedule has at least one micro-batch.
// expected-error @+1 {{'gpipe.schedule' op attribute 'microbatches' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
gpipe.schedule @s model @m microbatches 0 rows [] {
}

// -----

// A program belongs to a schedule.
// expected-error @+1 {{'gpipe.program' op expects parent op 'gpipe.schedule'}}
gpipe.program device 0 {
  gpipe.optimizer_step
}

// -----

// A program's device is never negative.
gpipe.schedule @s model @m microbatches 1 rows [4] {
  // expected-error @+1 {{'gpipe.program' op attribute 'device' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  gpipe.program device -1 {
    gpipe.optimizer_step
  }
}

// -----

// Instructions sit in a program.
gpipe.schedule @s model @m microbatches 1 rows [4] {
  // expected-error @+1 {{'gpipe.forward' op expects parent op 'gpipe.program'}}
  gpipe.forward @stage0 mb 0 rows 4
}

// -----

// An instruction's row count is positive.
gpipe.schedule @s model @m microbatches 1 rows [4] {
  gpipe.program device 0 {
    // expected-error @+1 {{'gpipe.load_input' op attribute 'rows' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
    gpipe.load_input "x" mb 0 rows 0
  }
}

// -----

// A transfer carries a statically shaped tensor type.
gpipe.schedule @s model @m microbatches 1 rows [4] {
  gpipe.program device 0 {
    // expected-error @+1 {{'gpipe.send_activation' op attribute 'type' failed to satisfy constraint: type attribute of statically shaped tensor of any type values}}
    gpipe.send_activation to 1 mb 0 channel 0 : tensor<*xf32>
  }
}

// -----

// A stage's index is its position among the stages (stage s runs on device s).
gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  // expected-error @+1 {{'gpipe.stage' op expects index 0 (its position among the stages), got 1}}
  %s = gpipe.stage @stage1 index 1 (%x) : (tensor<2x3xf32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<2x3xf32>):
    %a = gpipe.layer "a" -> tensor<f32> {
      %0 = gpipe.mse_loss %arg0, %arg0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.yield %a : tensor<f32>
  }
  gpipe.return %s : tensor<f32>
}

// -----

// A stage backward names a stage of its model.
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
  // expected-error @+1 {{'gpipe.stage_backward' op refers to @stage7, which is not a stage of model @m}}
  gpipe.stage_backward @stage7 : (tensor<2x3xf32>) -> () {
  ^bb0(%arg0: tensor<2x3xf32>):
    gpipe.yield
  }
  gpipe.return %s : tensor<f32>
}

// -----

// A stage backward takes the stage's inputs (and, but for the last stage, its output gradients).
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
  // expected-error @+1 {{'gpipe.stage_backward' op expects inputs matching the inputs of @stage0, got '(tensor<2x4xf32>) -> ()'}}
  gpipe.stage_backward @stage0 : (tensor<2x4xf32>) -> () {
  ^bb0(%arg0: tensor<2x4xf32>):
    gpipe.yield
  }
  gpipe.return %s : tensor<f32>
}

// -----

// dense_grad returns gradients of the input's and the weight's types.
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
    %w = gpipe.param_ref "w" : tensor<3x5xf32>
    %dy = gpipe.zeros : tensor<2x5xf32>
    // expected-error @+1 {{'gpipe.dense_grad' op expects dw of type 'tensor<3x5xf32>', got 'tensor<5x3xf32>'}}
    %dx, %dw = gpipe.dense_grad %dy, %arg0, %w : (tensor<2x5xf32>, tensor<2x3xf32>, tensor<3x5xf32>) -> (tensor<2x3xf32>, tensor<5x3xf32>)
    gpipe.yield
  }
  gpipe.return %s : tensor<f32>
}

// -----

// dense_grad needs dy with the weight's column count.
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
    %w = gpipe.param_ref "w" : tensor<3x5xf32>
    %dy = gpipe.zeros : tensor<2x4xf32>
    // expected-error @+1 {{'gpipe.dense_grad' op expects dy with the weight's 5 columns as last dimension, got 'tensor<2x4xf32>'}}
    %dx, %dw = gpipe.dense_grad %dy, %arg0, %w : (tensor<2x4xf32>, tensor<2x3xf32>, tensor<3x5xf32>) -> (tensor<2x3xf32>, tensor<3x5xf32>)
    gpipe.yield
  }
  gpipe.return %s : tensor<f32>
}

// -----

// bias_grad reduces to the last dimension.
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
    // expected-error @+1 {{'gpipe.bias_grad' op expects db of shape [3] (the last dimension of dy), got 'tensor<2xf32>'}}
    %db = gpipe.bias_grad %arg0 : (tensor<2x3xf32>) -> tensor<2xf32>
    gpipe.yield
  }
  gpipe.return %s : tensor<f32>
}

// -----

// layer_norm_grad returns gamma's type for dgamma and dbeta.
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
    %g = gpipe.param_ref "g" : tensor<3xf32>
    // expected-error @+1 {{'gpipe.layer_norm_grad' op expects dbeta of type 'tensor<3xf32>', got 'tensor<2xf32>'}}
    %dx, %dg, %db = gpipe.layer_norm_grad %arg0, %arg0, %arg0, %g : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xf32>) -> (tensor<2x3xf32>, tensor<3xf32>, tensor<2xf32>)
    gpipe.yield
  }
  gpipe.return %s : tensor<f32>
}

// -----

// embedding_grad takes dy of the ids' shape plus the width.
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
    %ids = gpipe.param_ref "ids" : tensor<2xf32>
    %dy = gpipe.zeros : tensor<2x4xf32>
    // expected-error @+1 {{'gpipe.embedding_grad' op operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<2xf32>'}}
    %dt = gpipe.embedding_grad %dy, %ids : (tensor<2x4xf32>, tensor<2xf32>) -> tensor<9x4xf32>
    gpipe.yield
  }
  gpipe.return %s : tensor<f32>
}

// -----

// attention_grad returns gradients of its weights' types.
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
    // expected-error @+1 {{'gpipe.attention_grad' op expects dout_weight of type 'tensor<4x4xf32>', got 'tensor<4x12xf32>'}}
    %dx, %dqkv, %dwo = gpipe.attention_grad %y, %y, %y, %wqkv, %wo heads 2 : (tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<4x12xf32>, tensor<4x4xf32>) -> (tensor<1x2x4xf32>, tensor<4x12xf32>, tensor<4x12xf32>)
    gpipe.yield
  }
  gpipe.return %s : tensor<f32>
}

// -----

// softmax_cross_entropy_grad returns logits whose shape matches the labels.
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
    %loss = gpipe.param_ref "l" : tensor<f32>
    %labels = gpipe.zeros : tensor<2x3xf32>
    // expected-error @+1 {{'gpipe.softmax_cross_entropy_grad' op operand #1 must be ranked tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<2x3xf32>'}}
    %d = gpipe.softmax_cross_entropy_grad %loss, %labels : (tensor<f32>, tensor<2x3xf32>) -> tensor<2x3x5xf32>
    gpipe.yield
  }
  gpipe.return %s : tensor<f32>
}

// -----

// A tied parameter copies one declared before it, alike, in another layer.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %h = gpipe.layer "fc1" -> tensor<4x8xf32> {
    %w = gpipe.param "w" glorot_uniform : tensor<8x8xf32>
    %0 = gpipe.dense %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    gpipe.yield %0 : tensor<4x8xf32>
  }
  %l = gpipe.layer "fc2" -> tensor<f32> {
    // expected-error @+1 {{'gpipe.param' op is tied to 'w', declared otherwise; a tied parameter has the type, initializer, scale and frozen of the one it copies ('tensor<8x8xf32>' glorot_uniform)}}
    %w = gpipe.param "w@fc2" zeros tied "w" : tensor<8x8xf32>
    %0 = gpipe.dense %h, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %1 = gpipe.mse_loss %0, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "fc" -> tensor<f32> {
    // expected-error @+1 {{'gpipe.param' op is tied to 'later', which is not a parameter declared before it}}
    %w = gpipe.param "w" zeros tied "later" : tensor<8x8xf32>
    %0 = gpipe.dense %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %1 = gpipe.mse_loss %0, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %l = gpipe.layer "fc" -> tensor<f32> {
    %v = gpipe.param "v" zeros : tensor<8x8xf32>
    // expected-error @+1 {{'gpipe.param' op is tied to 'v' of the same layer; read that one}}
    %w = gpipe.param "w" zeros tied "v" : tensor<8x8xf32>
    %0 = gpipe.dense %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %1 = gpipe.mse_loss %0, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %a = gpipe.layer "a" -> tensor<4x8xf32> {
    %w = gpipe.param "w" zeros : tensor<8x8xf32>
    %0 = gpipe.dense %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    gpipe.yield %0 : tensor<4x8xf32>
  }
  %b = gpipe.layer "b" -> tensor<4x8xf32> {
    %w = gpipe.param "w@b" zeros tied "w" : tensor<8x8xf32>
    %0 = gpipe.dense %a, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    gpipe.yield %0 : tensor<4x8xf32>
  }
  %l = gpipe.layer "c" -> tensor<f32> {
    // expected-error @+1 {{'gpipe.param' op is tied to 'w@b', itself tied to 'w'; tie it to 'w'}}
    %w = gpipe.param "w@c" zeros tied "w@b" : tensor<8x8xf32>
    %0 = gpipe.dense %b, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %1 = gpipe.mse_loss %0, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
