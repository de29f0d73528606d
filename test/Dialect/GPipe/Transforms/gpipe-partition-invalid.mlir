// gpipe-partition refuses requests it cannot meet, naming the layer and the numbers.
// RUN: gpipe-opt %s -split-input-file -gpipe-partition="num-stages=2 memory-cap=400 memory-model=cost" -verify-diagnostics

// Layer b alone needs 4 x 100 B of parameter state + 16 B received = 416 B, over the 400 B cap.
// expected-error @+1 {{'gpipe.model' op cannot be partitioned: layer 'b' (#1) needs 416 bytes on its own, more than the memory cap of 400 bytes}}
gpipe.model @toobig batch 2 {
  %x = gpipe.input "x" : tensor<2x2xf32>
  %a = gpipe.layer "a" -> tensor<2x2xf32> attributes {cost = #gpipe.cost<flops = 1, param_bytes = 100, activation_bytes = 0>} {
    %0 = gpipe.relu %x : tensor<2x2xf32>
    gpipe.yield %0 : tensor<2x2xf32>
  }
  %b = gpipe.layer "b" -> tensor<2x2xf32> attributes {cost = #gpipe.cost<flops = 1, param_bytes = 100, activation_bytes = 0>} {
    %0 = gpipe.relu %a : tensor<2x2xf32>
    gpipe.yield %0 : tensor<2x2xf32>
  }
  %c = gpipe.layer "c" -> tensor<2x2xf32> attributes {cost = #gpipe.cost<flops = 1, param_bytes = 0, activation_bytes = 0>} {
    %0 = gpipe.relu %b : tensor<2x2xf32>
    gpipe.yield %0 : tensor<2x2xf32>
  }
  %d = gpipe.layer "d" -> tensor<f32> attributes {cost = #gpipe.cost<flops = 1, param_bytes = 0, activation_bytes = 4>} {
    %0 = gpipe.mse_loss %c, %x : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %d : tensor<f32>
}
// -----

// Three layers of 90 B parameters each fit alone (a: 360 B, b: 360 + 16 received = 376 B, c: 376 + 4 B loss = 380 B)
// but no two fit together; the best 2-cell split [a b | c] needs 720 B at most.
// expected-error @+1 {{'gpipe.model' op cannot be partitioned: no partition into 2 cells fits the memory cap of 400 bytes; the smallest cap that fits is 720 bytes}}
gpipe.model @infeasible batch 2 {
  %x = gpipe.input "x" : tensor<2x2xf32>
  %a = gpipe.layer "a" -> tensor<2x2xf32> attributes {cost = #gpipe.cost<flops = 1, param_bytes = 90, activation_bytes = 0>} {
    %0 = gpipe.relu %x : tensor<2x2xf32>
    gpipe.yield %0 : tensor<2x2xf32>
  }
  %b = gpipe.layer "b" -> tensor<2x2xf32> attributes {cost = #gpipe.cost<flops = 1, param_bytes = 90, activation_bytes = 0>} {
    %0 = gpipe.relu %a : tensor<2x2xf32>
    gpipe.yield %0 : tensor<2x2xf32>
  }
  %c = gpipe.layer "c" -> tensor<f32> attributes {cost = #gpipe.cost<flops = 1, param_bytes = 90, activation_bytes = 4>} {
    %0 = gpipe.mse_loss %b, %x : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %c : tensor<f32>
}
// -----

// A layer without a cost cannot be balanced.
gpipe.model @nocost batch 2 {
  %x = gpipe.input "x" : tensor<2x2xf32>
  // expected-error @+1 {{'gpipe.layer' op has no cost; run gpipe-estimate-cost or write one}}
  %a = gpipe.layer "a" -> tensor<f32> {
    %0 = gpipe.mse_loss %x, %x : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %a : tensor<f32>
}

// -----

// More cells than layers.
// expected-error @+1 {{'gpipe.model' op cannot be partitioned: cannot split 1 layer into 2 cells: expected at most 1 cell}}
gpipe.model @few batch 2 {
  %x = gpipe.input "x" : tensor<2x2xf32>
  %a = gpipe.layer "a" -> tensor<f32> attributes {cost = #gpipe.cost<flops = 1, param_bytes = 0, activation_bytes = 0>} {
    %0 = gpipe.mse_loss %x, %x : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %a : tensor<f32>
}

// -----

// Partitioning happens before stages are formed.
// expected-error @+1 {{'gpipe.model' op is already split into stages; partition runs before gpipe-form-stages}}
gpipe.model @staged batch 2 {
  %x = gpipe.input "x" : tensor<2x2xf32>
  %s = gpipe.stage @stage0 index 0 (%x) : (tensor<2x2xf32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<2x2xf32>):
    %a = gpipe.layer "a" -> tensor<f32> {
      %0 = gpipe.mse_loss %arg0, %arg0 : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.yield %a : tensor<f32>
  }
  gpipe.return %s : tensor<f32>
}
