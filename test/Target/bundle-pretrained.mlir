// A pretrained parameter keeps its init in the bundle, and the model's gpipe.weights (kept by every pass of
// gpipe-compile) becomes the bundle's "weights": a relative path is resolved against the directory of the compiled
// .mlir file (also when the input is split into chunks) and written absolute; read from stdin, the path is written
// as it is.
// RUN: rm -rf %t.d && mkdir -p %t.d
// RUN: gpipe-opt %s -gpipe-compile="num-stages=2 num-microbatches=2" -o %t.d/compiled.mlir
// RUN: FileCheck %s --check-prefix=IR < %t.d/compiled.mlir
// RUN: gpipe-translate --gpipe-to-bundle %t.d/compiled.mlir | FileCheck %s -DDIR=%t.d
// RUN: gpipe-translate --gpipe-to-bundle --split-input-file %t.d/compiled.mlir | FileCheck %s -DDIR=%t.d
// RUN: gpipe-translate --gpipe-to-bundle < %t.d/compiled.mlir | FileCheck %s --check-prefix=STDIN

// IR: gpipe.model @pretrained batch 4 attributes {{{.*}}gpipe.weights = "weights/tiny.safetensors"{{.*}}} {

// CHECK: "params": [
// CHECK: "init": "pretrained",
// CHECK-NEXT: "name": "w",
// CHECK-NEXT: "scale": 1,
// CHECK-NEXT: "shape": [
// CHECK-NEXT: 3,
// CHECK-NEXT: 5
// CHECK: "init": "glorot_uniform",
// CHECK-NEXT: "name": "w2",
// CHECK: "weights": "[[DIR]]/weights/tiny.safetensors"

// STDIN: "weights": "weights/tiny.safetensors"

gpipe.model @pretrained batch 4 attributes {gpipe.weights = "weights/tiny.safetensors"} {
  %x = gpipe.input "x" : tensor<4x3xf32>
  %y = gpipe.input "y" : tensor<4xi32>
  %h = gpipe.layer "fc" -> tensor<4x5xf32> {
    %w = gpipe.param "w" pretrained : tensor<3x5xf32>
    %0 = gpipe.dense %x, %w : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
    %1 = gpipe.relu %0 : tensor<4x5xf32>
    gpipe.yield %1 : tensor<4x5xf32>
  }
  %h2 = gpipe.layer "fc2" -> tensor<4x2xf32> {
    %w = gpipe.param "w2" glorot_uniform : tensor<5x2xf32>
    %0 = gpipe.dense %h, %w : (tensor<4x5xf32>, tensor<5x2xf32>) -> tensor<4x2xf32>
    gpipe.yield %0 : tensor<4x2xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.softmax_cross_entropy %h2, %y : (tensor<4x2xf32>, tensor<4xi32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
