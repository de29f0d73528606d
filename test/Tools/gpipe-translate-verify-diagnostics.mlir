// gpipe-translate --verify-diagnostics checks a translation's errors against expected-* comments, one chunk at a time, and fails when one is missing.
// RUN: gpipe-translate --gpipe-emit-kernels --split-input-file --verify-diagnostics %s
// RUN: sed -e 's/expected-error/unmatched/' %s | not gpipe-translate --gpipe-emit-kernels --split-input-file --verify-diagnostics 2>&1 | FileCheck %s --check-prefix=UNEXPECTED

// UNEXPECTED: error: unexpected error: 'gpipe.model' op has no gpipe.stage to generate kernels for

// expected-error @+1 {{'gpipe.model' op has no gpipe.stage to generate kernels for; compile the model with gpipe-compile first}}
gpipe.model @raw batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.relu %x : tensor<2x3xf32>
    %1 = gpipe.mse_loss %0, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %1 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

gpipe.model @half batch 2 {
  %x = gpipe.input "x" : tensor<2x3xbf16>
  %s = gpipe.stage @stage0 index 0 (%x) : (tensor<2x3xbf16>) -> tensor<bf16> {
  ^bb0(%arg0: tensor<2x3xbf16>):
    %l = gpipe.layer "loss" -> tensor<bf16> {
      // expected-error @+1 {{fused kernels support f32 only, got element type 'bf16'}}
      %0 = gpipe.relu %arg0 : tensor<2x3xbf16>
      %1 = gpipe.mse_loss %0, %arg0 : (tensor<2x3xbf16>, tensor<2x3xbf16>) -> tensor<bf16>
      gpipe.yield %1 : tensor<bf16>
    }
    gpipe.yield %l : tensor<bf16>
  }
  gpipe.return %s : tensor<bf16>
}
