// gpipe-differentiate through matmuls: Y = op(A) op(B) gives dA = dY op(B)^T
// (op(B) dY^T where A is transposed) and dB = op(A)^T dY (dY^T op(A) where B
// is), each a matmul with transposes rather than a transposed copy, over
// dY's batch and summed back to a parameter shared by the batch
// (gpipe.sum_to). A model input gets no gradient.
// RUN: gpipe-opt %s -gpipe-estimate-cost -gpipe-partition -gpipe-form-stages -gpipe-differentiate | FileCheck %s

// CHECK-LABEL: gpipe.stage_backward @stage0
// CHECK-DAG: %[[P:.*]] = gpipe.param_ref "p" : tensor<5x5xf32>
// CHECK-DAG: %[[Q:.*]] = gpipe.param_ref "q" : tensor<5x5xf32>
// CHECK: %[[A:.*]] = gpipe.matmul %arg0, %[[P]] {gpipe.recompute}
// CHECK: %[[S:.*]] = gpipe.matmul %[[A]], %[[A]] transpose_rhs {gpipe.recompute}
// CHECK: %[[C:.*]] = gpipe.matmul %[[S]], %[[A]] transpose_lhs {gpipe.recompute}
// CHECK: gpipe.mse_loss_grad
// CHECK: %[[DT:.*]] = gpipe.transpose
// CHECK: %[[DQ:.*]] = gpipe.matmul %[[C]], %[[DT]] transpose_lhs transpose_rhs : (tensor<2x3x5xf32>, tensor<2x5x3xf32>) -> tensor<2x5x5xf32>
// CHECK: %[[DQS:.*]] = gpipe.sum_to %[[DQ]] : tensor<2x5x5xf32> -> tensor<5x5xf32>
// CHECK: gpipe.accumulate_grad "q", %[[DQS]]
// CHECK: %[[DC:.*]] = gpipe.matmul %[[DT]], %[[Q]] transpose_lhs transpose_rhs : (tensor<2x5x3xf32>, tensor<5x5xf32>) -> tensor<2x3x5xf32>
// CHECK: %[[DS:.*]] = gpipe.matmul %[[A]], %[[DC]] transpose_rhs : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x3xf32>
// CHECK: %[[DA0:.*]] = gpipe.matmul %[[S]], %[[DC]] : (tensor<2x3x3xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
// CHECK: %[[DA1:.*]] = gpipe.matmul %[[DS]], %[[A]] : (tensor<2x3x3xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
// CHECK: %[[SUM:.*]] = gpipe.add %[[DA0]], %[[DA1]]
// CHECK: %[[DA2:.*]] = gpipe.matmul %[[DS]], %[[A]] transpose_lhs : (tensor<2x3x3xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
// CHECK: %[[DA:.*]] = gpipe.add %[[SUM]], %[[DA2]]
// CHECK: %[[DP:.*]] = gpipe.matmul %arg0, %[[DA]] transpose_lhs : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x5x5xf32>
// CHECK: %[[DPS:.*]] = gpipe.sum_to %[[DP]] : tensor<2x5x5xf32> -> tensor<5x5xf32>
// CHECK: gpipe.accumulate_grad "p", %[[DPS]]
// CHECK-NOT: gpipe.matmul
gpipe.model @attention batch 2 {
  %x = gpipe.input "x" : tensor<2x3x5xf32>
  %y = gpipe.layer "l" -> tensor<2x3x5xf32> {
    %p = gpipe.param "p" normal : tensor<5x5xf32>
    %q = gpipe.param "q" normal : tensor<5x5xf32>
    %a = gpipe.matmul %x, %p : (tensor<2x3x5xf32>, tensor<5x5xf32>) -> tensor<2x3x5xf32>
    %s = gpipe.matmul %a, %a transpose_rhs : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x3xf32>
    %c = gpipe.matmul %s, %a transpose_lhs : (tensor<2x3x3xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
    %t = gpipe.matmul %q, %c transpose_lhs transpose_rhs : (tensor<5x5xf32>, tensor<2x3x5xf32>) -> tensor<2x5x3xf32>
    %u = gpipe.transpose %t perm [0, 2, 1] : tensor<2x5x3xf32> -> tensor<2x3x5xf32>
    gpipe.yield %u : tensor<2x3x5xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
