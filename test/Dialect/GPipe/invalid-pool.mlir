// Every verifier error of the pools and of the gradient ops over images (conv2d_grad, the pools', global_avg_pool_grad, flatten_grad).
// RUN: gpipe-opt %s --split-input-file --verify-diagnostics

// A pool's window is 2 sizes >= 1.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8x8x2xf32>
  %t = gpipe.input "t" : tensor<4xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    // expected-error @+1 {{'gpipe.max_pool2d' op expects a window of 2 values >= 1 [rows, columns], got [0, 2]}}
    %0 = gpipe.max_pool2d %x window [0, 2] stride [1, 1] padding [0, 0] : (tensor<4x8x8x2xf32>) -> tensor<4x8x7x2xf32>
    %loss = gpipe.mse_loss %t, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A stride of 2 values >= 1.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8x8x2xf32>
  %t = gpipe.input "t" : tensor<4xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    // expected-error @+1 {{'gpipe.avg_pool2d' op expects a stride of 2 values >= 1 [rows, columns], got [2]}}
    %0 = gpipe.avg_pool2d %x window [2, 2] stride [2] padding [0, 0] : (tensor<4x8x8x2xf32>) -> tensor<4x4x4x2xf32>
    %loss = gpipe.mse_loss %t, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// Padding as large as the window would give windows of padding only.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8x8x2xf32>
  %t = gpipe.input "t" : tensor<4xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    // expected-error @+1 {{'gpipe.max_pool2d' op expects padding smaller than the window (2), got 2}}
    %0 = gpipe.max_pool2d %x window [2, 2] stride [2, 2] padding [2, 0] : (tensor<4x8x8x2xf32>) -> tensor<4x6x4x2xf32>
    %loss = gpipe.mse_loss %t, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A window larger than the padded input.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8x8x2xf32>
  %t = gpipe.input "t" : tensor<4xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    // expected-error @+1 {{'gpipe.avg_pool2d' op expects a window of at most the padded input's width 10 (8 + 2 x 1), got 12}}
    %0 = gpipe.avg_pool2d %x window [3, 12] stride [1, 1] padding [1, 1] : (tensor<4x8x8x2xf32>) -> tensor<4x8x1x2xf32>
    %loss = gpipe.mse_loss %t, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// Pools need [batch, height, width, channels].
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8x8xf32>
  %t = gpipe.input "t" : tensor<4xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    // expected-error @+1 {{'gpipe.max_pool2d' op expects a static input of rank 4 [batch, height, width, channels], got 'tensor<4x8x8xf32>'}}
    %0 = gpipe.max_pool2d %x window [2, 2] stride [2, 2] padding [0, 0] : (tensor<4x8x8xf32>) -> tensor<4x4x4xf32>
    %loss = gpipe.mse_loss %t, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// The result's shape follows from the window.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8x8x2xf32>
  %t = gpipe.input "t" : tensor<4xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    // expected-error @+1 {{'gpipe.max_pool2d' op expects result type 'tensor<4x4x4x2xf32>', got 'tensor<4x3x3x2xf32>'}}
    %0 = gpipe.max_pool2d %x window [3, 3] stride [2, 2] padding [1, 1] : (tensor<4x8x8x2xf32>) -> tensor<4x3x3x2xf32>
    %loss = gpipe.mse_loss %t, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// conv2d_grad's dy has the forward result's shape.
gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x4x4x2xf32>
  %s = gpipe.stage @stage0 index 0 (%x) : (tensor<2x4x4x2xf32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<2x4x4x2xf32>):
    %a = gpipe.layer "a" -> tensor<f32> {
      %0 = gpipe.mse_loss %arg0, %arg0 : (tensor<2x4x4x2xf32>, tensor<2x4x4x2xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.yield %a : tensor<f32>
  }
  gpipe.stage_backward @stage0 : (tensor<2x4x4x2xf32>) -> () {
  ^bb0(%arg0: tensor<2x4x4x2xf32>):
    %w = gpipe.param_ref "w" : tensor<3x3x2x4xf32>
    %dy = gpipe.zeros : tensor<2x4x4x4xf32>
    // expected-error @+1 {{'gpipe.conv2d_grad' op expects dy of type 'tensor<2x2x2x4xf32>', got 'tensor<2x4x4x4xf32>'}}
    %dx, %dw = gpipe.conv2d_grad %dy, %arg0, %w stride [2, 2] padding [1, 1] : (tensor<2x4x4x4xf32>, tensor<2x4x4x2xf32>, tensor<3x3x2x4xf32>) -> (tensor<2x4x4x2xf32>, tensor<3x3x2x4xf32>)
    gpipe.yield
  }
  gpipe.return %s : tensor<f32>
}

