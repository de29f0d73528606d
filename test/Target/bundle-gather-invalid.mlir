// A gather that a micro-batch cannot compute on its own rows is refused at
// the bundle emission, with what to do instead.
// RUN: split-file %s %t
// RUN: gpipe-opt %t/unbatched-ids.mlir -gpipe-compile="num-microbatches=2" | not gpipe-translate --gpipe-to-bundle 2>&1 | FileCheck %s --check-prefix=IDS
// RUN: gpipe-opt %t/batched-param.mlir -gpipe-compile="num-microbatches=2" | not gpipe-translate --gpipe-to-bundle 2>&1 | FileCheck %s --check-prefix=PARAM
// RUN: gpipe-opt %t/batch-axis.mlir -gpipe-compile="num-microbatches=2" | not gpipe-translate --gpipe-to-bundle 2>&1 | FileCheck %s --check-prefix=AXIS

// Per-example indices into a table without `batched`: the batch would land
// in the result's axis.
// IDS: error: 'gpipe.gather' op reads per-example indices without `batched`: the batch would land in dimension 0 of the result; gather from a per-example value with `batched`, or look up a table's rows with gpipe.embedding
// PARAM: error: 'gpipe.gather' op is batched, which pairs per-example indices with a per-example value, but its input is not per example (a parameter, or a value computed from parameters alone)
// AXIS: error: 'gpipe.gather' op gathers along the batch (axis 0) of a per-example value: each micro-batch holds its own rows; gather along another axis

//--- unbatched-ids.mlir
gpipe.model @m batch 2 {
  %ids = gpipe.input "ids" : tensor<2xi32>
  %t = gpipe.input "t" : tensor<2x4xf32>
  %y = gpipe.layer "l" -> tensor<2x4xf32> {
    %w = gpipe.param "w" normal : tensor<8x4xf32>
    %0 = gpipe.gather %w[%ids] axis 0 : tensor<8x4xf32>, tensor<2xi32> -> tensor<2x4xf32>
    gpipe.yield %0 : tensor<2x4xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %t : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

//--- batched-param.mlir
gpipe.model @m batch 2 {
  %ids = gpipe.input "ids" : tensor<2x3xi32>
  %t = gpipe.input "t" : tensor<2x3xf32>
  %y = gpipe.layer "l" -> tensor<2x3xf32> {
    %w = gpipe.param "w" normal : tensor<2x8xf32>
    %0 = gpipe.gather %w[%ids] axis 1 batched : tensor<2x8xf32>, tensor<2x3xi32> -> tensor<2x3xf32>
    gpipe.yield %0 : tensor<2x3xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %t : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

//--- batch-axis.mlir
gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x4xf32>
  %y = gpipe.layer "l" -> tensor<2x4xf32> {
    %p = gpipe.param "p" zeros frozen : tensor<2xf32>
    %i = gpipe.cast %p : tensor<2xf32> -> tensor<2xi32>
    %0 = gpipe.gather %x[%i] axis 0 : tensor<2x4xf32>, tensor<2xi32> -> tensor<2x4xf32>
    gpipe.yield %0 : tensor<2x4xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
