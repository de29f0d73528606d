// gpipe-partition balances each cell's compute times the work its device runs per unit of it (balance=work): a forward,
// a backward twice it, and a recompute where the schedule's order leaves a backward away from its forward. The split
// balanced so and the split balanced on the compute alone are timed by the cost model's simulation; the faster wins.
// RUN: gpipe-opt %s -gpipe-partition="stages=2 microbatches=8 schedule=1f1b memory-model=cost" | FileCheck %s --check-prefix=WORK
// RUN: gpipe-opt %s -gpipe-partition="stages=2 microbatches=8 schedule=1f1b memory-model=cost balance=compute" | FileCheck %s --check-prefix=COMPUTE
// RUN: gpipe-opt %s -gpipe-partition="stages=2 microbatches=8 schedule=1f1b remat=except-last memory-model=cost" | FileCheck %s --check-prefix=LAST
// RUN: gpipe-opt %s -gpipe-partition="stages=2 microbatches=8 schedule=gpipe memory-model=cost" | FileCheck %s --check-prefix=GPIPE
// RUN: gpipe-opt %s -gpipe-partition="stages=2 microbatches=8 schedule=1f1b remat=none memory-model=cost" | FileCheck %s --check-prefix=NONE
// RUN: not gpipe-opt %s -gpipe-partition="stages=3 virtual-stages=2 schedule=interleaved memory-model=cost" 2>&1 | FileCheck %s --check-prefix=BADV

// Eight layers of cost 1, so a forward costs a cell's layer count per micro-batch. Under 1F1B with remat full,
// device 0 recomputes all 8 micro-batches and device 1 none. Weights in half forwards, 6 per micro-batch plus a
// recompute priced at half a forward (56, 48) or a whole one (64, 48), both give [a b c | d e f g h]. Its step:
// device 1 runs 8 x (5 + 10) = 120 after device 0's first forward (3) and before its last backward (6): 129.
// The even [a b c d | e f g h]: device 0 runs 4 + 4 + 8 = 16 per micro-batch in the steady state: 132.
// WORK: gpipe.partition = {cell_memory = {{.*}}, cell_weights = array<i64: 56, 48>
// WORK: gpipe.layer "c" {{.*}}cell = 0 : i64
// WORK: gpipe.layer "d" {{.*}}cell = 1 : i64
// COMPUTE-NOT: cell_weights
// COMPUTE: gpipe.layer "d" {{.*}}cell = 0 : i64
// COMPUTE: gpipe.layer "e" {{.*}}cell = 1 : i64
// Except-last keeps device 0's last forward: the even split's step drops to 128, the weighted one stays 129.
// LAST-NOT: cell_weights
// LAST: gpipe.layer "d" {{.*}}cell = 0 : i64
// LAST: gpipe.layer "e" {{.*}}cell = 1 : i64
// GPipe's order recomputes 7 of 8 on each device: equal weights, the even split.
// GPIPE-NOT: cell_weights
// GPIPE: gpipe.layer "d" {{.*}}cell = 0 : i64
// GPIPE: gpipe.layer "e" {{.*}}cell = 1 : i64
// NONE-NOT: cell_weights
// NONE: gpipe.layer "d" {{.*}}cell = 0 : i64
// NONE: gpipe.layer "e" {{.*}}cell = 1 : i64
// BADV: error: 'gpipe.model' op expects stages to be a multiple of virtual-stages under schedule=interleaved (each device runs virtual-stages stages), got stages=3 and virtual-stages=2
gpipe.model @eight batch 2 {
  %x = gpipe.input "x" : tensor<2x2xf32>
  %a = gpipe.layer "a" -> tensor<2x2xf32> attributes {cost = #gpipe.cost<flops = 1, param_bytes = 0, activation_bytes = 0>} {
    %0 = gpipe.relu %x : tensor<2x2xf32>
    gpipe.yield %0 : tensor<2x2xf32>
  }
  %b = gpipe.layer "b" -> tensor<2x2xf32> attributes {cost = #gpipe.cost<flops = 1, param_bytes = 0, activation_bytes = 0>} {
    %0 = gpipe.relu %a : tensor<2x2xf32>
    gpipe.yield %0 : tensor<2x2xf32>
  }
  %c = gpipe.layer "c" -> tensor<2x2xf32> attributes {cost = #gpipe.cost<flops = 1, param_bytes = 0, activation_bytes = 0>} {
    %0 = gpipe.relu %b : tensor<2x2xf32>
    gpipe.yield %0 : tensor<2x2xf32>
  }
  %d = gpipe.layer "d" -> tensor<2x2xf32> attributes {cost = #gpipe.cost<flops = 1, param_bytes = 0, activation_bytes = 0>} {
    %0 = gpipe.relu %c : tensor<2x2xf32>
    gpipe.yield %0 : tensor<2x2xf32>
  }
  %e = gpipe.layer "e" -> tensor<2x2xf32> attributes {cost = #gpipe.cost<flops = 1, param_bytes = 0, activation_bytes = 0>} {
    %0 = gpipe.relu %d : tensor<2x2xf32>
    gpipe.yield %0 : tensor<2x2xf32>
  }
  %f = gpipe.layer "f" -> tensor<2x2xf32> attributes {cost = #gpipe.cost<flops = 1, param_bytes = 0, activation_bytes = 0>} {
    %0 = gpipe.relu %e : tensor<2x2xf32>
    gpipe.yield %0 : tensor<2x2xf32>
  }
  %g = gpipe.layer "g" -> tensor<2x2xf32> attributes {cost = #gpipe.cost<flops = 1, param_bytes = 0, activation_bytes = 0>} {
    %0 = gpipe.relu %f : tensor<2x2xf32>
    gpipe.yield %0 : tensor<2x2xf32>
  }
  %h = gpipe.layer "h" -> tensor<f32> attributes {cost = #gpipe.cost<flops = 1, param_bytes = 0, activation_bytes = 0>} {
    %0 = gpipe.mse_loss %g, %x : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %h : tensor<f32>
}
