// gpipe-compile stops at the first pass that cannot meet the request, with its message and a non-zero exit.
// RUN: not gpipe-opt %s -gpipe-compile="num-stages=2 num-microbatches=7" 2>&1 | FileCheck %s --check-prefix=TOOMANY
// RUN: not gpipe-opt %s -gpipe-compile="num-stages=4" 2>&1 | FileCheck %s --check-prefix=STAGES
// RUN: not gpipe-opt %s -gpipe-compile="num-stages=2 memory-cap=64B" 2>&1 | FileCheck %s --check-prefix=CAP

// Too many micro-batches for the batch of 6, more stages than the 3 layers, and a cap smaller than the first layer.
// TOOMANY: error: 'gpipe.model' op cannot be scheduled: cannot split a batch of 6 rows into 7 micro-batches: expected at most 6 micro-batches
// STAGES: error: 'gpipe.model' op cannot be partitioned: cannot split 3 layers into 4 cells: expected at most 3 cells
// CAP: error: 'gpipe.model' op cannot be partitioned: layer 'fc1' (#0) needs {{[0-9]+}} bytes on its own, more than the memory cap of 64 bytes
gpipe.model @two batch 6 {
  %x = gpipe.input "x" : tensor<6x4xf32>
  %y = gpipe.input "y" : tensor<6x4xf32>
  %h = gpipe.layer "fc1" -> tensor<6x4xf32> {
    %w = gpipe.param "fc1.w" glorot_uniform : tensor<4x4xf32>
    %0 = gpipe.dense %x, %w : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
    gpipe.yield %0 : tensor<6x4xf32>
  }
  %o = gpipe.layer "fc2" -> tensor<6x4xf32> {
    %w = gpipe.param "fc2.w" glorot_uniform : tensor<4x4xf32>
    %0 = gpipe.dense %h, %w : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
    gpipe.yield %0 : tensor<6x4xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %o, %y : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
