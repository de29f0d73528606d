// gpipe-set-batch rewrites the batch and every per-example value's leading dimension, by dataflow: a parameter whose first dimension equals the old batch and the scalar loss keep their shapes.
// RUN: gpipe-opt %s -split-input-file -gpipe-set-batch="batch=6" | FileCheck %s

// CHECK-LABEL: gpipe.model @mlp batch 6
// CHECK: gpipe.input "x" : tensor<6x3xf32>
// CHECK: gpipe.input "labels" : tensor<6xi32>
// CHECK: gpipe.layer "fc" -> tensor<6x4xf32>
// CHECK: gpipe.param "fc.w" glorot_uniform : tensor<3x4xf32>
// CHECK: gpipe.dense %{{.*}} : (tensor<6x3xf32>, tensor<3x4xf32>) -> tensor<6x4xf32>
// CHECK: gpipe.relu %{{.*}} : tensor<6x4xf32>
// CHECK: gpipe.layer "loss" -> tensor<f32>
// CHECK: gpipe.softmax_cross_entropy %{{.*}} : (tensor<6x4xf32>, tensor<6xi32>) -> tensor<f32>
gpipe.model @mlp batch 3 {
  %x = gpipe.input "x" : tensor<3x3xf32>
  %y = gpipe.input "labels" : tensor<3xi32>
  %h = gpipe.layer "fc" -> tensor<3x4xf32> {
    %w = gpipe.param "fc.w" glorot_uniform : tensor<3x4xf32>
    %0 = gpipe.dense %x, %w : (tensor<3x3xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
    %1 = gpipe.relu %0 : tensor<3x4xf32>
    gpipe.yield %1 : tensor<3x4xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.softmax_cross_entropy %h, %y : (tensor<3x4xf32>, tensor<3xi32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A position table as long as the old batch stays as it is; the sequences grow in number, not in length.
// CHECK-LABEL: gpipe.model @tokens batch 6
// CHECK: gpipe.input "ids" : tensor<6x4xi32>
// CHECK: gpipe.param "pos" normal : tensor<4x8xf32>
// CHECK: gpipe.embedding %{{.*}} : (tensor<6x4xi32>, tensor<4x8xf32>) -> tensor<6x4x8xf32>
gpipe.model @tokens batch 4 {
  %ids = gpipe.input "ids" : tensor<4x4xi32>
  %t = gpipe.input "target" : tensor<4x4x8xf32>
  %h = gpipe.layer "embed" -> tensor<4x4x8xf32> {
    %p = gpipe.param "pos" normal : tensor<4x8xf32>
    %0 = gpipe.embedding %ids, %p : (tensor<4x4xi32>, tensor<4x8xf32>) -> tensor<4x4x8xf32>
    gpipe.yield %0 : tensor<4x4x8xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %h, %t : (tensor<4x4x8xf32>, tensor<4x4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
