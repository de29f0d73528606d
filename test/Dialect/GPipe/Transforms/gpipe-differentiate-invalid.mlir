// gpipe-differentiate needs stages, runs once, and refuses what it cannot differentiate.
// RUN: gpipe-opt %s -split-input-file -allow-unregistered-dialect -gpipe-differentiate -verify-diagnostics

// Layers must be grouped into stages first.
// expected-error @+1 {{'gpipe.model' op has no stages; run gpipe-form-stages first}}
gpipe.model @layers batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %a = gpipe.layer "a" -> tensor<f32> {
    %0 = gpipe.mse_loss %x, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %a : tensor<f32>
}

// -----

// An op without a gradient stops the pass.
gpipe.model @foreign batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %s = gpipe.stage @stage0 index 0 (%x) : (tensor<2x3xf32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<2x3xf32>):
    %a = gpipe.layer "a" -> tensor<f32> {
      // expected-error @+1 {{'foreign.op' op has no gradient}}
      %0 = "foreign.op"(%arg0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
      %1 = gpipe.mse_loss %0, %arg0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
      gpipe.yield %1 : tensor<f32>
    }
    gpipe.yield %a : tensor<f32>
  }
  gpipe.return %s : tensor<f32>
}

// -----

// The target of mse_loss gets no gradient, so it must be data (a model input), not a computed value.
gpipe.model @target batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %s = gpipe.stage @stage0 index 0 (%x) : (tensor<2x3xf32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<2x3xf32>):
    %a = gpipe.layer "a" -> tensor<f32> {
      %0 = gpipe.relu %arg0 : tensor<2x3xf32>
      // expected-error @+1 {{'gpipe.mse_loss' op has a target that is not a model input; gradients flow only into the prediction of mse_loss}}
      %1 = gpipe.mse_loss %arg0, %0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
      gpipe.yield %1 : tensor<f32>
    }
    gpipe.yield %a : tensor<f32>
  }
  gpipe.return %s : tensor<f32>
}

// -----

// Differentiation runs once.
// expected-error @+1 {{'gpipe.model' op is already differentiated}}
gpipe.model @twice batch 2 {
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
    gpipe.yield
  }
  gpipe.return %s : tensor<f32>
}
