// Every verifier error of the convolutional ops (conv2d, global_avg_pool, flatten).
// RUN: gpipe-opt %s --split-input-file --verify-diagnostics

// conv2d needs a [batch, height, width, channels] input.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %t = gpipe.input "t" : tensor<4xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %w = gpipe.param "w" glorot_uniform : tensor<3x3x1x4xf32>
    // expected-error @+1 {{'gpipe.conv2d' op expects a static input of rank 4 [batch, height, width, channels], got 'tensor<4x8xf32>'}}
    %0 = gpipe.conv2d %x, %w stride [1, 1] padding [0, 0] : (tensor<4x8xf32>, tensor<3x3x1x4xf32>) -> tensor<4x8xf32>
    %loss = gpipe.mse_loss %t, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A weight of rank 4 [KH, KW, C / groups, F].
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8x8x2xf32>
  %t = gpipe.input "t" : tensor<4xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %w = gpipe.param "w" glorot_uniform : tensor<3x2x4xf32>
    // expected-error @+1 {{'gpipe.conv2d' op expects a static weight of rank 4 [kernel height, kernel width, channels / groups, filters], got 'tensor<3x2x4xf32>'}}
    %0 = gpipe.conv2d %x, %w stride [1, 1] padding [0, 0] : (tensor<4x8x8x2xf32>, tensor<3x2x4xf32>) -> tensor<4x6x6x4xf32>
    %loss = gpipe.mse_loss %t, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A channel mismatch: the weight reads 3 channels, the input has 2.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8x8x2xf32>
  %t = gpipe.input "t" : tensor<4xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %w = gpipe.param "w" glorot_uniform : tensor<3x3x3x4xf32>
    // expected-error @+1 {{'gpipe.conv2d' op expects the weight to read 2 channels per group (the input's 2 channels in 1 groups), got 'tensor<3x3x3x4xf32>'}}
    %0 = gpipe.conv2d %x, %w stride [1, 1] padding [0, 0] : (tensor<4x8x8x2xf32>, tensor<3x3x3x4xf32>) -> tensor<4x6x6x4xf32>
    %loss = gpipe.mse_loss %t, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// Groups must divide the channels and the filters.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8x8x6xf32>
  %t = gpipe.input "t" : tensor<4xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %w = gpipe.param "w" glorot_uniform : tensor<3x3x2x5xf32>
    // expected-error @+1 {{'gpipe.conv2d' op expects 3 groups to divide the input's 6 channels and the weight's 5 filters}}
    %0 = gpipe.conv2d %x, %w stride [1, 1] padding [0, 0] groups 3 : (tensor<4x8x8x6xf32>, tensor<3x3x2x5xf32>) -> tensor<4x6x6x5xf32>
    %loss = gpipe.mse_loss %t, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A kernel larger than its padded input: 9 rows against 4 + 2 x 1.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x4x8x2xf32>
  %t = gpipe.input "t" : tensor<4xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %w = gpipe.param "w" glorot_uniform : tensor<9x3x2x4xf32>
    // expected-error @+1 {{'gpipe.conv2d' op expects a kernel of at most the padded input's height 6 (4 + 2 x 1), got 9}}
    %0 = gpipe.conv2d %x, %w stride [1, 1] padding [1, 1] : (tensor<4x4x8x2xf32>, tensor<9x3x2x4xf32>) -> tensor<4x1x8x4xf32>
    %loss = gpipe.mse_loss %t, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A stride of 0.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8x8x2xf32>
  %t = gpipe.input "t" : tensor<4xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %w = gpipe.param "w" glorot_uniform : tensor<3x3x2x4xf32>
    // expected-error @+1 {{'gpipe.conv2d' op expects a stride of 2 values >= 1 [rows, columns], got [0, 1]}}
    %0 = gpipe.conv2d %x, %w stride [0, 1] padding [0, 0] : (tensor<4x8x8x2xf32>, tensor<3x3x2x4xf32>) -> tensor<4x6x6x4xf32>
    %loss = gpipe.mse_loss %t, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A negative padding, or one of three values.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8x8x2xf32>
  %t = gpipe.input "t" : tensor<4xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %w = gpipe.param "w" glorot_uniform : tensor<3x3x2x4xf32>
    // expected-error @+1 {{'gpipe.conv2d' op expects a padding of 2 values >= 0 [rows, columns], got [1, 1, 1]}}
    %0 = gpipe.conv2d %x, %w stride [1, 1] padding [1, 1, 1] : (tensor<4x8x8x2xf32>, tensor<3x3x2x4xf32>) -> tensor<4x6x6x4xf32>
    %loss = gpipe.mse_loss %t, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A bias of the filters' size.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8x8x2xf32>
  %t = gpipe.input "t" : tensor<4xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %w = gpipe.param "w" glorot_uniform : tensor<3x3x2x4xf32>
    %b = gpipe.param "b" zeros : tensor<5xf32>
    // expected-error @+1 {{'gpipe.conv2d' op expects a bias of shape [4], got 'tensor<5xf32>'}}
    %0 = gpipe.conv2d %x, %w, %b stride [1, 1] padding [0, 0] : (tensor<4x8x8x2xf32>, tensor<3x3x2x4xf32>, tensor<5xf32>) -> tensor<4x6x6x4xf32>
    %loss = gpipe.mse_loss %t, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// The result's spatial size follows stride and padding: (8 + 2 - 3) / 2 + 1 = 4.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8x8x2xf32>
  %t = gpipe.input "t" : tensor<4xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %w = gpipe.param "w" glorot_uniform : tensor<3x3x2x4xf32>
    // expected-error @+1 {{'gpipe.conv2d' op expects result type 'tensor<4x4x4x4xf32>', got 'tensor<4x6x6x4xf32>'}}
    %0 = gpipe.conv2d %x, %w stride [2, 2] padding [1, 1] : (tensor<4x8x8x2xf32>, tensor<3x3x2x4xf32>) -> tensor<4x6x6x4xf32>
    %loss = gpipe.mse_loss %t, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// global_avg_pool needs an image.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8x2xf32>
  %t = gpipe.input "t" : tensor<4xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    // expected-error @+1 {{'gpipe.global_avg_pool' op expects a static input of rank 4 [batch, height, width, channels], got 'tensor<4x8x2xf32>'}}
    %0 = gpipe.global_avg_pool %x : (tensor<4x8x2xf32>) -> tensor<4x2xf32>
    %loss = gpipe.mse_loss %t, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// It averages the pixels away: [N, C].
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8x8x2xf32>
  %t = gpipe.input "t" : tensor<4xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    // expected-error @+1 {{'gpipe.global_avg_pool' op expects result type 'tensor<4x2xf32>', got 'tensor<4x8x2xf32>'}}
    %0 = gpipe.global_avg_pool %x : (tensor<4x8x8x2xf32>) -> tensor<4x8x2xf32>
    %loss = gpipe.mse_loss %t, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// flatten keeps the batch: nothing to flatten without a second dimension.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4xf32>
  %t = gpipe.input "t" : tensor<4xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    // expected-error @+1 {{'gpipe.flatten' op expects a static input of rank 2 or more [batch, ...], got 'tensor<4xf32>'}}
    %0 = gpipe.flatten %x : (tensor<4xf32>) -> tensor<4xf32>
    %loss = gpipe.mse_loss %t, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// All dimensions but the batch as one: 8 x 8 x 2 = 128.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8x8x2xf32>
  %t = gpipe.input "t" : tensor<4xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    // expected-error @+1 {{'gpipe.flatten' op expects result type 'tensor<4x128xf32>', got 'tensor<4x64xf32>'}}
    %0 = gpipe.flatten %x : (tensor<4x8x8x2xf32>) -> tensor<4x64xf32>
    %loss = gpipe.mse_loss %t, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
