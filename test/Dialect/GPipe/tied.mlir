// A parameter `tied` to an earlier one is its copy in another layer: it
// round-trips, compiles at K = 1 and 2, and the bundle marks the copy with
// the parameter it copies.
// RUN: gpipe-opt %s --verify-roundtrip | FileCheck %s
// RUN: gpipe-opt %s -gpipe-compile="num-stages=2 num-microbatches=2" | gpipe-translate --gpipe-to-bundle | FileCheck %s --check-prefix=BUNDLE
// RUN: gpipe-opt %s -gpipe-compile="num-stages=1 num-microbatches=2" | gpipe-translate --gpipe-to-bundle | FileCheck %s --check-prefix=BUNDLE

// CHECK: gpipe.param "emb" normal scale 2.000000e-02 : tensor<16x8xf32>
// CHECK: gpipe.param "emb@head" normal scale 2.000000e-02 tied "emb" : tensor<16x8xf32>
// BUNDLE: "name": "emb@head"
// BUNDLE: "tied": "emb"

gpipe.model @tied batch 4 {
  %ids = gpipe.input "ids" : tensor<4x6xi32>
  %y = gpipe.input "y" : tensor<4x6xi32>
  %h = gpipe.layer "embed" -> tensor<4x6x8xf32> {
    %e = gpipe.param "emb" normal scale 0.02 : tensor<16x8xf32>
    %0 = gpipe.embedding %ids, %e : (tensor<4x6xi32>, tensor<16x8xf32>) -> tensor<4x6x8xf32>
    gpipe.yield %0 : tensor<4x6x8xf32>
  }
  %g = gpipe.layer "mid" -> tensor<4x6x8xf32> {
    %0 = gpipe.tanh %h : tensor<4x6x8xf32>
    gpipe.yield %0 : tensor<4x6x8xf32>
  }
  %logits = gpipe.layer "head" -> tensor<4x6x16xf32> {
    %e = gpipe.param "emb@head" normal scale 0.02 tied "emb" : tensor<16x8xf32>
    %0 = gpipe.matmul %g, %e transpose_rhs : (tensor<4x6x8xf32>, tensor<16x8xf32>) -> tensor<4x6x16xf32>
    gpipe.yield %0 : tensor<4x6x16xf32>
  }
  %loss = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.softmax_cross_entropy %logits, %y : (tensor<4x6x16xf32>, tensor<4x6xi32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %loss : tensor<f32>
}
