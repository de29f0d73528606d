// A matmul is a library op of the bundle (a GEMM per matrix): its transposes
// are written only when set (transpose_a, transpose_b), and its gradients
// are matmuls too. In a forward, a per-example operand must keep the batch
// in the result's dimension 0: contracting it, or reading it as columns, would mix
// a micro-batch's examples apart from the others'; a parameter may not span
// the batch dimension.
// RUN: split-file %s %t
// RUN: gpipe-opt %t/model.mlir -gpipe-compile="num-stages=1 num-microbatches=2" | gpipe-translate --gpipe-to-bundle | FileCheck %s
// RUN: gpipe-opt %t/contract.mlir -gpipe-compile="num-microbatches=2" | not gpipe-translate --gpipe-to-bundle 2>&1 | FileCheck %s --check-prefix=CONTRACT
// RUN: gpipe-opt %t/rows.mlir -gpipe-compile="num-stages=1 num-microbatches=2" | gpipe-translate --gpipe-to-bundle | FileCheck %s --check-prefix=ROWS
// RUN: gpipe-opt %t/span.mlir -gpipe-compile="num-microbatches=2" | not gpipe-translate --gpipe-to-bundle 2>&1 | FileCheck %s --check-prefix=SPAN

// CHECK: "forward": [
// CHECK: "op": "matmul",
// CHECK-NEXT: "operands": [
// CHECK-NEXT: 0,
// CHECK-NEXT: 1
// CHECK-NEXT: ],
// CHECK-NEXT: "results": [
// CHECK-NEXT: 2
// CHECK-NEXT: ]
// CHECK-NEXT: },
// CHECK-NEXT: {
// CHECK-NEXT: "op": "matmul",
// CHECK: "transpose_b": true
// CHECK: "op": "matmul",
// CHECK: "transpose_a": true
// CHECK-NOT: "transpose_b"
// CHECK: "results"

// A per-example matrix's rows times a weight; the weight's gradient
// contracts the batch in the backward (x^T dy), an unbatched value.
// ROWS: "backward": [
// ROWS: "op": "matmul",
// ROWS-NEXT: "operands": [
// ROWS: "transpose_a": true
// ROWS: "op": "accumulate_grad"
// ROWS: "forward": [
// ROWS: "op": "matmul",

// CONTRACT: error: 'gpipe.matmul' op reads the per-example 'tensor<2x3xf32>' (lhs) with its batch (dimension 0) outside the result's dimension 0 (contracted, a column, or behind other batch dimensions); keep the batch first in both
// SPAN: error: 'gpipe.matmul' op reads 'tensor<2x5x3xf32>', which is not per example (a parameter, or a value computed from parameters alone) but spans the batch dimension of its per-example result; give it size 1 (or drop) in dimension 0 to broadcast it

//--- model.mlir
gpipe.model @attention batch 2 {
  %x = gpipe.input "x" : tensor<2x3x5xf32>
  %y = gpipe.layer "l" -> tensor<2x3x5xf32> {
    %p = gpipe.param "p" normal : tensor<5x5xf32>
    %a = gpipe.matmul %x, %p : (tensor<2x3x5xf32>, tensor<5x5xf32>) -> tensor<2x3x5xf32>
    %s = gpipe.matmul %a, %a transpose_rhs : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x3xf32>
    %c = gpipe.matmul %s, %a transpose_lhs : (tensor<2x3x3xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
    gpipe.yield %c : tensor<2x3x5xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

//--- contract.mlir
gpipe.model @contract batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %y = gpipe.layer "l" -> tensor<2x3xf32> {
    %g = gpipe.matmul %x, %x transpose_lhs : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<3x3xf32>
    %0 = gpipe.matmul %x, %g : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    gpipe.yield %0 : tensor<2x3xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

//--- span.mlir
gpipe.model @span batch 2 {
  %x = gpipe.input "x" : tensor<2x3x5xf32>
  %t = gpipe.input "t" : tensor<2x3x3xf32>
  %y = gpipe.layer "l" -> tensor<2x3x3xf32> {
    %w = gpipe.param "w" normal : tensor<2x5x3xf32>
    %0 = gpipe.matmul %x, %w : (tensor<2x3x5xf32>, tensor<2x5x3xf32>) -> tensor<2x3x3xf32>
    gpipe.yield %0 : tensor<2x3x3xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %t : (tensor<2x3x3xf32>, tensor<2x3x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

//--- rows.mlir
gpipe.model @rows batch 4 {
  %x = gpipe.input "x" : tensor<4x3xf32>
  %t = gpipe.input "t" : tensor<4x2xf32>
  %y = gpipe.layer "l" -> tensor<4x2xf32> {
    %w = gpipe.param "w" normal : tensor<3x2xf32>
    %0 = gpipe.matmul %x, %w : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
    gpipe.yield %0 : tensor<4x2xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %t : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
