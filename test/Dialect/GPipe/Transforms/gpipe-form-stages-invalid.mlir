// gpipe-form-stages rejects layers without a valid cell assignment and boundary values that cannot be split into micro-batches.
// RUN: gpipe-opt %s -split-input-file -gpipe-form-stages -verify-diagnostics

// A layer without a cell.
gpipe.model @nocell batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  // expected-error @+1 {{'gpipe.layer' op has no cell; run gpipe-partition or write 'cell'}}
  %a = gpipe.layer "a" -> tensor<f32> {
    %0 = gpipe.mse_loss %x, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %a : tensor<f32>
}

// -----

// Cells must start at 0.
gpipe.model @start batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  // expected-error @+1 {{'gpipe.layer' op is in cell 1 but cells must be consecutive from 0 in layer order; expected cell 0}}
  %a = gpipe.layer "a" -> tensor<f32> attributes {cell = 1 : i64} {
    %0 = gpipe.mse_loss %x, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %a : tensor<f32>
}

// -----

// A cell may not be skipped.
gpipe.model @gap batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %a = gpipe.layer "a" -> tensor<2x3xf32> attributes {cell = 0 : i64} {
    %0 = gpipe.relu %x : tensor<2x3xf32>
    gpipe.yield %0 : tensor<2x3xf32>
  }
  // expected-error @+1 {{'gpipe.layer' op is in cell 2 but cells must be consecutive from 0 in layer order; expected cell 0 or 1}}
  %b = gpipe.layer "b" -> tensor<f32> attributes {cell = 2 : i64} {
    %0 = gpipe.mse_loss %a, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %b : tensor<f32>
}

// -----

// A cell may not come back after a later one.
gpipe.model @back batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %a = gpipe.layer "a" -> tensor<2x3xf32> attributes {cell = 0 : i64} {
    %0 = gpipe.relu %x : tensor<2x3xf32>
    gpipe.yield %0 : tensor<2x3xf32>
  }
  %b = gpipe.layer "b" -> tensor<2x3xf32> attributes {cell = 1 : i64} {
    %0 = gpipe.relu %a : tensor<2x3xf32>
    gpipe.yield %0 : tensor<2x3xf32>
  }
  // expected-error @+1 {{'gpipe.layer' op is in cell 0 but cells must be consecutive from 0 in layer order; expected cell 1 or 2}}
  %c = gpipe.layer "c" -> tensor<f32> attributes {cell = 0 : i64} {
    %0 = gpipe.mse_loss %b, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %c : tensor<f32>
}

// -----

// A value crossing a stage boundary must have the batch as leading dimension, or it could not be split into micro-batches.
gpipe.model @nobatch batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  // expected-error @+1 {{'gpipe.layer' op result #0 crosses from stage 0 to stage 1 and must have the batch size 2 as leading dimension, got 'tensor<3xf32>'}}
  %a = gpipe.layer "a" -> tensor<3xf32> attributes {cell = 0 : i64} {
    %w = gpipe.param "w" zeros : tensor<3xf32>
    %0 = gpipe.relu %w : tensor<3xf32>
    gpipe.yield %0 : tensor<3xf32>
  }
  %b = gpipe.layer "b" -> tensor<f32> attributes {cell = 1 : i64} {
    %0 = gpipe.mse_loss %a, %a : (tensor<3xf32>, tensor<3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %b : tensor<f32>
}

// -----

// Stages are formed once.
gpipe.model @twice batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  // expected-error @+1 {{'gpipe.stage' op cannot be grouped into stages; expected only gpipe.input, gpipe.layer and gpipe.return in the model}}
  %s = gpipe.stage @stage0 index 0 (%x) : (tensor<2x3xf32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<2x3xf32>):
    %a = gpipe.layer "a" -> tensor<f32> attributes {cell = 0 : i64} {
      %0 = gpipe.mse_loss %arg0, %arg0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.yield %a : tensor<f32>
  }
  gpipe.return %s : tensor<f32>
}

// -----

// An i1 mask cannot cross a stage boundary: stages exchange floats, which
// have gradients to send back (gpipe-partition never cuts there).
gpipe.model @mask batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  // expected-error @+1 {{'gpipe.layer' op result #0 'tensor<2x3xi1>' crosses from stage 0 to stage 1, but stages exchange floating-point tensors only; compute it in the stage that reads it (gpipe-partition never cuts there)}}
  %m = gpipe.layer "mask" -> tensor<2x3xi1> attributes {cell = 0 : i64} {
    %0 = gpipe.gt %x, %x : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xi1>
    gpipe.yield %0 : tensor<2x3xi1>
  }
  %a = gpipe.layer "a" -> tensor<f32> attributes {cell = 1 : i64} {
    %0 = gpipe.where %m, %x, %x : tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
    %1 = gpipe.mse_loss %0, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %a : tensor<f32>
}
