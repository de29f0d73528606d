// gpipe-verify-schedule on schedules whose devices run several stages
// (interleaving): each load and transfer names one of its device's stages,
// the virtual stages divide the model's, and each transfer goes to the device
// of the adjacent stage.
// RUN: gpipe-opt %s -split-input-file -gpipe-verify-schedule -verify-diagnostics

// A transfer of a schedule whose devices run several stages must name its stage.
gpipe.model @mlp batch 4 {
  %0 = gpipe.input "x" : tensor<4x4xf32>
  %1 = gpipe.input "labels" : tensor<4xi32>
  %2 = gpipe.stage @stage0 index 0 (%0) : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%arg0: tensor<4x4xf32>):
    %9 = gpipe.layer "fc1" -> tensor<4x4xf32> {
      %10 = gpipe.param "fc1.w" glorot_uniform : tensor<4x4xf32>
      %11 = gpipe.dense %arg0, %10 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
      gpipe.yield %11 : tensor<4x4xf32>
    }
    gpipe.yield %9 : tensor<4x4xf32>
  }
  gpipe.send %2 from 0 to 1 channel 0 : tensor<4x4xf32>
  %3 = gpipe.recv from 0 to 1 channel 0 : tensor<4x4xf32>
  %4 = gpipe.stage @stage1 index 1 (%3) : (tensor<4x4xf32>) -> tensor<4x8xf32> {
  ^bb0(%arg0: tensor<4x4xf32>):
    %9 = gpipe.layer "fc2" -> tensor<4x8xf32> {
      %10 = gpipe.param "fc2.w" glorot_uniform : tensor<4x8xf32>
      %11 = gpipe.dense %arg0, %10 : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
      gpipe.yield %11 : tensor<4x8xf32>
    }
    gpipe.yield %9 : tensor<4x8xf32>
  }
  gpipe.send %4 from 1 to 2 channel 0 : tensor<4x8xf32>
  %5 = gpipe.recv from 1 to 2 channel 0 : tensor<4x8xf32>
  %6 = gpipe.stage @stage2 index 2 (%5) : (tensor<4x8xf32>) -> tensor<4x3xf32> {
  ^bb0(%arg0: tensor<4x8xf32>):
    %9 = gpipe.layer "fc3" -> tensor<4x3xf32> {
      %10 = gpipe.param "fc3.w" glorot_uniform : tensor<8x3xf32>
      %11 = gpipe.dense %arg0, %10 : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
      gpipe.yield %11 : tensor<4x3xf32>
    }
    gpipe.yield %9 : tensor<4x3xf32>
  }
  gpipe.send %6 from 2 to 3 channel 0 : tensor<4x3xf32>
  %7 = gpipe.recv from 2 to 3 channel 0 : tensor<4x3xf32>
  %8 = gpipe.stage @stage3 index 3 (%7, %1) : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<4x3xf32>, %arg1: tensor<4xi32>):
    %9 = gpipe.layer "loss" -> tensor<f32> {
      %10 = gpipe.softmax_cross_entropy %arg0, %arg1 : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32>
      gpipe.yield %10 : tensor<f32>
    }
    gpipe.yield %9 : tensor<f32>
  }
  gpipe.return %8 : tensor<f32>
}
gpipe.schedule @mlp_schedule model @mlp microbatches 2 rows [2, 2] virtual_stages 2 {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 2 stage 0
    gpipe.forward @stage0 mb 0 rows 2
    gpipe.send_activation to 1 mb 0 channel 0 stage 0 : tensor<2x4xf32>
    gpipe.load_input "x" mb 1 rows 2 stage 0
    gpipe.forward @stage0 mb 1 rows 2
    gpipe.recv_activation from 1 mb 0 channel 0 stage 2 : tensor<2x8xf32>
    gpipe.send_activation to 1 mb 1 channel 0 stage 0 : tensor<2x4xf32>
    gpipe.forward @stage2 mb 0 rows 2
    gpipe.recv_activation from 1 mb 1 channel 0 stage 2 : tensor<2x8xf32>
    gpipe.send_activation to 1 mb 0 channel 0 stage 2 : tensor<2x3xf32>
    gpipe.forward @stage2 mb 1 rows 2
    gpipe.send_activation to 1 mb 1 channel 0 stage 2 : tensor<2x3xf32>
    gpipe.recv_gradient from 1 mb 0 channel 0 stage 2 : tensor<2x3xf32>
    gpipe.backward @stage2 mb 0 rows 2
    gpipe.send_gradient to 1 mb 0 channel 0 stage 2 : tensor<2x8xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 stage 2 : tensor<2x3xf32>
    gpipe.backward @stage2 mb 1 rows 2
    gpipe.send_gradient to 1 mb 1 channel 0 stage 2 : tensor<2x8xf32>
    gpipe.recv_gradient from 1 mb 0 channel 0 stage 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 0 rows 2
    gpipe.recv_gradient from 1 mb 1 channel 0 stage 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    // expected-error @+1 {{'gpipe.recv_activation' op does not say which of device 1's stages it serves (`stage`): devices run 2 stages each}}
    gpipe.recv_activation from 0 mb 0 channel 0 : tensor<2x4xf32>
    gpipe.forward @stage1 mb 0 rows 2
    gpipe.send_activation to 0 mb 0 channel 0 stage 1 : tensor<2x8xf32>
    gpipe.recv_activation from 0 mb 1 channel 0 stage 1 : tensor<2x4xf32>
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.send_activation to 0 mb 1 channel 0 stage 1 : tensor<2x8xf32>
    gpipe.recv_activation from 0 mb 0 channel 0 stage 3 : tensor<2x3xf32>
    gpipe.load_input "labels" mb 0 rows 2 stage 3
    gpipe.forward @stage3 mb 0 rows 2
    gpipe.backward @stage3 mb 0 rows 2
    gpipe.recv_activation from 0 mb 1 channel 0 stage 3 : tensor<2x3xf32>
    gpipe.send_gradient to 0 mb 0 channel 0 stage 3 : tensor<2x3xf32>
    gpipe.load_input "labels" mb 1 rows 2 stage 3
    gpipe.forward @stage3 mb 1 rows 2
    gpipe.backward @stage3 mb 1 rows 2
    gpipe.recv_gradient from 0 mb 0 channel 0 stage 1 : tensor<2x8xf32>
    gpipe.send_gradient to 0 mb 1 channel 0 stage 3 : tensor<2x3xf32>
    gpipe.backward @stage1 mb 0 rows 2
    gpipe.recv_gradient from 0 mb 1 channel 0 stage 1 : tensor<2x8xf32>
    gpipe.send_gradient to 0 mb 0 channel 0 stage 1 : tensor<2x4xf32>
    gpipe.backward @stage1 mb 1 rows 2
    gpipe.send_gradient to 0 mb 1 channel 0 stage 1 : tensor<2x4xf32>
    gpipe.optimizer_step
  }
}
// -----

