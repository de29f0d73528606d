// gpipe-insert-send-recv routes every value passed between adjacent stages through a send/recv channel numbered by the producer's result.
// RUN: gpipe-opt %s -split-input-file -gpipe-insert-send-recv | FileCheck %s

// Two channels from stage 0 to stage 1 (one of them a carried residual), one from stage 1 to stage 2; model inputs need no channel.
// CHECK-LABEL: gpipe.model @three
// CHECK: %[[X:.*]] = gpipe.input "x"
// CHECK: %[[Y:.*]] = gpipe.input "y"
// CHECK: %[[S0:.*]]:2 = gpipe.stage @stage0 index 0 (%[[X]])
// CHECK: gpipe.send %[[S0]]#0 from 0 to 1 channel 0 : tensor<4x8xf32>
// CHECK-NEXT: gpipe.send %[[S0]]#1 from 0 to 1 channel 1 : tensor<4x8xf32>
// CHECK-NEXT: %[[R0:.*]] = gpipe.recv from 0 to 1 channel 0 : tensor<4x8xf32>
// CHECK-NEXT: %[[R1:.*]] = gpipe.recv from 0 to 1 channel 1 : tensor<4x8xf32>
// CHECK-NEXT: %[[S1:.*]]:2 = gpipe.stage @stage1 index 1 (%[[R0]], %[[R1]])
// CHECK: gpipe.send %[[S1]]#0 from 1 to 2 channel 0
// CHECK-NEXT: gpipe.send %[[S1]]#1 from 1 to 2 channel 1
// CHECK-NEXT: %[[T0:.*]] = gpipe.recv from 1 to 2 channel 0
// CHECK-NEXT: %[[T1:.*]] = gpipe.recv from 1 to 2 channel 1
// CHECK-NEXT: %[[S2:.*]] = gpipe.stage @stage2 index 2 (%[[T0]], %[[T1]], %[[Y]])
// CHECK: gpipe.return %[[S2]]
gpipe.model @three batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %y = gpipe.input "y" : tensor<4x8xf32>
  %s0:2 = gpipe.stage @stage0 index 0 (%x) : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  ^bb0(%arg0: tensor<4x8xf32>):
    %a = gpipe.layer "a" -> tensor<4x8xf32> {
      %0 = gpipe.relu %arg0 : tensor<4x8xf32>
      gpipe.yield %0 : tensor<4x8xf32>
    }
    %b = gpipe.layer "b" -> tensor<4x8xf32> {
      %0 = gpipe.tanh %a : tensor<4x8xf32>
      gpipe.yield %0 : tensor<4x8xf32>
    }
    gpipe.yield %a, %b : tensor<4x8xf32>, tensor<4x8xf32>
  }
  %s1:2 = gpipe.stage @stage1 index 1 (%s0#0, %s0#1) : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  ^bb0(%arg0: tensor<4x8xf32>, %arg1: tensor<4x8xf32>):
    %c = gpipe.layer "c" -> tensor<4x8xf32> {
      %0 = gpipe.gelu %arg1 : tensor<4x8xf32>
      gpipe.yield %0 : tensor<4x8xf32>
    }
    gpipe.yield %arg0, %c : tensor<4x8xf32>, tensor<4x8xf32>
  }
  %s2 = gpipe.stage @stage2 index 2 (%s1#0, %s1#1, %y) : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<4x8xf32>, %arg1: tensor<4x8xf32>, %arg2: tensor<4x8xf32>):
    %d = gpipe.layer "d" -> tensor<f32> {
      %0 = gpipe.add %arg1, %arg0 : tensor<4x8xf32>
      %1 = gpipe.mse_loss %0, %arg2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
      gpipe.yield %1 : tensor<f32>
    }
    gpipe.yield %d : tensor<f32>
  }
  gpipe.return %s2 : tensor<f32>
}

// -----

// A single stage has no boundary, so nothing is inserted.
// CHECK-LABEL: gpipe.model @one
// CHECK-NOT: gpipe.send
// CHECK-NOT: gpipe.recv
// CHECK: gpipe.return
gpipe.model @one batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %s = gpipe.stage @stage0 index 0 (%x) : (tensor<2x3xf32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<2x3xf32>):
    %a = gpipe.layer "a" -> tensor<f32> {
      %0 = gpipe.mse_loss %arg0, %arg0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.yield %a : tensor<f32>
  }
  gpipe.return %s : tensor<f32>
}
