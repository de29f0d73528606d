// gpipe-translate writes a bundle only for a schedule whose memory gpipe-plan-memory planned: the runtime places every
// buffer where the compiler put it and plans nothing itself.
// RUN: gpipe-opt %s -gpipe-estimate-cost -gpipe-partition -gpipe-form-stages -gpipe-differentiate -gpipe-rematerialize -gpipe-insert-send-recv -gpipe-unroll-schedule | not gpipe-translate --gpipe-to-bundle 2>&1 | FileCheck %s

// A device past the 100,000 buffers whose placement a bundle carries is refused too, not written without one.
// RUN: gpipe-opt %examples/mlp/mlp.mlir -gpipe-compile="num-stages=1 num-microbatches=2000 batch-size=2000" | not gpipe-translate --gpipe-to-bundle 2>&1 | FileCheck %s --check-prefix=LARGE
// LARGE: error: 'gpipe.program' op has 109982 buffers, more than the 100000 whose placement a bundle carries per device; use more stages or fewer micro-batches

// CHECK: error: 'gpipe.program' op has no gpipe.memory plan; run gpipe-plan-memory first (gpipe-compile does): the runtime places buffers only where the compiler planned them
gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %y = gpipe.input "y" : tensor<2xi32>
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.softmax_cross_entropy %x, %y : (tensor<2x3xf32>, tensor<2xi32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