// Virtual stages that do not divide the model's stages.
gpipe.model @mlp batch 4 {
  %0 = gpipe.input "x" : tensor<4x4xf32>
  %1 = gpipe.input "labels" : tensor<4xi32>
  %2 = gpipe.stage @stage0 index 0 (%0) : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%arg0: tensor<4x4xf32>):
    %9 = gpipe.layer "fc1" -> tensor<4x4xf32> {
      %10 = gpipe.param "fc1.w" glorot_uniform : tensor<4x4xf32>
      %11 = gpipe.dense %arg0, %10 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
      gpipe.yield %11 : tensor<4x4xf32>
    }
    gpipe.yield %9 : tensor<4x4xf32>
  }
  gpipe.send %2 from 0 to 1 channel 0 : tensor<4x4xf32>
  %3 = gpipe.recv from 0 to 1 channel 0 : tensor<4x4xf32>
  %4 = gpipe.stage @stage1 index 1 (%3) : (tensor<4x4xf32>) -> tensor<4x8xf32> {
  ^bb0(%arg0: tensor<4x4xf32>):
    %9 = gpipe.layer "fc2" -> tensor<4x8xf32> {
      %10 = gpipe.param "fc2.w" glorot_uniform : tensor<4x8xf32>
      %11 = gpipe.dense %arg0, %10 : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
      gpipe.yield %11 : tensor<4x8xf32>
    }
    gpipe.yield %9 : tensor<4x8xf32>
  }
  gpipe.send %4 from 1 to 2 channel 0 : tensor<4x8xf32>
  %5 = gpipe.recv from 1 to 2 channel 0 : tensor<4x8xf32>
  %6 = gpipe.stage @stage2 index 2 (%5) : (tensor<4x8xf32>) -> tensor<4x3xf32> {
  ^bb0(%arg0: tensor<4x8xf32>):
    %9 = gpipe.layer "fc3" -> tensor<4x3xf32> {
      %10 = gpipe.param "fc3.w" glorot_uniform : tensor<8x3xf32>
      %11 = gpipe.dense %arg0, %10 : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
      gpipe.yield %11 : tensor<4x3xf32>
    }
    gpipe.yield %9 : tensor<4x3xf32>
  }
  gpipe.send %6 from 2 to 3 channel 0 : tensor<4x3xf32>
  %7 = gpipe.recv from 2 to 3 channel 0 : tensor<4x3xf32>
  %8 = gpipe.stage @stage3 index 3 (%7, %1) : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<4x3xf32>, %arg1: tensor<4xi32>):
    %9 = gpipe.layer "loss" -> tensor<f32> {
      %10 = gpipe.softmax_cross_entropy %arg0, %arg1 : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32>
      gpipe.yield %10 : tensor<f32>
    }
    gpipe.yield %9 : tensor<f32>
  }
  gpipe.return %8 : tensor<f32>
}
// expected-error @+1 {{'gpipe.schedule' op runs 3 virtual stages per device, which does not divide the 4 stages of model @mlp}}
gpipe.schedule @mlp_schedule model @mlp microbatches 2 rows [2, 2] virtual_stages 3 {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 2 stage 0
    gpipe.forward @stage0 mb 0 rows 2
    gpipe.send_activation to 1 mb 0 channel 0 stage 0 : tensor<2x4xf32>
    gpipe.load_input "x" mb 1 rows 2 stage 0
    gpipe.forward @stage0 mb 1 rows 2
    gpipe.recv_activation from 1 mb 0 channel 0 stage 2 : tensor<2x8xf32>
    gpipe.send_activation to 1 mb 1 channel 0 stage 0 : tensor<2x4xf32>
    gpipe.forward @stage2 mb 0 rows 2
    gpipe.recv_activation from 1 mb 1 channel 0 stage 2 : tensor<2x8xf32>
    gpipe.send_activation to 1 mb 0 channel 0 stage 2 : tensor<2x3xf32>
    gpipe.forward @stage2 mb 1 rows 2
    gpipe.send_activation to 1 mb 1 channel 0 stage 2 : tensor<2x3xf32>
    gpipe.recv_gradient from 1 mb 0 channel 0 stage 2 : tensor<2x3xf32>
    gpipe.backward @stage2 mb 0 rows 2
    gpipe.send_gradient to 1 mb 0 channel 0 stage 2 : tensor<2x8xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 stage 2 : tensor<2x3xf32>
    gpipe.backward @stage2 mb 1 rows 2
    gpipe.send_gradient to 1 mb 1 channel 0 stage 2 : tensor<2x8xf32>
    gpipe.recv_gradient from 1 mb 0 channel 0 stage 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 0 rows 2
    gpipe.recv_gradient from 1 mb 1 channel 0 stage 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    gpipe.recv_activation from 0 mb 0 channel 0 stage 1 : tensor<2x4xf32>
    gpipe.forward @stage1 mb 0 rows 2
    gpipe.send_activation to 0 mb 0 channel 0 stage 1 : tensor<2x8xf32>
    gpipe.recv_activation from 0 mb 1 channel 0 stage 1 : tensor<2x4xf32>
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.send_activation to 0 mb 1 channel 0 stage 1 : tensor<2x8xf32>
    gpipe.recv_activation from 0 mb 0 channel 0 stage 3 : tensor<2x3xf32>
    gpipe.load_input "labels" mb 0 rows 2 stage 3
    gpipe.forward @stage3 mb 0 rows 2
    gpipe.backward @stage3 mb 0 rows 2
    gpipe.recv_activation from 0 mb 1 channel 0 stage 3 : tensor<2x3xf32>
    gpipe.send_gradient to 0 mb 0 channel 0 stage 3 : tensor<2x3xf32>
    gpipe.load_input "labels" mb 1 rows 2 stage 3
    gpipe.forward @stage3 mb 1 rows 2
    gpipe.backward @stage3 mb 1 rows 2
    gpipe.recv_gradient from 0 mb 0 channel 0 stage 1 : tensor<2x8xf32>
    gpipe.send_gradient to 0 mb 1 channel 0 stage 3 : tensor<2x3xf32>
    gpipe.backward @stage1 mb 0 rows 2
    gpipe.recv_gradient from 0 mb 1 channel 0 stage 1 : tensor<2x8xf32>
    gpipe.send_gradient to 0 mb 0 channel 0 stage 1 : tensor<2x4xf32>
    gpipe.backward @stage1 mb 1 rows 2
    gpipe.send_gradient to 0 mb 1 channel 0 stage 1 : tensor<2x4xf32>
    gpipe.optimizer_step
  }
}
// -----

// A load that names a stage its device does not run.
gpipe.model @mlp batch 4 {
  %0 = gpipe.input "x" : tensor<4x4xf32>
  %1 = gpipe.input "labels" : tensor<4xi32>
  %2 = gpipe.stage @stage0 index 0 (%0) : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%arg0: tensor<4x4xf32>):
    %9 = gpipe.layer "fc1" -> tensor<4x4xf32> {
      %10 = gpipe.param "fc1.w" glorot_uniform : tensor<4x4xf32>
      %11 = gpipe.dense %arg0, %10 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
      gpipe.yield %11 : tensor<4x4xf32>
    }
    gpipe.yield %9 : tensor<4x4xf32>
  }
  gpipe.send %2 from 0 to 1 channel 0 : tensor<4x4xf32>
  %3 = gpipe.recv from 0 to 1 channel 0 : tensor<4x4xf32>
  %4 = gpipe.stage @stage1 index 1 (%3) : (tensor<4x4xf32>) -> tensor<4x8xf32> {
  ^bb0(%arg0: tensor<4x4xf32>):
    %9 = gpipe.layer "fc2" -> tensor<4x8xf32> {
      %10 = gpipe.param "fc2.w" glorot_uniform : tensor<4x8xf32>
      %11 = gpipe.dense %arg0, %10 : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
      gpipe.yield %11 : tensor<4x8xf32>
    }
    gpipe.yield %9 : tensor<4x8xf32>
  }
  gpipe.send %4 from 1 to 2 channel 0 : tensor<4x8xf32>
  %5 = gpipe.recv from 1 to 2 channel 0 : tensor<4x8xf32>
  %6 = gpipe.stage @stage2 index 2 (%5) : (tensor<4x8xf32>) -> tensor<4x3xf32> {
  ^bb0(%arg0: tensor<4x8xf32>):
    %9 = gpipe.layer "fc3" -> tensor<4x3xf32> {
      %10 = gpipe.param "fc3.w" glorot_uniform : tensor<8x3xf32>
      %11 = gpipe.dense %arg0, %10 : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
      gpipe.yield %11 : tensor<4x3xf32>
    }
    gpipe.yield %9 : tensor<4x3xf32>
  }
  gpipe.send %6 from 2 to 3 channel 0 : tensor<4x3xf32>
  %7 = gpipe.recv from 2 to 3 channel 0 : tensor<4x3xf32>
  %8 = gpipe.stage @stage3 index 3 (%7, %1) : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<4x3xf32>, %arg1: tensor<4xi32>):
    %9 = gpipe.layer "loss" -> tensor<f32> {
      %10 = gpipe.softmax_cross_entropy %arg0, %arg1 : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32>
      gpipe.yield %10 : tensor<f32>
    }
    gpipe.yield %9 : tensor<f32>
  }
  gpipe.return %8 : tensor<f32>
}
gpipe.schedule @mlp_schedule model @mlp microbatches 2 rows [2, 2] virtual_stages 2 {
  gpipe.program device 0 {
    // expected-error @+1 {{device 0: load input 'x', micro-batch 0 (op #0) expects one of device 0's stages (0, 2, ...), got stage 1}}
    gpipe.load_input "x" mb 0 rows 2 stage 1
    // expected-error @+1 {{device 0: stage 0 has no load of input 'x' for micro-batch 0}}
    gpipe.forward @stage0 mb 0 rows 2
    gpipe.send_activation to 1 mb 0 channel 0 stage 0 : tensor<2x4xf32>
    gpipe.load_input "x" mb 1 rows 2 stage 0
    gpipe.forward @stage0 mb 1 rows 2
    gpipe.recv_activation from 1 mb 0 channel 0 stage 2 : tensor<2x8xf32>
    gpipe.send_activation to 1 mb 1 channel 0 stage 0 : tensor<2x4xf32>
    gpipe.forward @stage2 mb 0 rows 2
    gpipe.recv_activation from 1 mb 1 channel 0 stage 2 : tensor<2x8xf32>
    gpipe.send_activation to 1 mb 0 channel 0 stage 2 : tensor<2x3xf32>
    gpipe.forward @stage2 mb 1 rows 2
    gpipe.send_activation to 1 mb 1 channel 0 stage 2 : tensor<2x3xf32>
    gpipe.recv_gradient from 1 mb 0 channel 0 stage 2 : tensor<2x3xf32>
    gpipe.backward @stage2 mb 0 rows 2
    gpipe.send_gradient to 1 mb 0 channel 0 stage 2 : tensor<2x8xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 stage 2 : tensor<2x3xf32>
    gpipe.backward @stage2 mb 1 rows 2
    gpipe.send_gradient to 1 mb 1 channel 0 stage 2 : tensor<2x8xf32>
    gpipe.recv_gradient from 1 mb 0 channel 0 stage 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 0 rows 2
    gpipe.recv_gradient from 1 mb 1 channel 0 stage 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    gpipe.recv_activation from 0 mb 0 channel 0 stage 1 : tensor<2x4xf32>
    gpipe.forward @stage1 mb 0 rows 2
    gpipe.send_activation to 0 mb 0 channel 0 stage 1 : tensor<2x8xf32>
    gpipe.recv_activation from 0 mb 1 channel 0 stage 1 : tensor<2x4xf32>
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.send_activation to 0 mb 1 channel 0 stage 1 : tensor<2x8xf32>
    gpipe.recv_activation from 0 mb 0 channel 0 stage 3 : tensor<2x3xf32>
    gpipe.load_input "labels" mb 0 rows 2 stage 3
    gpipe.forward @stage3 mb 0 rows 2
    gpipe.backward @stage3 mb 0 rows 2
    gpipe.recv_activation from 0 mb 1 channel 0 stage 3 : tensor<2x3xf32>
    gpipe.send_gradient to 0 mb 0 channel 0 stage 3 : tensor<2x3xf32>
    gpipe.load_input "labels" mb 1 rows 2 stage 3
    gpipe.forward @stage3 mb 1 rows 2
    gpipe.backward @stage3 mb 1 rows 2
    gpipe.recv_gradient from 0 mb 0 channel 0 stage 1 : tensor<2x8xf32>
    gpipe.send_gradient to 0 mb 1 channel 0 stage 3 : tensor<2x3xf32>
    gpipe.backward @stage1 mb 0 rows 2
    gpipe.recv_gradient from 0 mb 1 channel 0 stage 1 : tensor<2x8xf32>
    gpipe.send_gradient to 0 mb 0 channel 0 stage 1 : tensor<2x4xf32>
    gpipe.backward @stage1 mb 1 rows 2
    gpipe.send_gradient to 0 mb 1 channel 0 stage 1 : tensor<2x4xf32>
    gpipe.optimizer_step
  }
}
// -----

// Stage 2's activations go to stage 3, on device 1.
gpipe.model @mlp batch 4 {
  %0 = gpipe.input "x" : tensor<4x4xf32>
  %1 = gpipe.input "labels" : tensor<4xi32>
  %2 = gpipe.stage @stage0 index 0 (%0) : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%arg0: tensor<4x4xf32>):
    %9 = gpipe.layer "fc1" -> tensor<4x4xf32> {
      %10 = gpipe.param "fc1.w" glorot_uniform : tensor<4x4xf32>
      %11 = gpipe.dense %arg0, %10 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
      gpipe.yield %11 : tensor<4x4xf32>
    }
    gpipe.yield %9 : tensor<4x4xf32>
  }
  gpipe.send %2 from 0 to 1 channel 0 : tensor<4x4xf32>
  %3 = gpipe.recv from 0 to 1 channel 0 : tensor<4x4xf32>
  %4 = gpipe.stage @stage1 index 1 (%3) : (tensor<4x4xf32>) -> tensor<4x8xf32> {
  ^bb0(%arg0: tensor<4x4xf32>):
    %9 = gpipe.layer "fc2" -> tensor<4x8xf32> {
      %10 = gpipe.param "fc2.w" glorot_uniform : tensor<4x8xf32>
      %11 = gpipe.dense %arg0, %10 : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
      gpipe.yield %11 : tensor<4x8xf32>
    }
    gpipe.yield %9 : tensor<4x8xf32>
  }
  gpipe.send %4 from 1 to 2 channel 0 : tensor<4x8xf32>
  %5 = gpipe.recv from 1 to 2 channel 0 : tensor<4x8xf32>
  %6 = gpipe.stage @stage2 index 2 (%5) : (tensor<4x8xf32>) -> tensor<4x3xf32> {
  ^bb0(%arg0: tensor<4x8xf32>):
    %9 = gpipe.layer "fc3" -> tensor<4x3xf32> {
      %10 = gpipe.param "fc3.w" glorot_uniform : tensor<8x3xf32>
      %11 = gpipe.dense %arg0, %10 : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
      gpipe.yield %11 : tensor<4x3xf32>
    }
    gpipe.yield %9 : tensor<4x3xf32>
  }
  gpipe.send %6 from 2 to 3 channel 0 : tensor<4x3xf32>
  %7 = gpipe.recv from 2 to 3 channel 0 : tensor<4x3xf32>
  %8 = gpipe.stage @stage3 index 3 (%7, %1) : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32> {
  ^bb0(%arg0: tensor<4x3xf32>, %arg1: tensor<4xi32>):
    %9 = gpipe.layer "loss" -> tensor<f32> {
      %10 = gpipe.softmax_cross_entropy %arg0, %arg1 : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32>
      gpipe.yield %10 : tensor<f32>
    }
    gpipe.yield %9 : tensor<f32>
  }
  gpipe.return %8 : tensor<f32>
}
gpipe.schedule @mlp_schedule model @mlp microbatches 2 rows [2, 2] virtual_stages 2 {
  gpipe.program device 0 {
    gpipe.load_input "x" mb 0 rows 2 stage 0
    gpipe.forward @stage0 mb 0 rows 2
    gpipe.send_activation to 1 mb 0 channel 0 stage 0 : tensor<2x4xf32>
    gpipe.load_input "x" mb 1 rows 2 stage 0
    gpipe.forward @stage0 mb 1 rows 2
    gpipe.recv_activation from 1 mb 0 channel 0 stage 2 : tensor<2x8xf32>
    gpipe.send_activation to 1 mb 1 channel 0 stage 0 : tensor<2x4xf32>
    gpipe.forward @stage2 mb 0 rows 2
    gpipe.recv_activation from 1 mb 1 channel 0 stage 2 : tensor<2x8xf32>
    // expected-error @+2 {{device 0: send activation to device 0, micro-batch 0, channel 0 (op #9) expects peer device 1, got 0}}
    // expected-error @+1 {{device 0: send activation to device 0, micro-batch 0, channel 0 (op #9) has its own device as peer}}
    gpipe.send_activation to 0 mb 0 channel 0 stage 2 : tensor<2x3xf32>
    gpipe.forward @stage2 mb 1 rows 2
    gpipe.send_activation to 1 mb 1 channel 0 stage 2 : tensor<2x3xf32>
    gpipe.recv_gradient from 1 mb 0 channel 0 stage 2 : tensor<2x3xf32>
    gpipe.backward @stage2 mb 0 rows 2
    gpipe.send_gradient to 1 mb 0 channel 0 stage 2 : tensor<2x8xf32>
    gpipe.recv_gradient from 1 mb 1 channel 0 stage 2 : tensor<2x3xf32>
    gpipe.backward @stage2 mb 1 rows 2
    gpipe.send_gradient to 1 mb 1 channel 0 stage 2 : tensor<2x8xf32>
    gpipe.recv_gradient from 1 mb 0 channel 0 stage 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 0 rows 2
    gpipe.recv_gradient from 1 mb 1 channel 0 stage 0 : tensor<2x4xf32>
    gpipe.backward @stage0 mb 1 rows 2
    gpipe.optimizer_step
  }
  gpipe.program device 1 {
    gpipe.recv_activation from 0 mb 0 channel 0 stage 1 : tensor<2x4xf32>
    gpipe.forward @stage1 mb 0 rows 2
    gpipe.send_activation to 0 mb 0 channel 0 stage 1 : tensor<2x8xf32>
    gpipe.recv_activation from 0 mb 1 channel 0 stage 1 : tensor<2x4xf32>
    gpipe.forward @stage1 mb 1 rows 2
    gpipe.send_activation to 0 mb 1 channel 0 stage 1 : tensor<2x8xf32>
    // expected-error @+1 {{device 1: recv activation from device 0, micro-batch 0, channel 0 (op #6) has no matching send on device 0}}
    gpipe.recv_activation from 0 mb 0 channel 0 stage 3 : tensor<2x3xf32>
    gpipe.load_input "labels" mb 0 rows 2 stage 3
    gpipe.forward @stage3 mb 0 rows 2
    gpipe.backward @stage3 mb 0 rows 2
    gpipe.recv_activation from 0 mb 1 channel 0 stage 3 : tensor<2x3xf32>
    gpipe.send_gradient to 0 mb 0 channel 0 stage 3 : tensor<2x3xf32>
    gpipe.load_input "labels" mb 1 rows 2 stage 3
    gpipe.forward @stage3 mb 1 rows 2
    gpipe.backward @stage3 mb 1 rows 2
    gpipe.recv_gradient from 0 mb 0 channel 0 stage 1 : tensor<2x8xf32>
    gpipe.send_gradient to 0 mb 1 channel 0 stage 3 : tensor<2x3xf32>
    gpipe.backward @stage1 mb 0 rows 2
    gpipe.recv_gradient from 0 mb 1 channel 0 stage 1 : tensor<2x8xf32>
    gpipe.send_gradient to 0 mb 0 channel 0 stage 1 : tensor<2x4xf32>
    gpipe.backward @stage1 mb 1 rows 2
    gpipe.send_gradient to 0 mb 1 channel 0 stage 1 : tensor<2x4xf32>
    gpipe.optimizer_step
  }
}
