// gpipe-translate --gpipe-to-bundle needs a compiled model with one schedule, and data types the runtime reads.
// RUN: not gpipe-translate --gpipe-to-bundle %s 2>&1 | FileCheck %s --check-prefix=RAW
// RUN: gpipe-opt %s -gpipe-compile | not gpipe-translate --gpipe-to-bundle 2>&1 | FileCheck %s --check-prefix=I64

// RAW: error: expects exactly one gpipe.schedule to write as a bundle, found 0; compile the model with gpipe-compile
// I64: error: 'gpipe.input' op has element type 'i64'; the runtime reads f32 data and i32 ids or labels
gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %y = gpipe.input "y" : tensor<2xi64>
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.softmax_cross_entropy %x, %y : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
