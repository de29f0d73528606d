// gpipe-differentiate through slices and concats: a slice's gradient is dy
// placed at the elements it read, 0 elsewhere (gpipe.slice_grad); a concat's
// is a slice of dy per input, at that input's offset along the axis. The
// two halves of a rotation (slice, neg, concat) each get their part back,
// and an input read by two slices sums their gradients.
// RUN: gpipe-opt %s -gpipe-estimate-cost -gpipe-partition -gpipe-form-stages -gpipe-differentiate | FileCheck %s
// RUN: gpipe-opt %s -gpipe-estimate-cost | FileCheck %s --check-prefix=COST

// A slice costs per element it reads or writes, a concat per element.
// COST: gpipe.slice {{.*}}flops = 64,
// COST: gpipe.concat {{.*}}flops = 64,

// CHECK-LABEL: gpipe.stage_backward @stage0
// CHECK: %[[DY:.*]] = gpipe.mse_loss_grad
// CHECK: %[[DEV:.*]] = gpipe.slice_grad %{{.*}} starts [0, 1, 0] steps [1, 2, 3] : tensor<2x2x3xf32> -> tensor<2x4x8xf32>
// CHECK: %[[DR:.*]] = gpipe.add %[[DY]], %[[DEV]] : tensor<2x4x8xf32>
// CHECK: %[[DN:.*]] = gpipe.slice %[[DR]] starts [0, 0, 0] steps [1, 1, 1] : tensor<2x4x8xf32> -> tensor<2x4x4xf32>
// CHECK: %[[DLO:.*]] = gpipe.slice %[[DR]] starts [0, 0, 4] steps [1, 1, 1] : tensor<2x4x8xf32> -> tensor<2x4x4xf32>
// CHECK: %[[DHI:.*]] = gpipe.neg %[[DN]] : tensor<2x4x4xf32>
// CHECK: %[[G1:.*]] = gpipe.slice_grad %[[DHI]] starts [0, 0, 4] steps [1, 1, 1] : tensor<2x4x4xf32> -> tensor<2x4x8xf32>
// CHECK: %[[G0:.*]] = gpipe.slice_grad %[[DLO]] starts [0, 0, 0] steps [1, 1, 1] : tensor<2x4x4xf32> -> tensor<2x4x8xf32>
// CHECK: gpipe.add %[[G1]], %[[G0]] : tensor<2x4x8xf32>
gpipe.model @rope batch 2 {
  %x = gpipe.input "x" : tensor<2x4x8xf32>
  %y = gpipe.layer "rot" -> tensor<2x4x8xf32> {
    %w = gpipe.param "w" normal : tensor<4x8xf32>
    %0 = gpipe.mul %x, %w : tensor<2x4x8xf32>, tensor<4x8xf32> -> tensor<2x4x8xf32>
    %lo = gpipe.slice %0 starts [0, 0, 0] steps [1, 1, 1] : tensor<2x4x8xf32> -> tensor<2x4x4xf32>
    %hi = gpipe.slice %0 starts [0, 0, 4] steps [1, 1, 1] : tensor<2x4x8xf32> -> tensor<2x4x4xf32>
    %n = gpipe.neg %hi : tensor<2x4x4xf32>
    %r = gpipe.concat %n, %lo axis 2 : tensor<2x4x4xf32>, tensor<2x4x4xf32> -> tensor<2x4x8xf32>
    %ev = gpipe.slice %r starts [0, 1, 0] steps [1, 2, 3] : tensor<2x4x8xf32> -> tensor<2x2x3xf32>
    %e = gpipe.exp %ev : tensor<2x2x3xf32>
    %s = gpipe.reduce_sum %e axes [1, 2] : tensor<2x2x3xf32> -> tensor<2x1x1xf32>
    %out = gpipe.add %r, %s : tensor<2x4x8xf32>, tensor<2x1x1xf32> -> tensor<2x4x8xf32>
    gpipe.yield %out : tensor<2x4x8xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %y, %x : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