// -----

// conv2d_grad's dw has the weight's type.
gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x4x4x2xf32>
  %s = gpipe.stage @stage0 index 0 (%x) : (tensor<2x4x4x2xf32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<2x4x4x2xf32>):
    %a = gpipe.layer "a" -> tensor<f32> {
      %0 = gpipe.mse_loss %arg0, %arg0 : (tensor<2x4x4x2xf32>, tensor<2x4x4x2xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.yield %a : tensor<f32>
  }
  gpipe.stage_backward @stage0 : (tensor<2x4x4x2xf32>) -> () {
  ^bb0(%arg0: tensor<2x4x4x2xf32>):
    %w = gpipe.param_ref "w" : tensor<3x3x2x4xf32>
    %dy = gpipe.zeros : tensor<2x4x4x4xf32>
    // expected-error @+1 {{'gpipe.conv2d_grad' op expects dw of type 'tensor<3x3x2x4xf32>', got 'tensor<3x3x4x2xf32>'}}
    %dx, %dw = gpipe.conv2d_grad %dy, %arg0, %w stride [1, 1] padding [1, 1] : (tensor<2x4x4x4xf32>, tensor<2x4x4x2xf32>, tensor<3x3x2x4xf32>) -> (tensor<2x4x4x2xf32>, tensor<3x3x4x2xf32>)
    gpipe.yield
  }
  gpipe.return %s : tensor<f32>
}

// -----

// conv2d_grad checks its weight as conv2d does: a channel mismatch.
gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x4x4x2xf32>
  %s = gpipe.stage @stage0 index 0 (%x) : (tensor<2x4x4x2xf32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<2x4x4x2xf32>):
    %a = gpipe.layer "a" -> tensor<f32> {
      %0 = gpipe.mse_loss %arg0, %arg0 : (tensor<2x4x4x2xf32>, tensor<2x4x4x2xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.yield %a : tensor<f32>
  }
  gpipe.stage_backward @stage0 : (tensor<2x4x4x2xf32>) -> () {
  ^bb0(%arg0: tensor<2x4x4x2xf32>):
    %w = gpipe.param_ref "w" : tensor<3x3x3x4xf32>
    %dy = gpipe.zeros : tensor<2x4x4x4xf32>
    // expected-error @+1 {{'gpipe.conv2d_grad' op expects the weight to read 2 channels per group (the input's 2 channels in 1 groups), got 'tensor<3x3x3x4xf32>'}}
    %dx, %dw = gpipe.conv2d_grad %dy, %arg0, %w stride [1, 1] padding [1, 1] : (tensor<2x4x4x4xf32>, tensor<2x4x4x2xf32>, tensor<3x3x3x4xf32>) -> (tensor<2x4x4x2xf32>, tensor<3x3x3x4xf32>)
    gpipe.yield
  }
  gpipe.return %s : tensor<f32>
}

// -----

