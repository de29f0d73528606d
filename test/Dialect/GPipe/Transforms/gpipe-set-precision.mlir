// gpipe-set-precision records the products' precision on the model; gpipe-compile's precision= runs it, the bundle records it, and without the option the model and the bundle say nothing of it.
// RUN: gpipe-opt %s -gpipe-set-precision="precision=bf16" | FileCheck %s
// RUN: gpipe-opt %examples/mlp/mlp.mlir -gpipe-compile="stages=2 microbatches=2 precision=tf32" | FileCheck %s --check-prefix=COMPILED
// RUN: gpipe-opt %examples/mlp/mlp.mlir -gpipe-compile="stages=2 microbatches=2 precision=tf32" | gpipe-translate --gpipe-to-bundle | FileCheck %s --check-prefix=BUNDLE
// RUN: gpipe-opt %examples/mlp/mlp.mlir -gpipe-compile="stages=2 microbatches=2" | gpipe-translate --gpipe-to-bundle | FileCheck %s --check-prefix=NONE

// CHECK: gpipe.model @m batch 2 attributes {gpipe.precision = "bf16"}
// COMPILED: gpipe.model @mlp batch {{[0-9]+}} attributes {{{.*}}gpipe.precision = "tf32"
// BUNDLE: "precision": "tf32"
// NONE-NOT: "precision"
gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %x, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
