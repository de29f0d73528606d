// gpipe-set-batch refuses a batch below 1 and a model already cut into stages.
// RUN: gpipe-opt %s -split-input-file -gpipe-%s -split-input-file -gpipe-set-batch="batch=0" -verify-diagnostics
// RUN: not gpipe-opt %examples/mlp/mlp.mlir -gpipe-compile="num-stages=2" -gpipe-set-batch="batch=8" -o /dev/null 2>&1 | FileCheck %s --check-prefix=STAGED

// expected-error @+1 {{gpipe-set-batch expects batch >= 1, got 0}}
module {
  gpipe.model @m batch 2 {
    %x = gpipe.input "x" : tensor<2x3xf32>
    %l = gpipe.layer "loss" -> tensor<f32> {
      %0 = gpipe.mse_loss %x, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.return %l : tensor<f32>
  }
}

// STAGED: cannot be rebatched; gpipe-set-batch="batch=0" -verify-diagnostics
// RUN: not gpipe-opt %examples/mlp/mlp.mlir -gpipe-compile="num-stages=2" -gpipe-set-batch="batch=8" -o /dev/null 2>&1 | FileCheck %s --check-prefix=STAGED

// expected-error @+1 {{gpipe-set-batch expects batch >= 1, got 0}}
module {
  gpipe.model @m batch 2 {
    %x = gpipe.input "x" : tensor<2x3xf32>
    %l = gpipe.layer "loss" -> tensor<f32> {
      %0 = gpipe.mse_loss %x, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpip