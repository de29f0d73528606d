// An MLP for Fashion-MNIST (28x28 images, 10 classes), batch 64: eight hidden
// dense+relu layers of width 512 and a linear classifier; the last layer computes
// the softmax cross-entropy loss.
gpipe.model @mlp batch 64 {
  %x = gpipe.input "x" : tensor<64x784xf32>
  %labels = gpipe.input "labels" : tensor<64xi32>
  %h1 = gpipe.layer "fc1" -> tensor<64x512xf32> {
    %w = gpipe.param "fc1.w" glorot_uniform : tensor<784x512xf32>
    %b = gpipe.param "fc1.b" zeros : tensor<512xf32>
    %0 = gpipe.dense %x, %w, %b : (tensor<64x784xf32>, tensor<784x512xf32>, tensor<512xf32>) -> tensor<64x512xf32>
    %1 = gpipe.relu %0 : tensor<64x512xf32>
    gpipe.yield %1 : tensor<64x512xf32>
  }
  %h2 = gpipe.layer "fc2" -> tensor<64x512xf32> {
    %w = gpipe.param "fc2.w" glorot_uniform : tensor<512x512xf32>
    %b = gpipe.param "fc2.b" zeros : tensor<512xf32>
    %0 = gpipe.dense %h1, %w, %b : (tensor<64x512xf32>, tensor<512x512xf32>, tensor<512xf32>) -> tensor<64x512xf32>
    %1 = gpipe.relu %0 : tensor<64x512xf32>
    gpipe.yield %1 : tensor<64x512xf32>
  }
  %h3 = gpipe.layer "fc3" -> tensor<64x512xf32> {
    %w = gpipe.param "fc3.w" glorot_uniform : tensor<512x512xf32>
    %b = gpipe.param "fc3.b" zeros : tensor<512xf32>
    %0 = gpipe.dense %h2, %w, %b : (tensor<64x512xf32>, tensor<512x512xf32>, tensor<512xf32>) -> tensor<64x512xf32>
    %1 = gpipe.relu %0 : tensor<64x512xf32>
    gpipe.yield %1 : tensor<64x512xf32>
  }
  %h4 = gpipe.layer "fc4" -> tensor<64x512xf32> {
    %w = gpipe.param "fc4.w" glorot_uniform : tensor<512x512xf32>
    %b = gpipe.param "fc4.b" zeros : tensor<512xf32>
    %0 = gpipe.dense %h3, %w, %b : (tensor<64x512xf32>, tensor<512x512xf32>, tensor<512xf32>) -> tensor<64x512xf32>
    %1 = gpipe.relu %0 : tensor<64x512xf32>
    gpipe.yield %1 : tensor<64x512xf32>
  }
  %h5 = gpipe.layer "fc5" -> tensor<64x512xf32> {
    %w = gpipe.param "fc5.w" glorot_uniform : tensor<512x512xf32>
    %b = gpipe.param "fc5.b" zeros : tensor<512xf32>
    %0 = gpipe.dense %h4, %w, %b : (tensor<64x512xf32>, tensor<512x512xf32>, tensor<512xf32>) -> tensor<64x512xf32>
    %1 = gpipe.relu %0 : tensor<64x512xf32>
    gpipe.yield %1 : tensor<64x512xf32>
  }
  %h6 = gpipe.layer "fc6" -> tensor<64x512xf32> {
    %w = gpipe.param "fc6.w" glorot_uniform : tensor<512x512xf32>
    %b = gpipe.param "fc6.b" zeros : tensor<512xf32>
    %0 = gpipe.dense %h5, %w, %b : (tensor<64x512xf32>, tensor<512x512xf32>, tensor<512xf32>) -> tensor<64x512xf32>
    %1 = gpipe.relu %0 : tensor<64x512xf32>
    gpipe.yield %1 : tensor<64x512xf32>
  }
  %h7 = gpipe.layer "fc7" -> tensor<64x512xf32> {
    %w = gpipe.param "fc7.w" glorot_uniform : tensor<512x512xf32>
    %b = gpipe.param "fc7.b" zeros : tensor<512xf32>
    %0 = gpipe.dense %h6, %w, %b : (tensor<64x512xf32>, tensor<512x512xf32>, tensor<512xf32>) -> tensor<64x512xf32>
    %1 = gpipe.relu %0 : tensor<64x512xf32>
    gpipe.yield %1 : tensor<64x512xf32>
  }
  %h8 = gpipe.layer "fc8" -> tensor<64x512xf32> {
    %w = gpipe.param "fc8.w" glorot_uniform : tensor<512x512xf32>
    %b = gpipe.param "fc8.b" zeros : tensor<512xf32>
    %0 = gpipe.dense %h7, %w, %b : (tensor<64x512xf32>, tensor<512x512xf32>, tensor<512xf32>) -> tensor<64x512xf32>
    %1 = gpipe.relu %0 : tensor<64x512xf32>
    gpipe.yield %1 : tensor<64x512xf32>
  }
  %h9 = gpipe.layer "fc9" -> tensor<64x10xf32> {
    %w = gpipe.param "fc9.w" glorot_uniform : tensor<512x10xf32>
    %b = gpipe.param "fc9.b" zeros : tensor<10xf32>
    %0 = gpipe.dense %h8, %w, %b : (tensor<64x512xf32>, tensor<512x10xf32>, tensor<10xf32>) -> tensor<64x10xf32>
    gpipe.yield %0 : tensor<64x10xf32>
  }
  %loss = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.softmax_cross_entropy %h9, %labels : (tensor<64x10xf32>, tensor<64xi32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %loss : tensor<f32>
}
