// gpipe-report prints per stage its layers, cost, memory and bytes sent, the imbalance and the bubble fraction, as text and as JSON.
// RUN: gpipe-opt %s -gpipe-compile="num-stages=2 num-microbatches=2" -gpipe-report -o /dev/null | FileCheck %s --check-prefix=TEXT
// RUN: gpipe-opt %s -gpipe-compile="num-stages=2 num-microbatches=2" -gpipe-report=format=json -o /dev/null | FileCheck %s --check-prefix=JSON
// RUN: gpipe-opt %s -gpipe-compile="num-stages=2 num-microbatches=2" -gpipe-report="simulate=true device-gflops=0.001 link-gb-per-s=0.016 link-latency-us=1 trace=%t.gpipe.json" -o /dev/null | FileCheck %s --check-prefix=SIM
// RUN: FileCheck %s --check-prefix=TRACE < %t.gpipe.json
// RUN: gpipe-opt %s -gpipe-compile="num-stages=2 num-microbatches=2 schedule=1f1b" -gpipe-report="simulate=true device-gflops=0.001 link-gb-per-s=0.016 link-latency-us=1" -o /dev/null | FileCheck %s --check-prefix=SIM1F1B
// RUN: gpipe-opt %s -gpipe-compile="num-stages=2 num-microbatches=2 schedule=zb-h1" -gpipe-report="simulate=true device-gflops=0.001 link-gb-per-s=0.016 link-latency-us=1" -o /dev/null | FileCheck %s --check-prefix=SIMZB
// RUN: gpipe-opt %s -gpipe-compile="num-stages=2 num-microbatches=2 schedule=zb-h1" -gpipe-report=format=json -o /dev/null | FileCheck %s --check-prefix=ZBJSON
// RUN: gpipe-opt %s -gpipe-compile="num-stages=2 num-microbatches=2" -gpipe-report="simulate=true device-gflops=0.001 link-gb-per-s=0.016 link-latency-us=1 processors=1" -o /dev/null | FileCheck %s --check-prefix=SHARED
// RUN: gpipe-opt %s -gpipe-compile="num-stages=2 num-microbatches=2" -gpipe-report="profile=%S/Inputs/profile-k2.json" -o /dev/null | FileCheck %s --check-prefix=PROFILE
// RUN: gpipe-opt %s -gpipe-compile="num-stages=2 num-microbatches=2 schedule=1f1b" -gpipe-report="format=json device-gflops=0.001 link-gb-per-s=0.016 link-latency-us=1 simulate=true" -o /dev/null | FileCheck %s --check-prefix=SIMJSON

// Layer costs 10, 20, 30, 40 (written by hand) split into [a b c | d]: stages of 60 and 40, imbalance 60 / 50 = 1.2.
// Replaying the schedule (backward = 2 x forward, per micro-batch half the stage cost): device 0 runs
// F0 [0,30] F1 [30,60] B1 [120,180] B0 [180,240]; device 1 runs F0 [30,50] F1 [60,80] B1 [80,120] B0 [120,160].
// Busy 180 + 120 of 2 x 240: bubble 1 - 300/480 = 0.375. Balanced stages would give (K-1)/(M+K-1) = 1/3.
// The activation sent by stage 0 is 4x8 f32 = 128 B; stage 1 sends its gradient back.
// Memory: with no cap the partitioner plans nothing, so the stage table shows each device's planned arena (remat full,
// Adam), the figure of the memory plan table below it.

// The simulated step, by hand, at 1 MFLOP/s (1 FLOP per us) and 16 B/us + 1 us per transfer (each is 2x8xf32 = 64 B:
// 4 us on the copy stream). Per row a forward costs 60/4 = 15 us on device 0 and 10 us on device 1, a backward twice
// that: F = 30 and 20, B = 60 and 40 per micro-batch of 2 rows. Remat full recomputes the forward (R = F) before a
// backward, except where the backward directly follows its own forward; a device recomputes before it waits for
// the gradient.
// GPipe: device 0 F0 [0,30] (sent [30,34], there at 35) F1 [30,60] (there at 65); device 1 F0 [35,55] F1 [65,85]
// B1 [85,125] (follows F1: no recompute; gradient there at 130) R0 [125,145] B0 [145,185] (at 190); device 0
// B1 [130,190] (follows F1), R0 [190,220], B0 [220,280]. Busy 210 + 140 of 2 x 280: bubble 1 - 350/560 = 0.375.
// SIM: simulated step (cost model: 0.001 GFLOP/s per device, links 0.016 GB/s + 1 us): 0.280 ms (0.280 ms on the devices + 0.000 ms on the host), bubble 0.375
// SIM-NEXT: device 0: busy 0.210 ms (forward 0.060, backward 0.150, optimizer 0.000), idle 0.070 ms
// SIM-NEXT: device 1: busy 0.140 ms (forward 0.040, backward 0.100, optimizer 0.000), idle 0.140 ms
// TRACE: "name":"thread_name"
// TRACE-SAME: "cat":"compute","dur":30,"name":"forward","ph":"X","pid":0,"tid":0,"ts":0
// TRACE-SAME: "cat":"compute","dur":60,"name":"backward","ph":"X","pid":0,"tid":0,"ts":130
// TRACE-SAME: "cat":"compute","dur":30,"name":"recompute","ph":"X","pid":0,"tid":0,"ts":190
// TRACE-SAME: "cat":"compute","dur":60,"name":"backward","ph":"X","pid":0,"tid":0,"ts":220
// 1F1B: device 1 runs F0 B0 F1 B1, each backward after its own forward (no recompute): F0 [35,55] B0 [55,95]
// (gradient there at 100) F1 [95,115] B1 [115,155] (at 160). Device 0 runs F0 F1 B0 B1, recomputing both while
// their gradients travel: R0 [60,90] B0 [100,160] R1 [160,190] B1 [190,250]: bubble 1 - 360/500 = 0.28.
// One processor for both devices runs their work one piece at a time: the
// step is the sum of both devices' busy times above, 0.210 + 0.140 ms.
// SHARED: simulated step (cost model: 0.001 GFLOP/s per device, links 0.016 GB/s + 1 us, the devices sharing 1 processor): 0.350 ms (0.350 ms on the devices + 0.000 ms on the host), bubble 0.500
// SHARED-NEXT: device 0: busy 0.210 ms
// SHARED-NEXT: device 1: busy 0.140 ms

