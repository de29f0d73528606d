// gpipe-insert-send-recv needs stages that talk only to their neighbours, and inserts channels once.
// RUN: gpipe-opt %s -split-input-file -gpipe-insert-send-recv -verify-diagnostics

// Layers must be grouped into stages first.
gpipe.model @layers batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  // expected-error @+1 {{'gpipe.layer' op is not in a stage; run gpipe-form-stages first}}
  %a = gpipe.layer "a" -> tensor<f32> {
    %0 = gpipe.mse_loss %x, %x : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %a : tensor<f32>
}

// -----

// Stage 2 may not read stage 0 directly: gpipe-form-stages would have carried the value through stage 1.
gpipe.model @skip batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %s0 = gpipe.stage @stage0 index 0 (%x) : (tensor<2x3xf32>) -> tensor<2x3xf32> {
  ^bb0(%arg0: tensor<2x3xf32>):
    %a = gpipe.layer "a" -> tensor<2x3xf32> {
      %0 = gpipe.relu %arg0 : tensor<2x3xf32>
      gpipe.yield %0 : tensor<2x3xf32>
    }
    gpipe.yield %a : tensor<2x3xf32>
  }
  %s1 = gpipe.stage @stage1 index 1 (%s0) : (tensor<2x3xf32>) -> tensor<2x3xf32> {
  ^bb0(%arg0: tensor<2x3xf32>):
    %b = gpipe.layer "b" -> tensor<2x3xf32> {
      %0 = gpipe.relu %arg0 : tensor<2x3xf32>
      gpipe.yield %0 : tensor<2x3xf32>
    }
    gpipe.yield %b : tensor<2x3xf32>
  }
  // expected-error @+1 {{'gpipe.stage' op reads input #1 from stage 0; only adjacent stages communicate (gpipe-form-stages passes such values through the stages between)}}
  %s2 = gpipe.stage @stage2 index 2 (%s1, %s0) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<2x3xf32>, %arg1: tensor<2x3xf32>):
    %c = gpipe.layer "c" -> tensor<f32> {
      %0 = gpipe.mse_loss %arg0, %arg1 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.yield %c : tensor<f32>
  }
  gpipe.return %s2 : tensor<f32>
}

// -----

// Channels are inserted once.
gpipe.model @again batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %s0 = gpipe.stage @stage0 index 0 (%x) : (tensor<2x3xf32>) -> tensor<2x3xf32> {
  ^bb0(%arg0: tensor<2x3xf32>):
    %a = gpipe.layer "a" -> tensor<2x3xf32> {
      %0 = gpipe.relu %arg0 : tensor<2x3xf32>
      gpipe.yield %0 : tensor<2x3xf32>
    }
    gpipe.yield %a : tensor<2x3xf32>
  }
  // expected-error @+1 {{'gpipe.send' op already connects stages; channels are inserted once}}
  gpipe.send %s0 from 0 to 1 channel 0 : tensor<2x3xf32>
  %r = gpipe.recv from 0 to 1 channel 0 : tensor<2x3xf32>
  %s1 = gpipe.stage @stage1 index 1 (%r) : (tensor<2x3xf32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<2x3xf32>):
    %b = gpipe.layer "b" -> tensor<f32> {
      %0 = gpipe.mse_loss %arg0, %arg0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.yield %b : tensor<f32>
  }
  gpipe.return %s1 : tensor<f32>
}
