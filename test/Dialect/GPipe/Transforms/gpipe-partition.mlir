// gpipe-partition finds the exact optimum of each objective (cells worked out by hand in the comments), honours a memory cap and breaks ties by the bytes crossing the cuts.
// RUN: gpipe-opt %s -split-input-file -gpipe-partition="num-stages=3 memory-model=cost" | FileCheck %s --check-prefix=VAR
// RUN: gpipe-opt %s -split-input-file -gpipe-partition="num-stages=3 objective=bottleneck memory-model=cost" | FileCheck %s --check-prefix=BOT
// RUN: gpipe-opt %s -split-input-file -gpipe-partition="num-stages=2 memory-model=cost" | FileCheck %s --check-prefix=TWO
// RUN: gpipe-opt %s -split-input-file -gpipe-partition="num-stages=2 memory-cap=500B memory-model=cost" | FileCheck %s --check-prefix=CAP

// Costs 3 9 1 7 4 into 3 cells. Variance: [3 9 | 1 7 | 4] = 12 8 4, sum of squares 224 (the unique minimum).
// Bottleneck: [3 | 9 1 | 7 4] = 3 10 11, largest 11 (unique; the variance split has 12).
// Memory: no parameters; each cell holds what it receives (16 B) and its activations (the loss: 4 B).
// VAR-LABEL: gpipe.model @variance
// VAR-SAME: gpipe.partition = {cell_memory = array<i64: 0, 16, 20>, memory_model = "cost", num_cells = 3 : i64, num_microbatches = 1 : i64, objective = "variance", remat = "full"}
// VAR: gpipe.layer "a" {{.*}}cell = 0 : i64
// VAR: gpipe.layer "b" {{.*}}cell = 0 : i64
// VAR: gpipe.layer "c" {{.*}}cell = 1 : i64
// VAR: gpipe.layer "d" {{.*}}cell = 1 : i64
// VAR: gpipe.layer "e" {{.*}}cell = 2 : i64
// BOT-LABEL: gpipe.model @variance
// BOT-SAME: objective = "bottleneck"
// BOT: gpipe.layer "a" {{.*}}cell = 0 : i64
// BOT: gpipe.layer "b" {{.*}}cell = 1 : i64
// BOT: gpipe.layer "c" {{.*}}cell = 1 : i64
// BOT: gpipe.layer "d" {{.*}}cell = 2 : i64
// BOT: gpipe.layer "e" {{.*}}cell = 2 : i64
gpipe.model @variance batch 2 {
  %x = gpipe.input "x" : tensor<2x2xf32>
  %a = gpipe.layer "a" -> tensor<2x2xf32> attributes {cost = #gpipe.cost<flops = 3, param_bytes = 0, activation_bytes = 0>} {
    %0 = gpipe.relu %x : tensor<2x2xf32>
    gpipe.yield %0 : tensor<2x2xf32>
  }
  %b = gpipe.layer "b" -> tensor<2x2xf32> attributes {cost = #gpipe.cost<flops = 9, param_bytes = 0, activation_bytes = 0>} {
    %0 = gpipe.relu %a : tensor<2x2xf32>
    gpipe.yield %0 : tensor<2x2xf32>
  }
  %c = gpipe.layer "c" -> tensor<2x2xf32> attributes {cost = #gpipe.cost<flops = 1, param_bytes = 0, activation_bytes = 0>} {
    %0 = gpipe.relu %b : tensor<2x2xf32>
    gpipe.yield %0 : tensor<2x2xf32>
  }
  %d = gpipe.layer "d" -> tensor<2x2xf32> attributes {cost = #gpipe.cost<flops = 7, param_bytes = 0, activation_bytes = 0>} {
    %0 = gpipe.relu %c : tensor<2x2xf32>
    gpipe.yield %0 : tensor<2x2xf32>
  }
  %e = gpipe.layer "e" -> tensor<f32> attributes {cost = #gpipe.cost<flops = 4, param_bytes = 0, activation_bytes = 4>} {
    %0 = gpipe.mse_loss %d, %x : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %e : tensor<f32>
}
// -----

// Layers a and b hold 100 B of parameters each (x4 for weights, gradients and two optimizer slots); each layer passes 16 B on.
// Without a cap, 2 cells split evenly: [a b | c d]. With a 500 B cap, a and b cannot share a cell (800 B), so the
// only fitting split is [a | b c d] = 400 B and 4 x 100 + 16 received + 4 (the loss) = 420 B.
// TWO-LABEL: gpipe.model @capped
// TWO-SAME: cell_memory = array<i64: 800, 20>
// TWO: gpipe.layer "a" {{.*}}cell = 0 : i64
// TWO: gpipe.layer "b" {{.*}}cell = 0 : i64
// TWO: gpipe.layer "c" {{.*}}cell = 1 : i64
// TWO: gpipe.layer "d" {{.*}}cell = 1 : i64
// CAP-LABEL: gpipe.model @capped
// CAP-SAME: cell_memory = array<i64: 400, 420>, memory_cap = 500 : i64
// CAP: gpipe.layer "a" {{.*}}cell = 0 : i64
// CAP: gpipe.layer "b" {{.*}}cell = 1 : i64
// CAP: gpipe.layer "c" {{.*}}cell = 1 : i64
// CAP: gpipe.layer "d" {{.*}}cell = 1 : i64
gpipe.model @capped batch 2 {
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

// Costs 10 0 10 tie between [a | b c] and [a b | c]; the second cut carries 8 B (b's 2x1 output) instead of 64 B (a's 2x8), so it wins.
// TWO-LABEL: gpipe.model @tie
// TWO: gpipe.layer "a" {{.*}}cell = 0 : i64
// TWO: gpipe.layer "b" {{.*}}cell = 0 : i64
// TWO: gpipe.layer "c" {{.*}}cell = 1 : i64
gpipe.model @tie batch 2 {
  %x = gpipe.input "x" : tensor<2x8xf32>
  %a = gpipe.layer "a" -> tensor<2x8xf32> attributes {cost = #gpipe.cost<flops = 10, param_bytes = 0, activation_bytes = 0>} {
    %0 = gpipe.relu %x : tensor<2x8xf32>
    gpipe.yield %0 : tensor<2x8xf32>
  }
  %b = gpipe.layer "b" -> tensor<2x1xf32> attributes {cost = #gpipe.cost<flops = 0, param_bytes = 0, activation_bytes = 0>} {
    %w = gpipe.param "b.w" zeros : tensor<8x1xf32>
    %0 = gpipe.dense %a, %w : (tensor<2x8xf32>, tensor<8x1xf32>) -> tensor<2x1xf32>
    gpipe.yield %0 : tensor<2x1xf32>
  }
  %c = gpipe.layer "c" -> tensor<f32> attributes {cost = #gpipe.cost<flops = 10, param_bytes = 0, activation_bytes = 0>} {
    %0 = gpipe.mse_loss %b, %b : (tensor<2x1xf32>, tensor<2x1xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %c : tensor<f32>
}
