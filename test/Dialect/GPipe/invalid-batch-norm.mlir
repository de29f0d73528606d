// Every verifier error of batch_norm and batch_norm_grad.
// RUN: gpipe-opt %s --split-input-file --verify-diagnostics

// batch_norm normalises [batch, features] or [batch, height, width, channels]: not rank 3.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8x2xf32>
  %t = gpipe.input "t" : tensor<4xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %g = gpipe.param "g" ones : tensor<2xf32>
    %b = gpipe.param "b" zeros : tensor<2xf32>
    %mean = gpipe.param "mean" zeros : tensor<2xf32>
    %var = gpipe.param "var" ones : tensor<2xf32>
    // expected-error @+1 {{'gpipe.batch_norm' op expects a static input of rank 2 [batch, features] or 4 [batch, height, width, channels], got 'tensor<4x8x2xf32>'}}
    %0 = gpipe.batch_norm %x, %g, %b, %mean, %var : (tensor<4x8x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<4x8x2xf32>
    %loss = gpipe.mse_loss %t, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// One gamma, beta and running statistic per channel.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8x8x2xf32>
  %t = gpipe.input "t" : tensor<4xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %g = gpipe.param "g" ones : tensor<2xf32>
    %b = gpipe.param "b" zeros : tensor<2xf32>
    %mean = gpipe.param "mean" zeros : tensor<2xf32>
    %var = gpipe.param "var" ones : tensor<2xf32>
    %v3 = gpipe.param "v3" ones : tensor<3xf32>
    // expected-error @+1 {{'gpipe.batch_norm' op expects the running variance of shape [2] (the input's channels), got 'tensor<3xf32>'}}
    %0 = gpipe.batch_norm %x, %g, %b, %mean, %v3 : (tensor<4x8x8x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<3xf32>) -> tensor<4x8x8x2xf32>
    %loss = gpipe.mse_loss %t, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// The running statistics are parameters (the optimizer skips them; the runtime updates them).
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8x8x2xf32>
  %t = gpipe.input "t" : tensor<4xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %g = gpipe.param "g" ones : tensor<2xf32>
    %b = gpipe.param "b" zeros : tensor<2xf32>
    %mean = gpipe.param "mean" zeros : tensor<2xf32>
    %var = gpipe.param "var" ones : tensor<2xf32>
    %computed = gpipe.relu %mean : tensor<2xf32>
    // expected-error @+1 {{'gpipe.batch_norm' op expects the running mean to be a gpipe.param, got a value defined by gpipe.relu}}
    %0 = gpipe.batch_norm %x, %g, %b, %computed, %var : (tensor<4x8x8x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<4x8x8x2xf32>
    %loss = gpipe.mse_loss %t, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A momentum in [0, 1].
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8x8x2xf32>
  %t = gpipe.input "t" : tensor<4xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %g = gpipe.param "g" ones : tensor<2xf32>
    %b = gpipe.param "b" zeros : tensor<2xf32>
    %mean = gpipe.param "mean" zeros : tensor<2xf32>
    %var = gpipe.param "var" ones : tensor<2xf32>
    // expected-error @+1 {{'gpipe.batch_norm' op expects a momentum in [0, 1], got 1.5}}
    %0 = gpipe.batch_norm %x, %g, %b, %mean, %var {momentum = 1.5 : f64} : (tensor<4x8x8x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<4x8x8x2xf32>
    %loss = gpipe.mse_loss %t, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A positive epsilon.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8x8x2xf32>
  %t = gpipe.input "t" : tensor<4xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %g = gpipe.param "g" ones : tensor<2xf32>
    %b = gpipe.param "b" zeros : tensor<2xf32>
    %mean = gpipe.param "mean" zeros : tensor<2xf32>
    %var = gpipe.param "var" ones : tensor<2xf32>
    // expected-error @+1 {{'gpipe.batch_norm' op expects a positive epsilon, got 0}}
    %0 = gpipe.batch_norm %x, %g, %b, %mean, %var {epsilon = 0.0 : f64} : (tensor<4x8x8x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<4x8x8x2xf32>
    %loss = gpipe.mse_loss %t, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// batch_norm_grad's dgamma has gamma's type.
gpipe.model @m batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %s = gpipe.stage @stage0 index 0 (%x) : (tensor<2x3xf32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<2x3xf32>):
    %a = gpipe.layer "a" -> tensor<f32> {
      %0 = gpipe.mse_loss %arg0, %arg0 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.yield %a : tensor<f32>
  }
  gpipe.stage_backward @stage0 : (tensor<2x3xf32>) -> () {
  ^bb0(%arg0: tensor<2x3xf32>):
    %g = gpipe.param_ref "g" : tensor<3xf32>
    %dy = gpipe.zeros : tensor<2x3xf32>
    // expected-error @+1 {{'gpipe.batch_norm_grad' op expects dgamma of type 'tensor<3xf32>', got 'tensor<2x3xf32>'}}
    %dx, %dg, %db = gpipe.batch_norm_grad %dy, %arg0, %arg0, %g : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xf32>)
    gpipe.yield
  }
  gpipe.return %s : tensor<f32>
}

// -----

// A running statistic is no gamma too: the backward would accumulate a gradient into the buffer that holds its sums.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8x8x2xf32>
  %t = gpipe.input "t" : tensor<4xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %g = gpipe.param "g" ones : tensor<2xf32>
    %b = gpipe.param "b" zeros : tensor<2xf32>
    %var = gpipe.param "var" ones : tensor<2xf32>
    // expected-error @+1 {{'gpipe.batch_norm' op expects the running mean to be read by nothing else (its parameter holds running statistics, which have no gradient), but it is also this op's operand 1 (gamma)}}
    %0 = gpipe.batch_norm %x, %g, %b, %g, %var : (tensor<4x8x8x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<4x8x8x2xf32>
    %loss = gpipe.mse_loss %t, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// One parameter cannot hold both running statistics.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8x8x2xf32>
  %t = gpipe.input "t" : tensor<4xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %g = gpipe.param "g" ones : tensor<2xf32>
    %b = gpipe.param "b" zeros : tensor<2xf32>
    %stat = gpipe.param "stat" ones : tensor<2xf32>
    // expected-error @+1 {{'gpipe.batch_norm' op expects the running mean to be read by nothing else (its parameter holds running statistics, which have no gradient), but it is also this op's operand 4 (the running variance)}}
    %0 = gpipe.batch_norm %x, %g, %b, %stat, %stat : (tensor<4x8x8x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<4x8x8x2xf32>
    %loss = gpipe.mse_loss %t, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// No other op reads a running statistic.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8x8x2xf32>
  %t = gpipe.input "t" : tensor<4xf32>
  %l = gpipe.layer "l" -> tensor<4x8x8x2xf32> {
    %g = gpipe.param "g" ones : tensor<2xf32>
    %b = gpipe.param "b" zeros : tensor<2xf32>
    %mean = gpipe.param "mean" zeros : tensor<2xf32>
    %var = gpipe.param "var" ones : tensor<2xf32>
    // expected-error @+1 {{'gpipe.batch_norm' op expects the running variance to be read by nothing else (its parameter holds running statistics, which have no gradient), but it is also read by gpipe.add}}
    %0 = gpipe.batch_norm %x, %g, %b, %mean, %var : (tensor<4x8x8x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<4x8x8x2xf32>
    %1 = gpipe.add %var, %g : tensor<2xf32>
    gpipe.yield %0 : tensor<4x8x8x2xf32>
  }
  %m = gpipe.layer "m" -> tensor<f32> {
    %loss = gpipe.mse_loss %t, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %m : tensor<f32>
}

// -----

// Two batch norms cannot update one running statistic.
gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x8x8x2xf32>
  %t = gpipe.input "t" : tensor<4xf32>
  %l = gpipe.layer "l" -> tensor<f32> {
    %g = gpipe.param "g" ones : tensor<2xf32>
    %b = gpipe.param "b" zeros : tensor<2xf32>
    %mean = gpipe.param "mean" zeros : tensor<2xf32>
    %var = gpipe.param "var" ones : tensor<2xf32>
    %var2 = gpipe.param "var2" ones : tensor<2xf32>
    // expected-error @+1 {{'gpipe.batch_norm' op expects the running mean to be read by nothing else (its parameter holds running statistics, which have no gradient), but it is also read by gpipe.batch_norm}}
    %0 = gpipe.batch_norm %x, %g, %b, %mean, %var : (tensor<4x8x8x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<4x8x8x2xf32>
    %1 = gpipe.batch_norm %0, %g, %b, %mean, %var2 : (tensor<4x8x8x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<4x8x8x2xf32>
    %loss = gpipe.mse_loss %t, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
    gpipe.yield %loss : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
