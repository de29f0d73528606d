// gpipe-form-stages outlines each cell into a stage with explicit inputs and outputs, and carries skip connections through the stages between.
// RUN: gpipe-opt %s -split-input-file -gpipe-form-stages | FileCheck %s

// A residual from cell 0 to cell 2 passes through stage 1; model inputs go straight to the stage that reads them.
// CHECK-LABEL: gpipe.model @skip
// CHECK: %[[X:.*]] = gpipe.input "x"
// CHECK: %[[Y:.*]] = gpipe.input "y"
// CHECK: %[[S0:.*]]:2 = gpipe.stage @stage0 index 0 (%[[X]]) attributes {cost = #gpipe.cost<flops = 3, param_bytes = 0, activation_bytes = 2>} : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
// CHECK-NEXT: ^bb0(%[[X0:.*]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[A:.*]] = gpipe.layer "a"
// CHECK-NEXT: gpipe.relu %[[X0]]
// CHECK: %[[B:.*]] = gpipe.layer "b"
// CHECK-NEXT: gpipe.tanh %[[A]]
// CHECK: gpipe.yield %[[A]], %[[B]] : tensor<4x8xf32>, tensor<4x8xf32>
// CHECK: %[[S1:.*]]:2 = gpipe.stage @stage1 index 1 (%[[S0]]#0, %[[S0]]#1)
// CHECK-SAME: : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK-NEXT: ^bb0(%[[A1:.*]]: tensor<4x8xf32>, %[[B1:.*]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[C:.*]] = gpipe.layer "c"
// CHECK-NEXT: gpipe.gelu %[[B1]]
// CHECK: gpipe.yield %[[A1]], %[[C]] : tensor<4x8xf32>, tensor<4x8xf32>
// CHECK: %[[S2:.*]] = gpipe.stage @stage2 index 2 (%[[S1]]#0, %[[S1]]#1, %[[Y]])
// CHECK-SAME: : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
// CHECK-NEXT: ^bb0(%[[A2:.*]]: tensor<4x8xf32>, %[[C2:.*]]: tensor<4x8xf32>, %[[Y2:.*]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[D:.*]] = gpipe.layer "d"
// CHECK-NEXT: %[[SUM:.*]] = gpipe.add %[[C2]], %[[A2]]
// CHECK-NEXT: gpipe.mse_loss %[[SUM]], %[[Y2]]
// CHECK: gpipe.yield %[[D]] : tensor<f32>
// CHECK: gpipe.return %[[S2]] : tensor<f32>
gpipe.model @skip batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %y = gpipe.input "y" : tensor<4x8xf32>
  %a = gpipe.layer "a" -> tensor<4x8xf32> attributes {cell = 0 : i64, cost = #gpipe.cost<flops = 1, param_bytes = 0, activation_bytes = 1>} {
    %0 = gpipe.relu %x : tensor<4x8xf32>
    gpipe.yield %0 : tensor<4x8xf32>
  }
  %b = gpipe.layer "b" -> tensor<4x8xf32> attributes {cell = 0 : i64, cost = #gpipe.cost<flops = 2, param_bytes = 0, activation_bytes = 1>} {
    %0 = gpipe.tanh %a : tensor<4x8xf32>
    gpipe.yield %0 : tensor<4x8xf32>
  }
  %c = gpipe.layer "c" -> tensor<4x8xf32> attributes {cell = 1 : i64} {
    %0 = gpipe.gelu %b : tensor<4x8xf32>
    gpipe.yield %0 : tensor<4x8xf32>
  }
  %d = gpipe.layer "d" -> tensor<f32> attributes {cell = 2 : i64} {
    %0 = gpipe.add %c, %a : tensor<4x8xf32>
    %1 = gpipe.mse_loss %0, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %d : tensor<f32>
}

// -----

// One cell gives one stage that reads every input and returns the loss; the memory found by the partitioner is kept on the stage.
// CHECK-LABEL: gpipe.model @single
// CHECK: %[[X:.*]] = gpipe.input "x"
// CHECK: %[[L:.*]] = gpipe.input "labels"
// CHECK: %[[S:.*]] = gpipe.stage @stage0 index 0 (%[[X]], %[[L]]) attributes {memory_bytes = 1234 : i64} : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
// CHECK: gpipe.return %[[S]]
gpipe.model @single batch 2 attributes {gpipe.partition = {cell_memory = array<i64: 1234>}} {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %l = gpipe.input "labels" : tensor<2xi32>
  %loss = gpipe.layer "head" -> tensor<f32> attributes {cell = 0 : i64} {
    %0 = gpipe.softmax_cross_entropy %x, %l : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %loss : tensor<f32>
}
