// Bad gpipe-partition options end with a message and a non-zero exit, never a crash.
// RUN: not gpipe-opt %s -gpipe-partition="num-stages=2 memory-cap=12XB" 2>&1 | FileCheck %s --check-prefix=CAP
// RUN: not gpipe-opt %s -gpipe-partition="num-stages=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not gpipe-opt %s -gpipe-partition="objective=fastest" 2>&1 | FileCheck %s --check-prefix=OBJECTIVE
// RUN: not gpipe-opt %s -gpipe-partition="remat=sometimes" 2>&1 | FileCheck %s --check-prefix=REMAT
// RUN: not gpipe-opt %s -gpipe-partition="balance=evenly" 2>&1 | FileCheck %s --check-prefix=BALANCE
// RUN: gpipe-opt %s -gpipe-partition="num-stages=1 memory-cap=1KiB" | FileCheck %s --check-prefix=KIB

// CAP: error: invalid memory-cap '12XB': expected a byte count such as 1048576, 512MiB or 2GiB
// ZERO: error: 'gpipe.model' op expects stages >= 1, got 0
// OBJECTIVE: Cannot find option named 'fastest'
// REMAT: Cannot find option named 'sometimes'
// BALANCE: Cannot find option named 'evenly'
// KIB: memory_cap = 1024 : i64
gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x2xf32>
  %a = gpipe.layer "a" -> tensor<f32> attributes {cost = #gpipe.cost<flops = 1, param_bytes = 0, activation_bytes = 0>} {
    %0 = gpipe.mse_loss %x, %x : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %a : tensor<f32>
}
