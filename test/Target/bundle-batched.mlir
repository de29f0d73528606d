// A value computed only from parameters is not batched even when its first dimension equals the batch size (here 12), and neither is its gradient.
// RUN: gpipe-opt %s -gpipe-compile | gpipe-translate --gpipe-to-bundle | FileCheck %s

// Values of stage 0: x, t (inputs, batched), w (param), tanh(w) (not batched), dense (batched), loss (scalar).
// CHECK: "values": [
// CHECK-NEXT: {
// CHECK-NEXT: "batched": true,
// CHECK-NEXT: "shape": [
// CHECK-NEXT: 12,
// CHECK-NEXT: 12
// CHECK: "batched": true,
// CHECK-NEXT: "shape": [
// CHECK-NEXT: 12,
// CHECK-NEXT: 16
// CHECK: "batched": false,
// CHECK-NEXT: "shape": [
// CHECK-NEXT: 12,
// CHECK-NEXT: 16
// CHECK: "batched": false,
// CHECK-NEXT: "shape": [
// CHECK-NEXT: 12,
// CHECK-NEXT: 16
// CHECK: "batched": true,
// CHECK-NEXT: "shape": [
// CHECK-NEXT: 12,
// CHECK-NEXT: 16
gpipe.model @wt batch 12 {
  %x = gpipe.input "x" : tensor<12x12xf32>
  %t = gpipe.input "t" : tensor<12x16xf32>
  %h = gpipe.layer "fc" -> tensor<f32> {
    %w = gpipe.param "w" glorot_uniform : tensor<12x16xf32>
    %wt = gpipe.tanh %w : tensor<12x16xf32>
    %0 = gpipe.dense %x, %wt : (tensor<12x12xf32>, tensor<12x16xf32>) -> tensor<12x16xf32>
    %1 = gpipe.mse_loss %0, %t : (tensor<12x16xf32>, tensor<12x16xf32>) -> tensor<f32>
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %h : tensor<f32>
}
