// A pretrained parameter takes its values from the weights file that the model names in gpipe.weights; both parse,
// print and round-trip (the attribute also through the generic form).
// RUN: gpipe-opt %s --verify-roundtrip | FileCheck %s
// RUN: gpipe-opt %s --mlir-print-op-generic | gpipe-opt | FileCheck %s

// CHECK-LABEL: gpipe.model @m batch 8 attributes {gpipe.weights = "m.safetensors"} {
// CHECK:         gpipe.param "fc1.w" pretrained : tensor<16x4xf32>
// CHECK:         gpipe.param "fc1.b" zeros : tensor<4xf32>
gpipe.model @m batch 8 attributes {gpipe.weights = "m.safetensors"} {
  %x = gpipe.input "x" : tensor<8x16xf32>
  %y = gpipe.input "y" : tensor<8xi32>
  %h = gpipe.layer "fc1" -> tensor<8x4xf32> {
    %w = gpipe.param "fc1.w" pretrained : tensor<16x4xf32>
    %b = gpipe.param "fc1.b" zeros : tensor<4xf32>
    %0 = gpipe.dense %x, %w, %b : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
    gpipe.yield %0 : tensor<8x4xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.softmax_cross_entropy %h, %y : (tensor<8x4xf32>, tensor<8xi32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
