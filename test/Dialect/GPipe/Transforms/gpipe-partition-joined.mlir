// gpipe-partition never cuts where a value of no float type (an i1 mask, i32
// indices) would cross: stages exchange floats. The mask made by the first
// layer and read by the fourth keeps them in one cell, though the balanced
// cut of the two dense layers falls between them; with more cells than the
// places left to cut it fails and says why.
// RUN: gpipe-opt %s -gpipe-estimate-cost -gpipe-partition="num-stages=2" | FileCheck %s
// RUN: not gpipe-opt %s -gpipe-estimate-cost -gpipe-partition="num-stages=3" 2>&1 | FileCheck %s --check-prefix=TOO-MANY

// CHECK: gpipe.layer "mask" {{.*}}cell = 0
// CHECK: gpipe.layer "h1" {{.*}}cell = 0
// CHECK: gpipe.layer "h2" {{.*}}cell = 0
// CHECK: gpipe.layer "select" {{.*}}cell = 0
// CHECK: gpipe.layer "loss" {{.*}}cell = 1

// TOO-MANY: error: 'gpipe.model' op cannot be partitioned: cannot split 5 layers into 3 cells: only 1 place between them may be cut, the others are crossed by values that no stage boundary carries (layer 'mask' result #0 tensor<4x64xi1> is read by layer 'select'); expected at most 2 cells, or such values computed in the layers that read them
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x64xf32>
  %y = gpipe.input "y" : tensor<4x64xf32>
  %m = gpipe.layer "mask" -> tensor<4x64xi1> {
    %p = gpipe.param "p" normal : tensor<64xf32>
    %0 = gpipe.gt %x, %p : tensor<4x64xf32>, tensor<64xf32> -> tensor<4x64xi1>
    gpipe.yield %0 : tensor<4x64xi1>
  }
  %h1 = gpipe.layer "h1" -> tensor<4x64xf32> {
    %w = gpipe.param "w1" normal : tensor<64x64xf32>
    %0 = gpipe.dense %x, %w : (tensor<4x64xf32>, tensor<64x64xf32>) -> tensor<4x64xf32>
    gpipe.yield %0 : tensor<4x64xf32>
  }
  %h2 = gpipe.layer "h2" -> tensor<4x64xf32> {
    %w = gpipe.param "w2" normal : tensor<64x64xf32>
    %0 = gpipe.dense %h1, %w : (tensor<4x64xf32>, tensor<64x64xf32>) -> tensor<4x64xf32>
    gpipe.yield %0 : tensor<4x64xf32>
  }
  %z = gpipe.layer "select" -> tensor<4x64xf32> {
    %0 = gpipe.where %m, %h2, %x : tensor<4x64xi1>, tensor<4x64xf32>, tensor<4x64xf32> -> tensor<4x64xf32>
    gpipe.yield %0 : tensor<4x64xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %z, %y : (tensor<4x64xf32>, tensor<4x64xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
