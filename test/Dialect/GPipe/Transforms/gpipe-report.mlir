// gpipe-report prints per stage its layers, cost, memory and bytes sent, the imbalance and the bubble fraction, as text and as JSON.
// RUN: gpipe-opt %s -gpipe-compile="num-stages=2 num-microbatches=2" -gpipe-report -o /dev/null | FileCheck %s --check-prefix=TEXT
// RUN: gpipe-opt %s -gpipe-compile="num-stages=2 num-microbatches=2" -gpipe-report=format=json -o /dev/null | FileCheck %s --check-prefix=JSON

// Layer costs 10, 20, 30, 40 (written by hand) split into [a b c | d]: stages of 60 and 40, imbalance 60 / 50 = 1.2.
// Replaying the schedule (backward = 2 x forward, per micro-batch half the stage cost): device 0 runs
// F0 [0,30] F1 [30,60] B1 [120,180] B0 [180,240]; device 1 runs F0 [30,50] F1 [60,80] B1 [80,120] B0 [120,160].
// Busy 180 + 120 of 2 x 240: bubble 1 - 300/480 = 0.375. Balanced stages would give (K-1)/(M+K-1) = 1/3.
// The activation sent by stage 0 is 4x8 f32 = 128 B; stage 1 sends its gradient back.
// Memory: with no cap the partitioner plans nothing, so the stage table shows each device's planned arena (remat full,
// Adam), the figure of the memory plan table below it.

// TEXT: model @tiny: 2 stages, batch 4 in 2 micro-batches of rows [2, 2], objective variance
// TEXT: stage       forward cost   share      params      memory    act. sent   grad. sent  layers
// TEXT-NEXT: 0 0.000 MFLOP 60.0% 32 B 448 B 128 B 0 B a, b, c
// TEXT-NEXT: 1 0.000 MFLOP 40.0% 0 B 320 B 0 B 128 B d
// TEXT-NEXT: imbalance (largest / mean stage cost): 1.200
// TEXT-NEXT: bubble fraction: 0.333 for balanced stages (K-1)/(M+K-1), 0.375 predicted from the stage costs
// TEXT: device resident peak arena peak at
// TEXT-NEXT: 0 128 B 448 B 448 B
// TEXT-NEXT: 1 0 B 320 B 320 B

// JSON: "batch": 4,
// JSON: "bubble_fraction_balanced": 0.33333333333333331,
// JSON: "bubble_fraction_predicted": 0.375,
// JSON: "imbalance": 1.2,
// JSON: "microbatch_rows": [
// JSON: "model": "tiny",
// JSON: "num_microbatches": 2,
// JSON: "num_stages": 2,
// JSON: "objective": "variance",
// JSON: "stages": [
// JSON: "activation_bytes_sent": 128,
// JSON: "forward_flops": 60,
// JSON: "gradient_bytes_sent": 0,
// JSON: "layers": [
// JSON-NEXT: "a",
// JSON-NEXT: "b",
// JSON-NEXT: "c"
// JSON: "param_bytes": 32
// JSON: "activation_bytes_sent": 0,
// JSON: "forward_flops": 40,
// JSON: "gradient_bytes_sent": 128,
gpipe.model @tiny batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %a = gpipe.layer "a" -> tensor<4x8xf32> attributes {cost = #gpipe.cost<flops = 10, param_bytes = 32, activation_bytes = 128>} {
    %b = gpipe.param "a.b" zeros : tensor<8xf32>
    %0 = gpipe.add %x, %x : tensor<4x8xf32>
    gpipe.yield %0 : tensor<4x8xf32>
  }
  %b = gpipe.layer "b" -> tensor<4x8xf32> attributes {cost = #gpipe.cost<flops = 20, param_bytes = 0, activation_bytes = 128>} {
    %0 = gpipe.relu %a : tensor<4x8xf32>
    gpipe.yield %0 : tensor<4x8xf32>
  }
  %c = gpipe.layer "c" -> tensor<4x8xf32> attributes {cost = #gpipe.cost<flops = 30, param_bytes = 0, activation_bytes = 128>} {
    %0 = gpipe.tanh %b : tensor<4x8xf32>
    gpipe.yield %0 : tensor<4x8xf32>
  }
  %d = gpipe.layer "d" -> tensor<f32> attributes {cost = #gpipe.cost<flops = 40, param_bytes = 0, activation_bytes = 4>} {
    %0 = gpipe.mse_loss %c, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %d : tensor<f32>
}
