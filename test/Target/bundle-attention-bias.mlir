// A biased attention through the compiler into the bundle: attention takes its two biases after the weights (5 operands),
// attention_grad takes them too (7 operands) and returns their gradients after the weights' (5 results), which the
// backward accumulates into "bqkv" and "bo".
// RUN: gpipe-opt %s -gpipe-compile="num-stages=1 num-microbatches=2" | gpipe-translate --gpipe-to-bundle | FileCheck %s

// CHECK:      "op": "attention_grad",
// CHECK-NEXT: "operands": [
// CHECK-NEXT:   [[DY:[0-9]+]],
// CHECK-NEXT:   [[Y:[0-9]+]],
// CHECK-NEXT:   [[X:[0-9]+]],
// CHECK-NEXT:   [[WQKV:[0-9]+]],
// CHECK-NEXT:   [[WO:[0-9]+]],
// CHECK-NEXT:   [[BQKV:[0-9]+]],
// CHECK-NEXT:   [[BO:[0-9]+]]
// CHECK-NEXT: ],
// CHECK-NEXT: "results": [
// CHECK-NEXT:   {{-?[0-9]+}},
// CHECK-NEXT:   [[DWQKV:[0-9]+]],
// CHECK-NEXT:   [[DWO:[0-9]+]],
// CHECK-NEXT:   [[DBQKV:[0-9]+]],
// CHECK-NEXT:   [[DBO:[0-9]+]]
// CHECK-NEXT: ]
// CHECK:      "name": "bqkv",
// CHECK-NEXT: "op": "accumulate_grad",
// CHECK-NEXT: "operands": [
// CHECK-NEXT:   [[DBQKV]]
// CHECK:      "name": "bo",
// CHECK-NEXT: "op": "accumulate_grad",
// CHECK-NEXT: "operands": [
// CHECK-NEXT:   [[DBO]]
// CHECK:      "op": "attention",
// CHECK-NEXT: "operands": [
// CHECK-NEXT:   [[X]],
// CHECK-NEXT:   [[WQKV]],
// CHECK-NEXT:   [[WO]],
// CHECK-NEXT:   [[BQKV]],
// CHECK-NEXT:   [[BO]]
// CHECK-NEXT: ],
// CHECK-NEXT: "results": [
// CHECK-NEXT:   [[Y]]
gpipe.model @attn batch 2 {
  %x = gpipe.input "x" : tensor<2x4x8xf32>
  %t = gpipe.input "t" : tensor<2x4x8xf32>
  %h = gpipe.layer "attn" -> tensor<2x4x8xf32> {
    %wqkv = gpipe.param "wqkv" glorot_uniform : tensor<8x24xf32>
    %wo = gpipe.param "wo" glorot_uniform : tensor<8x8xf32>
    %bqkv = gpipe.param "bqkv" zeros : tensor<24xf32>
    %bo = gpipe.param "bo" zeros : tensor<8xf32>
    %0 = gpipe.attention %x, %wqkv, %wo bias %bqkv, %bo heads 2 causal : (tensor<2x4x8xf32>, tensor<8x24xf32>, tensor<8x8xf32>, tensor<24xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    gpipe.yield %0 : tensor<2x4x8xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %h, %t : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
