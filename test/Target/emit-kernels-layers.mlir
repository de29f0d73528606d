// Fusion looks through layer boundaries: a value a layer yields whose only user is an element-wise op of the next layer fuses with it, while a value with a second user (here the stage's yield) ends its group as the output.
// RUN: gpipe-translate --gpipe-emit-kernels %s | FileCheck %s

gpipe.model @layers batch 2 {
  %x = gpipe.input "x" : tensor<2x3xf32>
  %b = gpipe.input "b" : tensor<2x3xf32>
  %s:2 = gpipe.stage @stage0 index 0 (%x, %b) : (tensor<2x3xf32>, tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<f32>) {
  ^bb0(%arg0: tensor<2x3xf32>, %arg1: tensor<2x3xf32>):
    %h = gpipe.layer "res" -> tensor<2x3xf32> {
      %0 = gpipe.add %arg0, %arg1 : tensor<2x3xf32>
      %1 = gpipe.gelu %0 : tensor<2x3xf32>
      gpipe.yield %1 : tensor<2x3xf32>
    }
    %a = gpipe.layer "act" -> tensor<2x3xf32> {
      %0 = gpipe.tanh %h : tensor<2x3xf32>
      %1 = gpipe.add %0, %arg0 : tensor<2x3xf32>
      gpipe.yield %1 : tensor<2x3xf32>
    }
    %r = gpipe.layer "relu" -> tensor<2x3xf32> {
      %0 = gpipe.relu %a : tensor<2x3xf32>
      gpipe.yield %0 : tensor<2x3xf32>
    }
    %l = gpipe.layer "loss" -> tensor<f32> {
      %0 = gpipe.mse_loss %r, %a : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
      gpipe.yield %0 : tensor<f32>
    }
    gpipe.yield %a, %l : tensor<2x3xf32>, tensor<f32>
  }
  gpipe.return %s#1 : tensor<f32>
}

// add, gelu (layer "res"), tanh and add (layer "act") make one kernel of two
// inputs; %arg0 is read twice but passed once.
// CHECK-LABEL: // gpipe_stage0_k0: 4 op(s), 2 input(s), 6 elements
// CHECK-NEXT: GPIPE_HD inline float gpipe_stage0_k0(float in0, float in1) {
// CHECK-NEXT:   float t0 = in0 + in1;
// CHECK-NEXT:   float t1_u = 0.7978845608028654f * (t0 + 0.044715f * t0 * t0 * t0);
// CHECK-NEXT:   float t1 = 0.5f * t0 * (2.0f / (1.0f + expf(fminf(-2.0f * t1_u, 88.3762626647949f))));
// CHECK-NEXT:   float t2 = tanhf(t1);
// CHECK-NEXT:   float out = t2 + in0;
// CHECK-NEXT:   return out;

// The relu's input is also yielded by the stage and read by the loss: it is
// its own kernel.
// CHECK-LABEL: // gpipe_stage0_k1: 1 op(s), 1 input(s), 6 elements
// CHECK:        float out = in0 <= 0.0f ? 0.0f : in0;

// CHECK-LABEL: static const GpipeKernelInfo gpipeKernels[] = {
// CHECK-NEXT: {"gpipe_stage0_k0", "stage0", 0, 2, 4, "add(in0,in1)->t0; gelu(t0)->t1; tanh(t1)->t2; add(t2,in0)->out", 6, gpipe_stage0_k0_host_table},
// CHECK-NEXT: {"gpipe_stage0_k1", "stage0", 0, 1, 1, "relu(in0)->out", 6, gpipe_stage0_k1_host_table},
// CHECK-NEXT: };
// CHECK-NEXT: static const int gpipeNumKernels = 2;
