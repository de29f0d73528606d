// gpipe-set-batch with replicas=R (data parallelism) gives the model the mini-batch's R-th part: its own batch (batch=0) or the given one, divided by R.
// RUN: gpipe-opt %s -gpipe-set-batch="replicas=2" | FileCheck %s
// RUN: gpipe-opt %s -gpipe-set-batch="batch=12 replicas=3" | FileCheck %s --check-prefix=GIVEN

// CHECK: gpipe.model @m batch 3
// CHECK: gpipe.input "x" : tensor<3x3xf32>
// GIVEN: gpipe.model @m batch 4
// GIVEN: gpipe.input "x" : tensor<4x3xf32>
module {
  gpipe.model @m batch 6 {
    %x = gpipe.input "x" : tensor<6x3xf32>
    %l = gpipe.layer "loss" -> tensor<f32> {
      %0 = gpipe.mse_loss %x, %x : (tensor<6x3xf32>, tensor<6x3xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.return %l : tensor<f32>
  }
}
