// A request over the memory cap is refused at compile time, naming the device,
// its need, the shortfall and what would fit: by gpipe-partition, which sizes
// cells with the memory planner, and by gpipe-plan-memory for a schedule
// compiled without a cap. A bad cap and a program that reads a value before
// it exists are errors too.
// RUN: not gpipe-opt %s -gpipe-compile="num-stages=1 num-microbatches=2 remat=none memory-cap=800" 2>&1 | FileCheck %s --check-prefix=PART-FITS
// RUN: not gpipe-opt %s -gpipe-compile="num-stages=1 num-microbatches=2 remat=none memory-cap=660" 2>&1 | FileCheck %s --check-prefix=PART-STAGES
// RUN: not gpipe-opt %s -gpipe-compile="num-stages=3 num-microbatches=2 remat=none memory-cap=100" 2>&1 | FileCheck %s --check-prefix=PART-NONE
// RUN: gpipe-opt %s -gpipe-compile="num-stages=1 num-microbatches=2 remat=none" | not gpipe-opt -gpipe-plan-memory="memory-cap=800" 2>&1 | FileCheck %s --check-prefix=FITS
// RUN: gpipe-opt %s -gpipe-compile="num-stages=1 num-microbatches=2 remat=none" | not gpipe-opt -gpipe-plan-memory="memory-cap=660" 2>&1 | FileCheck %s --check-prefix=NOFIT
// RUN: not gpipe-opt %s -gpipe-plan-memory="memory-cap=lots" 2>&1 | FileCheck %s --check-prefix=BADCAP
// RUN: gpipe-opt %s -gpipe-compile="num-stages=1 num-microbatches=2 remat=none" | sed '/load_input "x" mb 0/d' | not gpipe-opt -gpipe-plan-memory 2>&1 | FileCheck %s --check-prefix=NOTLIVE
// A wait whose send was deleted after gpipe-compile: the plan cannot say how long the buffer lives.
// RUN: gpipe-opt %s -gpipe-compile="num-stages=2 num-microbatches=2" | sed '0,/gpipe.send_activation to 1 mb 0/{/gpipe.send_activation to 1 mb 0/d}' | not gpipe-opt -gpipe-plan-memory 2>&1 | FileCheck %s --check-prefix=NOSEND
// NOSEND: error: 'gpipe.program' op cannot be planned: op #{{[0-9]+}} (wait_send_activation): waits for a send that is not in flight

// The plan needs 944 B (gpipe-plan-memory.mlir); the partitioner's cells are
// sized by the same plan, so both refuse with the same figures. 1F1B on one
// device runs each backward right after its forward: one micro-batch in
// flight instead of two, which fits.
// PART-FITS: error: 'gpipe.model' op cannot be partitioned: no partition into 1 cell fits the memory cap of 800 bytes; the best split needs 944 B (944 bytes) on device 0 (layers 'fc1' to 'loss'), short by 144 B; it fits with schedule 1f1b, remat none and 2 micro-batches (largest device 752 B)
// PART-STAGES: error: 'gpipe.model' op cannot be partitioned: no partition into 1 cell fits the memory cap of 660 bytes; the best split needs 944 B (944 bytes) on device 0 (layers 'fc1' to 'loss'), short by 284 B; no schedule, remat policy or micro-batch count fits with 1 stage; 2 stages fit
// Every layer alone needs more than 100 B (fc1 and fc2 hold 4 x 64 B of parameter state).
// PART-NONE: error: 'gpipe.model' op cannot be partitioned: layer 'fc1' (#0) needs {{[0-9]+}} bytes on its own, more than the memory cap of 100 bytes
// FITS: error: 'gpipe.schedule' op does not fit the per-device memory cap of 800 B (800 bytes): device 0 needs 944 B (944 bytes; resident 512 B, peak at backward op 0 (mse_loss_grad) of micro-batch 1), short by 144 B; with remat none and 2 micro-batches the smallest cap that fits is 944 B (944 bytes); it fits with schedule 1f1b, remat none and 2 micro-batches (largest device 752 B)
// NOFIT: error: 'gpipe.schedule' op does not fit the per-device memory cap of 660 B (660 bytes): device 0 needs 944 B {{.*}} short by 284 B; {{.*}}; no schedule, remat policy or micro-batch count fits this partition (try more stages)
// BADCAP: error: invalid memory-cap 'lots': expected a byte count such as 1048576, 512MiB or 2GiB
// NOTLIVE: error: 'gpipe.program' op cannot be planned: op #1 (forward): forward op 1 (dense) reads value 0, which is not live

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
