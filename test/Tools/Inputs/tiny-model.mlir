gpipe.model @tiny batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %a = gpipe.layer "a" -> tensor<4x8xf32> attributes {cost = #gpipe.cost<flops = 10, param_bytes = 32, activation_bytes = 128>} {
    %b = gpipe.param "a.b" zeros : tensor<8xf32>
    %0 = gpipe.add %x, %x : tensor<4x8xf32>
    gpipe.yield %0 : tensor<4x8xf32>
  }
  %b = gpipe.layer "b" -> tensor<4x8xf32> attributes {cost = #gpipe.cost<flops = 20, param_bytes = 0, activation_bytes = 128>} {
    %0 = gpipe.relu %a : tensor<4x8xf32>
    gpipe.yield %0 : tensor<4x8xf32>
  }
  %c = gpipe.layer "c" -> tensor<4x8xf32> attributes {cost = #gpipe.cost<flops = 30, param_bytes = 0, activation_bytes = 128>} {
    %0 = gpipe.tanh %b : tensor<4x8xf32>
    gpipe.yield %0 : tensor<4x8xf32>
  }
  %d = gpipe.layer "d" -> tensor<f32> attributes {cost = #gpipe.cost<flops = 40, param_bytes = 0, activation_bytes = 4>} {
    %0 = gpipe.mse_loss %c, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %d : tensor<f32>
}
