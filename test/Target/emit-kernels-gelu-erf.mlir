// gpipe-translate --gpipe-emit-kernels fuses the exact GELU like the tanh one: add+gelu_erf+tanh in the forward, and gelu_erf_grad with the tanh_grad that feeds it in the backward; the kernels compute Phi with erfcf.
// RUN: gpipe-opt %s -gpipe-compile="num-stages=1 num-microbatches=2" | gpipe-translate --gpipe-emit-kernels | FileCheck %s

gpipe.model @gelu_erf batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %y = gpipe.input "y" : tensor<4x8xf32>
  %h = gpipe.layer "fc" -> tensor<4x8xf32> {
    %w = gpipe.param "fc.w" glorot_uniform : tensor<8x8xf32>
    %0 = gpipe.dense %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %1 = gpipe.add %0, %x : tensor<4x8xf32>
    %2 = gpipe.gelu_erf %1 : tensor<4x8xf32>
    %3 = gpipe.tanh %2 : tensor<4x8xf32>
    gpipe.yield %3 : tensor<4x8xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %h, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// CHECK: namespace gpipe_gelu_erf_kernels {

// The forward: the residual add, the exact GELU as x Phi(x) with Phi = erfc(-x / sqrt 2) / 2, then tanh.
// CHECK-LABEL: // gpipe_stage0_k0: 3 op(s), 2 input(s), 32 elements
// CHECK-NEXT: GPIPE_HD inline float gpipe_stage0_k0(float in0, float in1) {
// CHECK-NEXT:   float t0 = in0 + in1;
// CHECK-NEXT:   float t1 = 0.5f * t0 * erfcf(-t0 * 0.7071067811865476f);
// CHECK-NEXT:   float out = tanhf(t1);
// CHECK-NEXT:   return out;

// The backward: tanh_grad feeds gelu_erf_grad(dy, x) = dy (Phi(x) + x phi(x)), phi(x) = exp(-x^2 / 2) / sqrt(2 pi).
// CHECK-LABEL: // gpipe_stage0_bwd_k2: 2 op(s), 3 input(s), 32 elements
// CHECK-NEXT: GPIPE_HD inline float gpipe_stage0_bwd_k2(float in0, float in1, float in2) {
// CHECK-NEXT:   float t0 = in0 * (1.0f - in1 * in1);
// CHECK-NEXT:   float out = t0 * (0.5f * erfcf(-in2 * 0.7071067811865476f) + in2 * 0.3989422804014327f * expf(-0.5f * in2 * in2));

// CHECK:      {"gpipe_stage0_k0", "stage0", 0, 2, 3, "add(in0,in1)->t0; gelu_erf(t0)->t1; tanh(t1)->out", 32, gpipe_stage0_k0_host_table},
// CHECK:      {"gpipe_stage0_bwd_k2", "stage0", 1, 3, 2, "tanh_grad(in0,in1)->t0; gelu_erf_grad(t0,in2)->out", 32, gpipe_stage0_bwd_k2_host_table},
