// gpipe-rematerialize records the policy on every stage backward; gpipe-compile passes its remat option through.
// RUN: gpipe-opt %s -gpipe-differentiate -gpipe-rematerialize | FileCheck %s --check-prefix=FULL
// RUN: gpipe-opt %s -gpipe-differentiate -gpipe-rematerialize=policy=none | FileCheck %s --check-prefix=NONE
// RUN: gpipe-opt %s -gpipe-differentiate -gpipe-rematerialize=policy=except-last | FileCheck %s --check-prefix=LAST
// RUN: not gpipe-opt %s -gpipe-rematerialize=policy=sometimes 2>&1 | FileCheck %s --check-prefix=BAD

// FULL: gpipe.stage_backward @stage0 attributes {remat = "full"}
// NONE: gpipe.stage_backward @stage0 attributes {remat = "none"}
// LAST: gpipe.stage_backward @stage0 attributes {remat = "except-last"}
// BAD: Cannot find option named 'sometimes'
gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %s = gpipe.stage @stage0 index 0 (%x) : (tensor<2x3xf32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<2x3xf32>):
    %a = gpipe.layer "a" -> tensor<f32> {
      %0 = gpipe.relu %arg0 : tensor<2x3xf32>
      %1 = gpipe.mse_loss %0, %arg0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
      gpipe.yield %1 : tensor<f32>
    }
    gpipe.yield %a : tensor<f32>
  }
  gpipe.return %s : tensor<f32>
}
