// gpipe-translate --gpipe-emit-kernels writes the fused element-wise kernels of a compiled model as C++/CUDA: add+gelu and tanh+relu chains fuse in the forward, relu_grad+tanh_grad in the backward (and a recomputed add with the gelu_grad that reads it), and every other element-wise op is a kernel of its own.
// RUN: gpipe-opt %s -gpipe-compile="num-stages=2 num-microbatches=2" | gpipe-translate --gpipe-emit-kernels | FileCheck %s

gpipe.model @fused batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %y = gpipe.input "y" : tensor<4x8xf32>
  %h = gpipe.layer "fc1" -> tensor<4x8xf32> {
    %w = gpipe.param "fc1.w" glorot_uniform : tensor<8x8xf32>
    %0 = gpipe.dense %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %1 = gpipe.add %0, %x : tensor<4x8xf32>
    %2 = gpipe.gelu %1 : tensor<4x8xf32>
    gpipe.yield %2 : tensor<4x8xf32>
  }
  %a = gpipe.layer "act" -> tensor<4x8xf32> {
    %0 = gpipe.tanh %h : tensor<4x8xf32>
    %1 = gpipe.relu %0 : tensor<4x8xf32>
    gpipe.yield %1 : tensor<4x8xf32>
  }
  %p = gpipe.layer "fc2" -> tensor<4x8xf32> {
    %w = gpipe.param "fc2.w" glorot_uniform : tensor<8x8xf32>
    %0 = gpipe.dense %a, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %1 = gpipe.tanh %0 : tensor<4x8xf32>
    gpipe.yield %1 : tensor<4x8xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %p, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}

// CHECK: #ifdef __CUDACC__
// CHECK-NEXT: #define GPIPE_HD __host__ __device__
// CHECK-NEXT: #else
// CHECK-NEXT: #define GPIPE_HD
// CHECK-NEXT: #endif
// CHECK: namespace gpipe_fused_kernels {

// The residual add and the gelu of layer fc1: one kernel, its add never stored.
// CHECK-LABEL: // gpipe_stage0_k0: 2 op(s), 2 input(s), 32 elements
// CHECK-NEXT: GPIPE_HD inline float gpipe_stage0_k0(float in0, float in1) {
// CHECK-NEXT:   float t0 = in0 + in1;
// CHECK-NEXT:   float out_u = 0.7978845608028654f * (t0 + 0.044715f * t0 * t0 * t0);
// CHECK-NEXT:   float out = 0.5f * t0 * (2.0f / (1.0f + expf(fminf(-2.0f * out_u, 88.3762626647949f))));
// CHECK-NEXT:   return out;
// CHECK-NEXT: }
// CHECK-NEXT: #ifdef __CUDACC__
// CHECK-NEXT: __global__ void gpipe_stage0_k0_kernel(const float *in0, const float *in1, float *out, long n) {
// CHECK-NEXT:   for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n;
// CHECK-NEXT:        i += (long)gridDim.x * blockDim.x)
// CHECK-NEXT:     out[i] = gpipe_stage0_k0(in0[i], in1[i]);
// CHECK-NEXT: }
// CHECK-NEXT: #endif // __CUDACC__
// CHECK-NEXT: inline void gpipe_stage0_k0_host(const float *in0, const float *in1, float *out, long n) {
// CHECK-NEXT:   for (long i = 0; i < n; ++i)
// CHECK-NEXT:     out[i] = gpipe_stage0_k0(in0[i], in1[i]);
// CHECK-NEXT: }

// CHECK-LABEL: // gpipe_stage1_k0: 2 op(s), 1 input(s), 32 elements
// CHECK-NEXT: GPIPE_HD inline float gpipe_stage1_k0(float in0) {
// CHECK-NEXT:   float t0 = tanhf(in0);
// CHECK-NEXT:   float out = t0 <= 0.0f ? 0.0f : t0;

// The backward recomputes the residual add (the gelu's gradient reads it; the gelu itself, which no
// gradient reads, is not recomputed): add then gelu_grad(dy, x), one kernel, the add never stored.
// CHECK-LABEL: // gpipe_stage0_bwd_k0: 2 op(s), 3 input(s), 32 elements
// CHECK-NEXT: GPIPE_HD inline float gpipe_stage0_bwd_k0(float in0, float in1, float in2) {
// CHECK-NEXT:   float t0 = in0 + in1;
// CHECK-NEXT:   float out_x2 = t0 * t0;
// CHECK-NEXT:   float out_u = 0.7978845608028654f * t0 * (1.0f + 0.044715f * out_x2);
// CHECK-NEXT:   float out_e = expf(fminf(-2.0f * out_u, 88.3762626647949f));
// CHECK-NEXT:   float out_inv = 1.0f / (1.0f + out_e);
// CHECK-NEXT:   float out_sech2 = 4.0f * (out_e * out_inv) * out_inv;
// CHECK-NEXT:   float out_du = 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * out_x2);
// CHECK-NEXT:   float out = in2 * (0.5f * (2.0f * out_inv) + 0.5f * t0 * out_sech2 * out_du);

// relu_grad(dy, x) then tanh_grad(dx, y): x of the relu is y of the tanh, one input.
// CHECK-LABEL: // gpipe_stage1_bwd_k4: 2 op(s), 2 input(s), 32 elements
// CHECK-NEXT: GPIPE_HD inline float gpipe_stage1_bwd_k4(float in0, float in1) {
// CHECK-NEXT:   float t0 = in1 <= 0.0f ? 0.0f : in0;
// CHECK-NEXT:   float out = t0 * (1.0f - in1 * in1);
// CHECK-NEXT:   return out;

// CHECK-LABEL: static const GpipeKernelInfo gpipeKernels[] = {
// CHECK-NEXT: {"gpipe_stage0_k0", "stage0", 0, 2, 2, "add(in0,in1)->t0; gelu(t0)->out", 32, gpipe_stage0_k0_host_table},
// CHECK-NEXT: {"gpipe_stage1_k0", "stage1", 0, 1, 2, "tanh(in0)->t0; relu(t0)->out", 32, gpipe_stage1_k0_host_table},
// CHECK-NEXT: {"gpipe_stage1_k1", "stage1", 0, 1, 1, "tanh(in0)->out", 32, gpipe_stage1_k1_host_table},
// CHECK-NEXT: {"gpipe_stage0_bwd_k0", "stage0", 1, 3, 2, "add(in0,in1)->t0; gelu_grad(in2,t0)->out", 32, gpipe_stage0_bwd_k0_host_table},
// CHECK-NEXT: {"gpipe_stage1_bwd_k0", "stage1", 1, 1, 1, "tanh(in0)->out", 32, gpipe_stage1_bwd_k0_host_table},
// CHECK-NEXT: {"gpipe_stage1_bwd_k1", "stage1", 1, 1, 1, "relu(in0)->out", 32, gpipe_stage1_bwd_k1_host_table},
// CHECK-NEXT: {"gpipe_stage1_bwd_k2", "stage1", 1, 1, 1, "tanh(in0)->out", 32, gpipe_stage1_bwd_k2_host_table},
// CHECK-NEXT: {"gpipe_stage1_bwd_k3", "stage1", 1, 2, 1, "tanh_grad(in0,in1)->out", 32, gpipe_stage1_bwd_k3_host_table},
// CHECK-NEXT: {"gpipe_stage1_bwd_k4", "stage1", 1, 2, 2, "relu_grad(in0,in1)->t0; tanh_grad(t0,in1)->out", 32, gpipe_stage1_bwd_k4_host_table},
// CHECK-NEXT: };
// CHECK-NEXT: static const int gpipeNumKernels = 9;
