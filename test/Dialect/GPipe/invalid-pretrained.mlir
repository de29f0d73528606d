// A pretrained parameter needs the model to name its weights file: the verifier names the first such parameter.
// RUN: gpipe-opt %s --split-input-file --verify-diagnostics

// expected-error @+1 {{'gpipe.model' op parameter 'fc1.w' is pretrained, but the model names no weights file (attribute gpipe.weights)}}
gpipe.model @m batch 8 {
  %x = gpipe.input "x" : tensor<8x16xf32>
  %y = gpipe.input "y" : tensor<8xi32>
  %h = gpipe.layer "fc1" -> tensor<8x4xf32> {
    %b = gpipe.param "fc1.b" zeros : tensor<4xf32>
    %w = gpipe.param "fc1.w" pretrained : tensor<16x4xf32>
    %v = gpipe.param "fc1.v" pretrained : tensor<16x4xf32>
    %0 = gpipe.dense %x, %w, %b : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
    gpipe.yield %0 : tensor<8x4xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.softmax_cross_entropy %h, %y : (tensor<8x4xf32>, tensor<8xi32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// The file's name is a non-empty string.
// expected-error @+1 {{'gpipe.model' op expects attribute gpipe.weights to be a non-empty string (the weights file), got ""}}
gpipe.model @m batch 8 attributes {gpipe.weights = ""} {
  %x = gpipe.input "x" : tensor<8x16xf32>
  %y = gpipe.input "y" : tensor<8xi32>
  %h = gpipe.layer "fc1" -> tensor<8x4xf32> {
    %w = gpipe.param "fc1.w" pretrained : tensor<16x4xf32>
    %0 = gpipe.dense %x, %w : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
    gpipe.yield %0 : tensor<8x4xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.softmax_cross_entropy %h, %y : (tensor<8x4xf32>, tensor<8xi32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// expected-error @+1 {{'gpipe.model' op expects attribute gpipe.weights to be a non-empty string (the weights file), got 3 : i64}}
gpipe.model @m batch 8 attributes {gpipe.weights = 3} {
  %x = gpipe.input "x" : tensor<8x16xf32>
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %x, %x : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// -----

// A pretrained parameter takes no scale.
gpipe.model @m batch 8 attributes {gpipe.weights = "m.safetensors"} {
  %x = gpipe.input "x" : tensor<8x16xf32>
  %y = gpipe.input "y" : tensor<8xi32>
  %h = gpipe.layer "fc1" -> tensor<8x4xf32> {
    // expected-error @+1 {{'gpipe.param' op takes a scale only with the normal or uniform initializer, got pretrained}}
    %w = gpipe.param "fc1.w" pretrained scale 2.0 : tensor<16x4xf32>
    %0 = gpipe.dense %x, %w : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
    gpipe.yield %0 : tensor<8x4xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.softmax_cross_entropy %h, %y : (tensor<8x4xf32>, tensor<8xi32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
