// gpipe-differentiate over images: conv2d (its bias through bias_grad, groups and strides kept), both pools, global average pooling and flatten get their gradient ops, shaped as what they are the gradients of.
// RUN: gpipe-opt %s -gpipe-differentiate --verify-roundtrip | FileCheck %s

// CHECK-LABEL: gpipe.stage_backward @stage0
// CHECK: %[[C:.*]] = gpipe.conv2d %[[X:.*]], %[[W:.*]], %{{.*}} stride [1, 1] padding [1, 1] {gpipe.recompute}
// CHECK: %[[DC:.*]] = gpipe.max_pool2d_grad %[[DOUT:.*]], %[[C]] window [3, 3] stride [2, 2] padding [1, 1] : (tensor<2x3x3x4xf32>, tensor<2x6x5x4xf32>) -> tensor<2x6x5x4xf32>
// CHECK-NEXT: %{{.*}}, %[[DW:.*]] = gpipe.conv2d_grad %[[DC]], %[[X]], %[[W]] stride [1, 1] padding [1, 1] : (tensor<2x6x5x4xf32>, tensor<2x6x5x2xf32>, tensor<3x3x2x4xf32>) -> (tensor<2x6x5x2xf32>, tensor<3x3x2x4xf32>)
// CHECK-NEXT: gpipe.accumulate_grad "w", %[[DW]]
// CHECK-NEXT: %[[DB:.*]] = gpipe.bias_grad %[[DC]] : (tensor<2x6x5x4xf32>) -> tensor<4xf32>
// CHECK-NEXT: gpipe.accumulate_grad "b", %[[DB]]
// CHECK-LABEL: gpipe.stage_backward @stage1
// CHECK: %[[DL:.*]] = gpipe.softmax_cross_entropy_grad
// CHECK-NEXT: %[[DFLAT:.*]], %{{.*}} = gpipe.dense_grad %[[DL]]
// CHECK-NEXT: gpipe.accumulate_grad "u"
// CHECK-NEXT: %[[D1:.*]] = gpipe.flatten_grad %[[DFLAT]] : (tensor<2x8xf32>) -> tensor<2x1x2x4xf32>
// CHECK-NEXT: %[[D2:.*]] = gpipe.global_avg_pool_grad %[[DL]] : (tensor<2x4xf32>) -> tensor<2x1x2x4xf32>
// CHECK-NEXT: %[[DP:.*]] = gpipe.add %[[D1]], %[[D2]] : tensor<2x1x2x4xf32>
// CHECK-NEXT: %[[DA:.*]] = gpipe.avg_pool2d_grad %[[DP]] window [2, 2] stride [1, 2] padding [0, 0] : (tensor<2x1x2x4xf32>) -> tensor<2x2x4x4xf32>
// CHECK-NEXT: %[[DX:.*]], %[[DV:.*]] = gpipe.conv2d_grad %[[DA]], %{{.*}}, %{{.*}} stride [2, 1] padding [1, 1] groups 2 : (tensor<2x2x4x4xf32>, tensor<2x3x3x4xf32>, tensor<2x2x2x4xf32>) -> (tensor<2x3x3x4xf32>, tensor<2x2x2x4xf32>)
// CHECK-NEXT: gpipe.accumulate_grad "v", %[[DV]]
// CHECK-NEXT: gpipe.yield %[[DX]] : tensor<2x3x3x4xf32>
gpipe.model @cnn batch 2 {
  %x = gpipe.input "x" : tensor<2x6x5x2xf32>
  %y = gpipe.input "y" : tensor<2xi32>
  %s0 = gpipe.stage @stage0 index 0 (%x) : (tensor<2x6x5x2xf32>) -> tensor<2x3x3x4xf32> {
  ^bb0(%arg0: tensor<2x6x5x2xf32>):
    %h = gpipe.layer "conv" -> tensor<2x3x3x4xf32> {
      %w = gpipe.param "w" glorot_uniform : tensor<3x3x2x4xf32>
      %b = gpipe.param "b" zeros : tensor<4xf32>
      %0 = gpipe.conv2d %arg0, %w, %b stride [1, 1] padding [1, 1] : (tensor<2x6x5x2xf32>, tensor<3x3x2x4xf32>, tensor<4xf32>) -> tensor<2x6x5x4xf32>
      %1 = gpipe.max_pool2d %0 window [3, 3] stride [2, 2] padding [1, 1] : (tensor<2x6x5x4xf32>) -> tensor<2x3x3x4xf32>
      gpipe.yield %1 : tensor<2x3x3x4xf32>
    }
    gpipe.yield %h : tensor<2x3x3x4xf32>
  }
  %s1 = gpipe.stage @stage1 index 1 (%s0, %y) : (tensor<2x3x3x4xf32>, tensor<2xi32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<2x3x3x4xf32>, %arg1: tensor<2xi32>):
    %l = gpipe.layer "head" -> tensor<f32> {
      %v = gpipe.param "v" glorot_uniform : tensor<2x2x2x4xf32>
      %0 = gpipe.conv2d %arg0, %v stride [2, 1] padding [1, 1] groups 2 : (tensor<2x3x3x4xf32>, tensor<2x2x2x4xf32>) -> tensor<2x2x4x4xf32>
      %1 = gpipe.avg_pool2d %0 window [2, 2] stride [1, 2] padding [0, 0] : (tensor<2x2x4x4xf32>) -> tensor<2x1x2x4xf32>
      %2 = gpipe.global_avg_pool %1 : (tensor<2x1x2x4xf32>) -> tensor<2x4xf32>
      %3 = gpipe.flatten %1 : (tensor<2x1x2x4xf32>) -> tensor<2x8xf32>
      %u = gpipe.param "u" glorot_uniform : tensor<8x4xf32>
      %4 = gpipe.dense %3, %u : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
      %5 = gpipe.add %2, %4 : tensor<2x4xf32>
      %6 = gpipe.softmax_cross_entropy %5, %arg1 : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
      gpipe.yield %6 : tensor<f32>
    }
    gpipe.yield %l : tensor<f32>
  }
  gpipe.return %s1 : tensor<f32>
}