// ZB-H1 runs the forwards and backwards of 1F1B, W counted with the backward: device 0 recomputes
// both micro-batches, device 1 neither. So the partition (balance=work) weighs device 0's layers more and
// times both splits: [a b | c d] (30 and 70) beats [a b c | d]'s 0.240 ms. F = 15 and 35, B and W half of
// 30 and 70 each. Device 0: F0 [0,15] F1 [15,30] R0 [30,45] B0 [95,110] W0 [110,125] R1 [125,140]
// B1 [165,180] W1 [180,195]; device 1: F0 [20,55] B0 [55,90] F1 [90,125] B1 [125,160] W0 [160,195]
// W1 [195,230].
// Weights 14 and 12 (6 half forwards per micro-batch, a recompute at half a forward; a whole one gives the same split):
// 30 x 14 = 420 and 70 x 12 = 840 against their mean 630.
// SIMZB: imbalance (largest / mean stage cost): 1.400
// SIMZB-NEXT: imbalance of the devices' work (cost x cell weight 14 / 12, in half forwards): 1.333
// ZBJSON: "cell_weights": [
// ZBJSON-NEXT: 14,
// ZBJSON-NEXT: 12
// ZBJSON: "work_imbalance": 1.333
// SIMZB: simulated step ({{.*}}): 0.230 ms
// SIMZB-NEXT: device 0: busy 0.120 ms (forward 0.030, backward 0.090, optimizer 0.000)
// SIMZB-NEXT: device 1: busy 0.210 ms (forward 0.070, backward 0.140, optimizer 0.000)

// SIM1F1B: simulated step ({{.*}}): 0.250 ms (0.250 ms on the devices + 0.000 ms on the host), bubble 0.280
// The same costs measured (Inputs/profile-k2.json): sends take 4 us, a receive 1 us once its data is there, the
// latency is 0 and the host adds 400 - 300 = 100 us per step. Device 1: F0 [35,55] F1 [65,85] B1 [85,125]
// R0 [125,145] B0 [145,185]; device 0: B1 [130,190] R0 [190,220] B0 [221,281].
// PROFILE: simulated step (profile {{.*}}profile-k2.json): 0.381 ms (0.281 ms on the devices + 0.100 ms on the host), bubble 0.377
// SIMJSON: "simulation": {
// SIMJSON: "bubble_fraction": 0.28000000000000003,
// SIMJSON: "backward_us": 180,
// SIMJSON: "busy_us": 240,
// SIMJSON: "forward_us": 60,
// SIMJSON: "idle_us": 10,
// SIMJSON: "makespan_us": 250,
// SIMJSON: "source": "cost model: 0.001 GFLOP/s per device, links 0.016 GB/s + 1 us",
// SIMJSON: "step_us": 250

// TEXT: model @tiny: 2 stages, batch 4 in 2 micro-batches of rows [2, 2], objective variance
// TEXT: stage       forward cost   share      params      memory    act. sent   grad. sent  layers
// TEXT-NEXT: 0 0.000 MFLOP 60.0% 32 B 512 B 128 B 0 B a, b, c
// TEXT-NEXT: 1 0.000 MFLOP 40.0% 0 B 320 B 0 B 128 B d
// TEXT-NEXT: imbalance (largest / mean stage cost): 1.200
// TEXT-NEXT: bubble fraction: 0.333 for balanced stages (K-1)/(M+K-1), 0.375 predicted from the stage costs
// Each device keeps its two sent tensors (64 B each: 2 rows x 8 floats) until
// the waits before its optimizer step (gpipe-compile's send window of 2).
// TEXT: device resident peak arena for sends peak at
// TEXT-NEXT: 0 128 B 512 B 512 B 128 B
// TEXT-NEXT: 1 0 B 320 B 320 B 128 B

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
