// gpipe-translate --gpipe-to-bundle writes a compiled model as the JSON bundle of docs/BundleFormat.md: flattened forward ops over numbered values, the recompute prefix sharing the forward's ids, gradient ops after them, and the per-device programs.
// RUN: gpipe-opt %s -gpipe-compile="num-stages=2 num-microbatches=2" | gpipe-translate --gpipe-to-bundle | FileCheck %s

// CHECK: "batch": 4,
// CHECK: "format": "gpipe-bundle",
// CHECK: "inputs": [
// CHECK: "name": "x",
// CHECK: "type": "f32"
// CHECK: "name": "y",
// CHECK: "type": "i32"
// CHECK: "microbatch_rows": [
// CHECK-NEXT: 2,
// CHECK-NEXT: 2
// CHECK: "model": "tiny",
// CHECK: "params": [
// CHECK: "init": "glorot_uniform",
// CHECK-NEXT: "name": "w",
// CHECK-NEXT: "scale": 1,
// CHECK-NEXT: "shape": [
// CHECK-NEXT: 3,
// CHECK-NEXT: 5
// CHECK: "stage": 0
// CHECK: "programs": [
// CHECK: "op": "load_input"
// CHECK: "op": "forward",
// CHECK-NEXT: "stage": 0
// CHECK: "op": "send_activation",
// CHECK: "op": "optimizer_step"
// CHECK: "remat": "full",

// Stage 0: values 0 (x), 1 (w), 2 (dense), 3 (relu); the backward gets 4 (output gradient), 5 (relu_grad), 6, 7 (dense_grad dx, dw).
// Nothing reads dx (6), the gradient of the model's input x: it is written -1, not computed.
// CHECK: "stages": [
// CHECK: "backward": [
// CHECK: "op": "relu_grad",
// CHECK-NEXT: "operands": [
// CHECK-NEXT: 4,
// CHECK-NEXT: 2
// CHECK: "op": "dense_grad",
// CHECK-NEXT: "operands": [
// CHECK-NEXT: 5,
// CHECK-NEXT: 0,
// CHECK-NEXT: 1
// CHECK-NEXT: ],
// CHECK-NEXT: "results": [
// CHECK-NEXT: -1,
// CHECK-NEXT: 7
// CHECK: "name": "w",
// CHECK-NEXT: "op": "accumulate_grad",
// The forward: params first; the dense op and the relu that reads its result run as one kernel (OpTable.h's fusions).
// CHECK: "forward": [
// CHECK: "name": "w",
// CHECK-NEXT: "op": "param",
// CHECK: "fuse": "dense_activation",
// CHECK-NEXT: "op": "dense",
// CHECK: "op": "relu",
// CHECK-NOT: "fuse"
// CHECK: "input_grads": [],
// CHECK: "inputs": [
// CHECK: "input": "x",
// CHECK-NEXT: "value": 0
// CHECK: "loss": -1,
// CHECK: "output_grads": [
// CHECK-NEXT: 4
// CHECK: "outputs": [
// CHECK-NEXT: 3
// CHECK: "recompute": [
// CHECK: "op": "param",
// CHECK: "values": [
// CHECK: "batched": true,
// CHECK-NEXT: "shape": [
// CHECK-NEXT: 4,
// CHECK-NEXT: 3
// CHECK: "batched": false,
// CHECK-NEXT: "shape": [
// CHECK-NEXT: 3,
// CHECK-NEXT: 5

// Stage 1 receives channel 0 and computes the loss.
// CHECK: "channel": 0,
// CHECK-NEXT: "value": 0
// CHECK: "input": "y",
// CHECK: "loss": {{[0-9]+}},

// Format version 2, sealed by its checksum as the last member.
// CHECK: "version": 2,
// CHECK-NEXT: "checksum": "crc32:{{[0-9a-f]+}}"
// CHECK-NEXT: }
gpipe.model @tiny batch 4 {
  %x = gpipe.input "x" : tensor<4x3xf32>
  %y = gpipe.input "y" : tensor<4xi32>
  %h = gpipe.layer "fc" -> tensor<4x5xf32> {
    %w = gpipe.param "w" glorot_uniform : tensor<3x5xf32>
    %0 = gpipe.dense %x, %w : (tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>
    %1 = gpipe.relu %0 : tensor<4x5xf32>
    gpipe.yield %1 : tensor<4x5xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.softmax_cross_entropy %h, %y : (tensor<4x5xf32>, tensor<4xi32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
