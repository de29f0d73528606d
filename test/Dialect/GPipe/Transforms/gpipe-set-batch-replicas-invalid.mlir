// gpipe-set-batch refuses a mini-batch that its data-parallel replicas cannot share evenly, and zero replicas.
// RUN: gpipe-opt %s -gpipe-set-batch="replicas=4" -verify-diagnostics
// RUN: not gpipe-opt %s -gpipe-set-batch="batch=4 replicas=0" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ZERO

// ZERO: gpipe-set-batch expects replicas >= 1, got 0
module {
  // expected-error @+1 {{'gpipe.model' op cannot split its mini-batch of 6 rows over 4 data-parallel replicas: expected a multiple of 4 rows}}
  gpipe.model @m batch 6 {
    %x = gpipe.input "x" : tensor<6x3xf32>
    %l = gpipe.layer "loss" -> tensor<f32> {
      %0 = gpipe.mse_loss %x, %x : (tensor<6x3xf32>, tensor<6x3xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.return %l : tensor<f32>
  }
}
