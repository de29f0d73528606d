// ResNet-8 (77754 trainable parameters), written by resnet_model.
gpipe.model @resnet batch 128 {
  %x = gpipe.input "x" : tensor<128x28x28x1xf32>
  %labels = gpipe.input "labels" : tensor<128xi32>
  %h0 = gpipe.layer "stem" -> tensor<128x28x28x16xf32> {
    %0 = gpipe.param "stem.conv.w" glorot_uniform : tensor<3x3x1x16xf32>
    %1 = gpipe.conv2d %x, %0 stride [1, 1] padding [1, 1] : (tensor<128x28x28x1xf32>, tensor<3x3x1x16xf32>) -> tensor<128x28x28x16xf32>
    %2 = gpipe.param "stem.bn.gamma" ones : tensor<16xf32>
    %3 = gpipe.param "stem.bn.beta" zeros : tensor<16xf32>
    %4 = gpipe.param "stem.bn.mean" zeros : tensor<16xf32>
    %5 = gpipe.param "stem.bn.var" ones : tensor<16xf32>
    %6 = gpipe.batch_norm %1, %2, %3, %4, %5 {momentum = 1.000000e-01 : f64} : (tensor<128x28x28x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<128x28x28x16xf32>
    %7 = gpipe.relu %6 : tensor<128x28x28x16xf32>
    gpipe.yield %7 : tensor<128x28x28x16xf32>
  }
  %a1 = gpipe.layer "g1.b1.a" -> tensor<128x28x28x16xf32> {
    %0 = gpipe.param "g1.b1.conv1.conv.w" glorot_uniform : tensor<3x3x16x16xf32>
    %1 = gpipe.conv2d %h0, %0 stride [1, 1] padding [1, 1] : (tensor<128x28x28x16xf32>, tensor<3x3x16x16xf32>) -> tensor<128x28x28x16xf32>
    %2 = gpipe.param "g1.b1.conv1.bn.gamma" ones : tensor<16xf32>
    %3 = gpipe.param "g1.b1.conv1.bn.beta" zeros : tensor<16xf32>
    %4 = gpipe.param "g1.b1.conv1.bn.mean" zeros : tensor<16xf32>
    %5 = gpipe.param "g1.b1.conv1.bn.var" ones : tensor<16xf32>
    %6 = gpipe.batch_norm %1, %2, %3, %4, %5 {momentum = 1.000000e-01 : f64} : (tensor<128x28x28x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<128x28x28x16xf32>
    %7 = gpipe.relu %6 : tensor<128x28x28x16xf32>
    gpipe.yield %7 : tensor<128x28x28x16xf32>
  }
  %h1 = gpipe.layer "g1.b1.b" -> tensor<128x28x28x16xf32> {
    %0 = gpipe.param "g1.b1.conv2.conv.w" glorot_uniform : tensor<3x3x16x16xf32>
    %1 = gpipe.conv2d %a1, %0 stride [1, 1] padding [1, 1] : (tensor<128x28x28x16xf32>, tensor<3x3x16x16xf32>) -> tensor<128x28x28x16xf32>
    %2 = gpipe.param "g1.b1.conv2.bn.gamma" ones : tensor<16xf32>
    %3 = gpipe.param "g1.b1.conv2.bn.beta" zeros : tensor<16xf32>
    %4 = gpipe.param "g1.b1.conv2.bn.mean" zeros : tensor<16xf32>
    %5 = gpipe.param "g1.b1.conv2.bn.var" ones : tensor<16xf32>
    %6 = gpipe.batch_norm %1, %2, %3, %4, %5 {momentum = 1.000000e-01 : f64} : (tensor<128x28x28x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<128x28x28x16xf32>
    %7 = gpipe.add %6, %h0 : tensor<128x28x28x16xf32>
    %8 = gpipe.relu %7 : tensor<128x28x28x16xf32>
    gpipe.yield %8 : tensor<128x28x28x16xf32>
  }
  %a2 = gpipe.layer "g2.b1.a" -> tensor<128x14x14x32xf32> {
    %0 = gpipe.param "g2.b1.conv1.conv.w" glorot_uniform : tensor<3x3x16x32xf32>
    %1 = gpipe.conv2d %h1, %0 stride [2, 2] padding [1, 1] : (tensor<128x28x28x16xf32>, tensor<3x3x16x32xf32>) -> tensor<128x14x14x32xf32>
    %2 = gpipe.param "g2.b1.conv1.bn.gamma" ones : tensor<32xf32>
    %3 = gpipe.param "g2.b1.conv1.bn.beta" zeros : tensor<32xf32>
    %4 = gpipe.param "g2.b1.conv1.bn.mean" zeros : tensor<32xf32>
    %5 = gpipe.param "g2.b1.conv1.bn.var" ones : tensor<32xf32>
    %6 = gpipe.batch_norm %1, %2, %3, %4, %5 {momentum = 1.000000e-01 : f64} : (tensor<128x14x14x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<128x14x14x32xf32>
    %7 = gpipe.relu %6 : tensor<128x14x14x32xf32>
    gpipe.yield %7 : tensor<128x14x14x32xf32>
  }
  %h2 = gpipe.layer "g2.b1.b" -> tensor<128x14x14x32xf32> {
    %0 = gpipe.param "g2.b1.conv2.conv.w" glorot_uniform : tensor<3x3x32x32xf32>
    %1 = gpipe.conv2d %a2, %0 stride [1, 1] padding [1, 1] : (tensor<128x14x14x32xf32>, tensor<3x3x32x32xf32>) -> tensor<128x14x14x32xf32>
    %2 = gpipe.param "g2.b1.conv2.bn.gamma" ones : tensor<32xf32>
    %3 = gpipe.param "g2.b1.conv2.bn.beta" zeros : tensor<32xf32>
    %4 = gpipe.param "g2.b1.conv2.bn.mean" zeros : tensor<32xf32>
    %5 = gpipe.param "g2.b1.conv2.bn.var" ones : tensor<32xf32>
    %6 = gpipe.batch_norm %1, %2, %3, %4, %5 {momentum = 1.000000e-01 : f64} : (tensor<128x14x14x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<128x14x14x32xf32>
    %7 = gpipe.param "g2.b1.shortcut.conv.w" glorot_uniform : tensor<1x1x16x32xf32>
    %8 = gpipe.conv2d %h1, %7 stride [2, 2] padding [0, 0] : (tensor<128x28x28x16xf32>, tensor<1x1x16x32xf32>) -> tensor<128x14x14x32xf32>
    %9 = gpipe.param "g2.b1.shortcut.bn.gamma" ones : tensor<32xf32>
    %10 = gpipe.param "g2.b1.shortcut.bn.beta" zeros : tensor<32xf32>
    %11 = gpipe.param "g2.b1.shortcut.bn.mean" zeros : tensor<32xf32>
    %12 = gpipe.param "g2.b1.shortcut.bn.var" ones : tensor<32xf32>
    %13 = gpipe.batch_norm %8, %9, %10, %11, %12 {momentum = 1.000000e-01 : f64} : (tensor<128x14x14x32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<128x14x14x32xf32>
    %14 = gpipe.add %6, %13 : tensor<128x14x14x32xf32>
    %15 = gpipe.relu %14 : tensor<128x14x14x32xf32>
    gpipe.yield %15 : tensor<128x14x14x32xf32>
  }
  %a3 = gpipe.layer "g3.b1.a" -> tensor<128x7x7x64xf32> {
    %0 = gpipe.param "g3.b1.conv1.conv.w" glorot_uniform : tensor<3x3x32x64xf32>
    %1 = gpipe.conv2d %h2, %0 stride [2, 2] padding [1, 1] : (tensor<128x14x14x32xf32>, tensor<3x3x32x64xf32>) -> tensor<128x7x7x64xf32>
    %2 = gpipe.param "g3.b1.conv1.bn.gamma" ones : tensor<64xf32>
    %3 = gpipe.param "g3.b1.conv1.bn.beta" zeros : tensor<64xf32>
    %4 = gpipe.param "g3.b1.conv1.bn.mean" zeros : tensor<64xf32>
    %5 = gpipe.param "g3.b1.conv1.bn.var" ones : tensor<64xf32>
    %6 = gpipe.batch_norm %1, %2, %3, %4, %5 {momentum = 1.000000e-01 : f64} : (tensor<128x7x7x64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<128x7x7x64xf32>
    %7 = gpipe.relu %6 : tensor<128x7x7x64xf32>
    gpipe.yield %7 : tensor<128x7x7x64xf32>
  }
  %h3 = gpipe.layer "g3.b1.b" -> tensor<128x7x7x64xf32> {
    %0 = gpipe.param "g3.b1.conv2.conv.w" glorot_uniform : tensor<3x3x64x64xf32>
    %1 = gpipe.conv2d %a3, %0 stride [1, 1] padding [1, 1] : (tensor<128x7x7x64xf32>, tensor<3x3x64x64xf32>) -> tensor<128x7x7x64xf32>
    %2 = gpipe.param "g3.b1.conv2.bn.gamma" ones : tensor<64xf32>
    %3 = gpipe.param "g3.b1.conv2.bn.beta" zeros : tensor<64xf32>
    %4 = gpipe.param "g3.b1.conv2.bn.mean" zeros : tensor<64xf32>
    %5 = gpipe.param "g3.b1.conv2.bn.var" ones : tensor<64xf32>
    %6 = gpipe.batch_norm %1, %2, %3, %4, %5 {momentum = 1.000000e-01 : f64} : (tensor<128x7x7x64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<128x7x7x64xf32>
    %7 = gpipe.param "g3.b1.shortcut.conv.w" glorot_uniform : tensor<1x1x32x64xf32>
    %8 = gpipe.conv2d %h2, %7 stride [2, 2] padding [0, 0] : (tensor<128x14x14x32xf32>, tensor<1x1x32x64xf32>) -> tensor<128x7x7x64xf32>
    %9 = gpipe.param "g3.b1.shortcut.bn.gamma" ones : tensor<64xf32>
    %10 = gpipe.param "g3.b1.shortcut.bn.beta" zeros : tensor<64xf32>
    %11 = gpipe.param "g3.b1.shortcut.bn.mean" zeros : tensor<64xf32>
    %12 = gpipe.param "g3.b1.shortcut.bn.var" ones : tensor<64xf32>
    %13 = gpipe.batch_norm %8, %9, %10, %11, %12 {momentum = 1.000000e-01 : f64} : (tensor<128x7x7x64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<128x7x7x64xf32>
    %14 = gpipe.add %6, %13 : tensor<128x7x7x64xf32>
    %15 = gpipe.relu %14 : tensor<128x7x7x64xf32>
    gpipe.yield %15 : tensor<128x7x7x64xf32>
  }
  %logits = gpipe.layer "head" -> tensor<128x10xf32> {
    %0 = gpipe.global_avg_pool %h3 : (tensor<128x7x7x64xf32>) -> tensor<128x64xf32>
    %w = gpipe.param "head.w" glorot_uniform : tensor<64x10xf32>
    %b = gpipe.param "head.b" zeros : tensor<10xf32>
    %1 = gpipe.dense %0, %w, %b : (tensor<128x64xf32>, tensor<64x10xf32>, tensor<10xf32>) -> tensor<128x10xf32>
    gpipe.yield %1 : tensor<128x10xf32>
  }
  %loss = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.softmax_cross_entropy %logits, %labels : (tensor<128x10xf32>, tensor<128xi32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %loss : tensor<f32>
}
