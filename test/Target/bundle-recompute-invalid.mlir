// gpipe-translate --gpipe-to-bundle pairs each recompute op and parameter reference of a stage backward with
// the forward op it copies; a backward edited so that a copy has no original is an error naming the copy.
// RUN: gpipe-opt %s -gpipe-compile="stages=2 microbatches=2" | sed -e 's/gpipe.tanh %arg0 {gpipe.recompute}/gpipe.relu %arg0 {gpipe.recompute}/' | not gpipe-translate --gpipe-to-bundle 2>&1 | FileCheck %s --check-prefix=OP
// RUN: gpipe-opt %s -gpipe-compile="stages=2 microbatches=2" | sed -e 's/gpipe.param_ref "fc2.w"/gpipe.param_ref "fc1.w"/' | not gpipe-translate --gpipe-to-bundle 2>&1 | FileCheck %s --check-prefix=PARAM
// RUN: gpipe-opt %s -gpipe-compile="stages=2 microbatches=2" | gpipe-translate --gpipe-to-bundle | FileCheck %s --check-prefix=BUNDLE

// OP: error: 'gpipe.relu' op copies no op of the forward of @stage1 after the previous copy (recompute ops copy the forward's ops, on the copies of their operands, in order)
// PARAM: error: 'gpipe.param_ref' op names no parameter of the forward of @stage1 after the previous reference

// Unedited, stage 1 recomputes the tanh and the dense (read by the gradients), not the loss.
// BUNDLE: "recompute": [
// BUNDLE: "recompute": [
// BUNDLE-NOT: "op": "mse_loss"
// BUNDLE: "op": "param",
// BUNDLE-NOT: "op": "mse_loss"
// BUNDLE: "op": "tanh",
// BUNDLE-NOT: "op": "mse_loss"
// BUNDLE: "op": "dense",
// BUNDLE-NOT: "op": "mse_loss"
// BUNDLE: "values": [
gpipe.model @two batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %y = gpipe.input "y" : tensor<4x8xf32>
  %h = gpipe.layer "fc1" -> tensor<4x8xf32> {
    %w = gpipe.param "fc1.w" glorot_uniform : tensor<8x8xf32>
    %0 = gpipe.dense %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    gpipe.yield %0 : tensor<4x8xf32>
  }
  %p = gpipe.layer "fc2" -> tensor<4x8xf32> {
    %w = gpipe.param "fc2.w" glorot_uniform : tensor<8x8xf32>
    %0 = gpipe.tanh %h : tensor<4x8xf32>
    %1 = gpipe.dense %0, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    gpipe.yield %1 : tensor<4x8xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %p, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
