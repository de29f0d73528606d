// A precision other than f32, tf32 or bf16 is refused: as the pass's option, as gpipe-compile's, and as the model's attribute.
// RUN: not gpipe-opt %examples/mlp/mlp.mlir -gpipe-set-precision="precision=fp16" -o /dev/null 2>&1 | FileCheck %s --check-prefix=OPTION
// RUN: not gpipe-opt %examples/mlp/mlp.mlir -gpipe-compile="stages=2 precision=half" -o /dev/null 2>&1 | FileCheck %s --check-prefix=COMPILE
// RUN: gpipe-opt %s -split-input-file -verify-diagnostics

// OPTION: gpipe-set-precision expects precision f32, tf32 or bf16, got 'fp16'
// COMPILE: gpipe-set-precision expects precision f32, tf32 or bf16, got 'half'

// expected-error @+1 {{expects attribute gpipe.precision to be "f32", "tf32" or "bf16", got "fp16"}}
gpipe.model @m batch 2 attributes {gpipe.precision = "fp16"} {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %x, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// expected-error @+1 {{expects attribute gpipe.precision to be "f32", "tf32" or "bf16", got 16 : i64}}
gpipe.model @m batch 2 attributes {gpipe.precision = 16} {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %x, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
