// What a generated kernel cannot compute on a micro-batch is refused at the
// bundle emission, with what to do instead.
// RUN: split-file %s %t
// RUN: gpipe-opt %t/param.mlir -gpipe-compile="num-microbatches=2" | not gpipe-translate --gpipe-to-bundle 2>&1 | FileCheck %s --check-prefix=PARAM
// RUN: gpipe-opt %t/batch-mean.mlir -gpipe-compile="num-microbatches=2" | not gpipe-translate --gpipe-to-bundle 2>&1 | FileCheck %s --check-prefix=MEAN
// RUN: gpipe-opt %t/batch-transpose.mlir -gpipe-compile="num-microbatches=2" | not gpipe-translate --gpipe-to-bundle 2>&1 | FileCheck %s --check-prefix=MOVE
// RUN: gpipe-opt %t/batch-sum-to.mlir -gpipe-compile="num-microbatches=2" | not gpipe-translate --gpipe-to-bundle 2>&1 | FileCheck %s --check-prefix=SUMTO
// RUN: gpipe-opt %t/batch-slice.mlir -gpipe-compile="num-microbatches=2" | not gpipe-translate --gpipe-to-bundle 2>&1 | FileCheck %s --check-prefix=SLICE
// RUN: gpipe-opt %t/wide-concat.mlir -gpipe-compile="num-microbatches=2" | not gpipe-translate --gpipe-to-bundle 2>&1 | FileCheck %s --check-prefix=WIDE
// RUN: gpipe-opt %t/batch-concat.mlir -gpipe-compile="num-microbatches=2" | not gpipe-translate --gpipe-to-bundle 2>&1 | FileCheck %s --check-prefix=CONCAT

// A parameter shaped like the batch has all of the batch's rows, while each
// micro-batch's activations have only its own.
// PARAM: error: 'gpipe.mul' op reads 'tensor<2x3xf32>', which is not per example (a parameter, or a value computed from parameters alone) but spans the batch dimension of its per-example result: each micro-batch has its own rows of the one and all rows of the other; give it size 1 (or drop) in dimension 0 to broadcast it

// A statistic over the batch would be each micro-batch's own.
// MEAN: error: 'gpipe.reduce_mean' op reduces over the batch (axis 0), which would mix each micro-batch's examples apart from the others'; reduce over the other axes
// MOVE: error: 'gpipe.transpose' op moves the batch away from dimension 0 of a per-example value; keep dimension 0 as it is (reshape and permute the others)
// SUMTO: error: 'gpipe.sum_to' op sums over the batch (axis 0), which would mix each micro-batch's examples apart from the others'
// A micro-batch holds rows of its own: the batch is neither sliced nor
// concatenated.
// SLICE: error: 'gpipe.slice' op slices the batch (dimension 0) of a per-example value: each micro-batch holds its own rows; keep dimension 0 whole (start 0, step 1) and slice the others
// A kernel takes at most 16 inputs.
// WIDE: error: {{.*}}'concat' cannot be a generated kernel: concatenates more than 16 inputs
// CONCAT: error: 'gpipe.concat' op concatenates per-example values along the batch (axis 0): each micro-batch holds its own rows; concatenate along another axis

//--- param.mlir
gpipe.model @mixed batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %y = gpipe.layer "l" -> tensor<2x3xf32> {
    %p = gpipe.param "p" normal : tensor<2x3xf32>
    %0 = gpipe.mul %x, %p : tensor<2x3xf32>
    gpipe.yield %0 : tensor<2x3xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

//--- batch-mean.mlir
gpipe.model @mean batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %y = gpipe.layer "l" -> tensor<2x3xf32> {
    %m = gpipe.reduce_mean %x axes [0] : tensor<2x3xf32> -> tensor<1x3xf32>
    %0 = gpipe.sub %x, %m : tensor<2x3xf32>, tensor<1x3xf32> -> tensor<2x3xf32>
    gpipe.yield %0 : tensor<2x3xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

//--- batch-sum-to.mlir
gpipe.model @sum batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %y = gpipe.layer "l" -> tensor<2x3xf32> {
    %s = gpipe.sum_to %x : tensor<2x3xf32> -> tensor<3xf32>
    %0 = gpipe.sub %x, %s : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
    gpipe.yield %0 : tensor<2x3xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

//--- batch-transpose.mlir
gpipe.model @move batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %y = gpipe.layer "l" -> tensor<2x3xf32> {
    %t = gpipe.transpose %x perm [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
    %0 = gpipe.transpose %t perm [1, 0] : tensor<3x2xf32> -> tensor<2x3xf32>
    gpipe.yield %0 : tensor<2x3xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

//--- batch-slice.mlir
gpipe.model @slice batch 4 {
  %x = gpipe.input "x" : tensor<4x3xf32>
  %y = gpipe.layer "l" -> tensor<4x3xf32> {
    %0 = gpipe.slice %x starts [0, 0] steps [2, 1] : tensor<4x3xf32> -> tensor<2x3xf32>
    %1 = gpipe.reduce_mean %0 axes [0] : tensor<2x3xf32> -> tensor<1x3xf32>
    %2 = gpipe.add %x, %1 : tensor<4x3xf32>, tensor<1x3xf32> -> tensor<4x3xf32>
    gpipe.yield %2 : tensor<4x3xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

//--- batch-concat.mlir
gpipe.model @concat batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %y = gpipe.layer "l" -> tensor<2x3xf32> {
    %0 = gpipe.concat %x, %x axis 0 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<4x3xf32>
    %1 = gpipe.reduce_mean %0 axes [0] : tensor<4x3xf32> -> tensor<1x3xf32>
    %2 = gpipe.add %x, %1 : tensor<2x3xf32>, tensor<1x3xf32> -> tensor<2x3xf32>
    gpipe.yield %2 : tensor<2x3xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

//--- wide-concat.mlir
gpipe.model @wide batch 2 {
  %x = gpipe.input "x" : tensor<2x1xf32>
  %t = gpipe.input "t" : tensor<2x17xf32>
  %y = gpipe.layer "l" -> tensor<2x17xf32> {
    %0 = gpipe.concat %x, %x, %x, %x, %x, %x, %x, %x, %x, %x, %x, %x, %x, %x, %x, %x, %x axis 1 : tensor<2x1xf32>, tensor<2x1xf32>, tensor<2x1xf32>, tensor<2x1xf32>, tensor<2x1xf32>, tensor<2x1xf32>, tensor<2x1xf32>, tensor<2x1xf32>, tensor<2x1xf32>, tensor<2x1xf32>, tensor<2x1xf32>, tensor<2x1xf32>, tensor<2x1xf32>, tensor<2x1xf32>, tensor<2x1xf32>, tensor<2x1xf32>, tensor<2x1xf32> -> tensor<2x17xf32>
    gpipe.yield %0 : tensor<2x17xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %t : (tensor<2x17xf32>, tensor<2x17xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
