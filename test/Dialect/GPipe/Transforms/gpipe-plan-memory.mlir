// gpipe-plan-memory replays each device's unrolled program with the runtime's
// allocation rules and records the plan on each gpipe.program.
// RUN: gpipe-opt %s -gpipe-compile="num-stages=1 num-microbatches=2 remat=none" | FileCheck %s --check-prefix=NONE
// RUN: gpipe-opt %s -gpipe-compile="num-stages=1 num-microbatches=2 remat=full" | FileCheck %s --check-prefix=FULL
// RUN: gpipe-opt %s -gpipe-compile="num-stages=1 num-microbatches=2 remat=full optimizer-slots=0" | FileCheck %s --check-prefix=SGD
// RUN: gpipe-opt %s -gpipe-compile="num-stages=2 num-microbatches=2 remat=full" | FileCheck %s --check-prefix=K2
// RUN: gpipe-opt %s -gpipe-compile="num-stages=1 num-microbatches=2 remat=none" -gpipe-report -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: gpipe-opt %s -gpipe-compile="num-stages=1 num-microbatches=2 remat=none" -gpipe-report=format=json -o /dev/null | FileCheck %s --check-prefix=JSON

// Batch 6 in 2 micro-batches of 3 rows. Every value is 4 floats per row
// (16 B/row, 48 B per micro-batch); the loss is one float. Resident: two 4x4
// weights with gradients and two Adam slots, 2 x 64 B x 4 = 512 B.
//
// remat none keeps what the backward reads (x, y, h, o: 192 B per
// micro-batch). fc1's input gradient (its input is the model's x) is neither
// computed nor given a buffer: 7 buffers per micro-batch. The peak is at the first backward (micro-batch 1):
// mb 0's 192 B + mb 1's 192 B + d(o) 48 B = 432 B, plus 512 resident = 944.
// NONE: gpipe.program device 0 attributes {gpipe.memory = {arena_bytes = 944 : i64, num_buffers = 14 : i64, optimizer_slots = 2 : i64, peak_at = "backward op 0 (mse_loss_grad) of micro-batch 1", peak_bytes = 944 : i64, peak_op = 6 : i64, resident_bytes = 512 : i64, send_held_bytes = 0 : i64}
// The placement for the runtime: [bytes, offset, start, end, instr, microbatch, value] per buffer, in the order the
// program defines them. The first is x of micro-batch 0 (value 0), loaded by instruction 0: 48 B at offset 0.
// NONE-SAME: gpipe.placement = array<i64: 48, 0, 0, {{[0-9]+}}, 0, 0, 0, {{([0-9]+, ){90}[0-9]+}}>
//
// remat full stashes the stage inputs (x, y: 96 B per micro-batch), but
// micro-batch 1's backward follows its own forward, so it keeps x, y, h, o
// (no recompute: 3 buffers fewer) in the place the recompute would take. At
// the first backward: mb 0's stash 96 + mb 1's 192 + d(o) 48 = 336 B, plus
// 512 = 848, as when it recomputed. Micro-batch 0's recompute rebuilds h and o
// but not the loss, which mse_loss_grad does not read: 2 buffers, 16 in all.
// FULL: gpipe.program device 0 attributes {gpipe.memory = {arena_bytes = 848 : i64, num_buffers = 16 : i64, optimizer_slots = 2 : i64, peak_at = "backward op 0 (mse_loss_grad) of micro-batch 1", peak_bytes = 848 : i64, peak_op = 6 : i64, resident_bytes = 512 : i64, send_held_bytes = 0 : i64}
//
// SGD keeps no optimizer slots: resident 2 x 64 B x 2 = 256 B.
// SGD: gpipe.memory = {arena_bytes = 592 : i64, {{.*}} peak_bytes = 592 : i64, {{.*}} resident_bytes = 256 : i64, send_held_bytes = 0 : i64}
//
// Two devices: device 0 holds fc1 (resident 256 B) and stashes x; its output
// h leaves with its send.
// K2: gpipe.program device 0 attributes {gpipe.memory = {{{.*}}resident_bytes = 256 : i64, send_held_bytes = {{[0-9]+}} : i64}
// K2: gpipe.program device 1 attributes {gpipe.memory = {{{.*}}resident_bytes = 256 : i64, send_held_bytes = {{[0-9]+}} : i64}
//
// gpipe-report prints the plan.
// REPORT: memory plan (per device, before anything runs):
// REPORT-NEXT: device resident peak arena for sends peak at
// REPORT-NEXT: 0 512 B 944 B 944 B 0 B backward op 0 (mse_loss_grad) of micro-batch 1
// JSON: "memory_plan": {
// JSON-NEXT: "arena_bytes": 944,
// JSON-NEXT: "peak_at": "backward op 0 (mse_loss_grad) of micro-batch 1",
// JSON-NEXT: "peak_bytes": 944,
// JSON-NEXT: "resident_bytes": 512,
// JSON-NEXT: "send_held_bytes": 0

gpipe.model @two batch 6 {
  %x = gpipe.input "x" : tensor<6x4xf32>
  %y = gpipe.input "y" : tensor<6x4xf32>
  %h = gpipe.layer "fc1" -> tensor<6x4xf32> {
    %w = gpipe.param "fc1.w" glorot_uniform : tensor<4x4xf32>
    %0 = gpipe.dense %x, %w : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
    gpipe.yield %0 : tensor<6x4xf32>
  }
  %o = gpipe.layer "fc2" -> tensor<6x4xf32> {
    %w = gpipe.param "fc2.w" glorot_uniform : tensor<4x4xf32>
    %0 = gpipe.dense %h, %w : (tensor<6x4xf32>, tensor<4x4xf32>) -> tensor<6x4xf32>
    gpipe.yield %0 : tensor<6x4xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %o, %y : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