// max_pool2d_grad's dx has the input's type.
gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x4x4x2xf32>
  %s = gpipe.stage @stage0 index 0 (%x) : (tensor<2x4x4x2xf32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<2x4x4x2xf32>):
    %a = gpipe.layer "a" -> tensor<f32> {
      %0 = gpipe.mse_loss %arg0, %arg0 : (tensor<2x4x4x2xf32>, tensor<2x4x4x2xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.yield %a : tensor<f32>
  }
  gpipe.stage_backward @stage0 : (tensor<2x4x4x2xf32>) -> () {
  ^bb0(%arg0: tensor<2x4x4x2xf32>):
    %dy = gpipe.zeros : tensor<2x2x2x2xf32>
    // expected-error @+1 {{'gpipe.max_pool2d_grad' op expects dx of type 'tensor<2x4x4x2xf32>', got 'tensor<2x2x2x2xf32>'}}
    %dx = gpipe.max_pool2d_grad %dy, %arg0 window [2, 2] stride [2, 2] padding [0, 0] : (tensor<2x2x2x2xf32>, tensor<2x4x4x2xf32>) -> tensor<2x2x2x2xf32>
    gpipe.yield
  }
  gpipe.return %s : tensor<f32>
}

// -----

// avg_pool2d_grad's dy has the pooled shape of dx.
gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x4x4x2xf32>
  %s = gpipe.stage @stage0 index 0 (%x) : (tensor<2x4x4x2xf32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<2x4x4x2xf32>):
    %a = gpipe.layer "a" -> tensor<f32> {
      %0 = gpipe.mse_loss %arg0, %arg0 : (tensor<2x4x4x2xf32>, tensor<2x4x4x2xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.yield %a : tensor<f32>
  }
  gpipe.stage_backward @stage0 : (tensor<2x4x4x2xf32>) -> () {
  ^bb0(%arg0: tensor<2x4x4x2xf32>):
    %dy = gpipe.zeros : tensor<2x3x3x2xf32>
    // expected-error @+1 {{'gpipe.avg_pool2d_grad' op expects dy of type 'tensor<2x2x2x2xf32>', got 'tensor<2x3x3x2xf32>'}}
    %dx = gpipe.avg_pool2d_grad %dy window [2, 2] stride [2, 2] padding [0, 0] : (tensor<2x3x3x2xf32>) -> tensor<2x4x4x2xf32>
    gpipe.yield
  }
  gpipe.return %s : tensor<f32>
}

// -----

// global_avg_pool_grad's dx is an image.
gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x4x4x2xf32>
  %s = gpipe.stage @stage0 index 0 (%x) : (tensor<2x4x4x2xf32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<2x4x4x2xf32>):
    %a = gpipe.layer "a" -> tensor<f32> {
      %0 = gpipe.mse_loss %arg0, %arg0 : (tensor<2x4x4x2xf32>, tensor<2x4x4x2xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.yield %a : tensor<f32>
  }
  gpipe.stage_backward @stage0 : (tensor<2x4x4x2xf32>) -> () {
  ^bb0(%arg0: tensor<2x4x4x2xf32>):
    %dy = gpipe.zeros : tensor<2x2xf32>
    // expected-error @+1 {{'gpipe.global_avg_pool_grad' op expects a static dx of rank 4 [batch, height, width, channels], got 'tensor<2x8xf32>'}}
    %dx = gpipe.global_avg_pool_grad %dy : (tensor<2x2xf32>) -> tensor<2x8xf32>
    gpipe.yield
  }
  gpipe.return %s : tensor<f32>
}

// -----

// flatten_grad's dy is dx flattened.
gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x4x4x2xf32>
  %s = gpipe.stage @stage0 index 0 (%x) : (tensor<2x4x4x2xf32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<2x4x4x2xf32>):
    %a = gpipe.layer "a" -> tensor<f32> {
      %0 = gpipe.mse_loss %arg0, %arg0 : (tensor<2x4x4x2xf32>, tensor<2x4x4x2xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.yield %a : tensor<f32>
  }
  gpipe.stage_backward @stage0 : (tensor<2x4x4x2xf32>) -> () {
  ^bb0(%arg0: tensor<2x4x4x2xf32>):
    %dy = gpipe.zeros : tensor<2x16xf32>
    // expected-error @+1 {{'gpipe.flatten_grad' op expects dy of type 'tensor<2x32xf32>', got 'tensor<2x16xf32>'}}
    %dx = gpipe.flatten_grad %dy : (tensor<2x16xf32>) -> tensor<2x4x4x2xf32>
    gpipe.yield
  }
  gpipe.return %s : tensor<f32>
}
