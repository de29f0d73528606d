// With codegen=native (gpipe-translate --gpipe-codegen=native) each run of
// element-wise ops whose inner values nothing else reads becomes one `kernel`
// op, a lone element-wise op a kernel of its own, and the bundle carries the
// kernels' x86-64 code. Here the last stage's backward fuses relu_grad into
// tanh_grad; the forward's add+gelu and tanh+relu stay apart because the
// backward reads the add's and the tanh's results; the second dense's tanh
// stays the library's (the GEMM's epilogue: "fuse": "dense_activation").
// RUN: gpipe-opt %s -gpipe-compile="num-stages=2 num-microbatches=2" | gpipe-translate --gpipe-to-bundle --gpipe-codegen=native | FileCheck %s
// The default writes no code.
// RUN: gpipe-opt %s -gpipe-compile="num-stages=2 num-microbatches=2" | gpipe-translate --gpipe-to-bundle | FileCheck %s --check-prefix=NONE
// Without a C compiler driver to link the objects the error says so.
// RUN: gpipe-opt %s -gpipe-compile="num-stages=2 num-microbatches=2" -o %t.mlir
// RUN: env GPIPE_CC=false not gpipe-translate --gpipe-to-bundle --gpipe-codegen=native %t.mlir 2>&1 | FileCheck %s --check-prefix=LINK
// RUN: env GPIPE_CC=no-such-cc not gpipe-translate --gpipe-to-bundle --gpipe-codegen=native %t.mlir 2>&1 | FileCheck %s --check-prefix=NOCC
// RUN: not env -u GPIPE_CC PATH=/nonexistent gpipe-translate --gpipe-to-bundle --gpipe-codegen=native %t.mlir 2>&1 | FileCheck %s --check-prefix=NODRIVER
// RUN: not gpipe-translate --gpipe-to-bundle --gpipe-codegen=jit %t.mlir 2>&1 | FileCheck %s --check-prefix=OPTION

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

// CHECK: "code": {
// CHECK-NEXT: "cpu": [
// CHECK-NEXT: {
// CHECK-NEXT: "elf": "f0VMRgIBAQ
// CHECK-NEXT: "isa": "x86-64"
// CHECK: "elf": "f0VMRgIBAQ
// CHECK-NEXT: "isa": "x86-64-v3"
// CHECK: "elf": "f0VMRgIBAQ
// CHECK-NEXT: "isa": "x86-64-v4"
// CHECK: "kernels": [
// CHECK: "ops": "rank 1: in0(0) in1(0) -> out(0); add(in0,in1)->out",
// CHECK: "ops": "rank 1: in0(0) -> out(0); gelu(in0)->out",
// CHECK: "ops": "rank 1: in0(0) in1(0) -> out(0); gelu_grad(in0,in1)->out",
// CHECK: "ops": "rank 1: in0(0) -> out(0); tanh(in0)->out",
// CHECK: "ops": "rank 1: in0(0) -> out(0); relu(in0)->out",
// CHECK: "ops": "rank 1: in0(0) in1(0) -> out(0); tanh_grad(in0,in1)->out",
// CHECK: "inputDims": [
// CHECK-NEXT: [
// CHECK-NEXT: 0
// CHECK-NEXT: ],
// CHECK-NEXT: [
// CHECK-NEXT: 0
// CHECK-NEXT: ]
// CHECK-NEXT: ],
// CHECK-NEXT: "inputs": 2,
// CHECK-NEXT: "ops": "rank 1: in0(0) in1(0) -> out(0); relu_grad(in0,in1)->t0; tanh_grad(t0,in1)->out",
// CHECK-NEXT: "outputDims": [
// CHECK-NEXT: 0
// CHECK-NEXT: ],
// CHECK-NEXT: "rank": 1,
// CHECK-NEXT: "symbol": "gpipe_kernel_6_{{[0-9a-f]+}}"
// CHECK-NEXT: }
// CHECK-NEXT: ]

// The second stage's backward: the loss's gradient, tanh_grad (kernel 5),
// the dense gradient, then kernel 6 (relu_grad of the dense's input
// gradient, then the first tanh's tanh_grad, both reading its result).
// CHECK: "op": "mse_loss_grad"
// CHECK: "kernel": 5,
// CHECK-NEXT: "op": "kernel",
// CHECK: "op": "dense_grad"
// CHECK: "op": "accumulate_grad"
// CHECK: "kernel": 6,
// CHECK-NEXT: "op": "kernel",
// CHECK-NEXT: "operands": [
// CHECK-NEXT: [[DX:[0-9]+]],
// CHECK-NEXT: [[TANH:[0-9]+]]
// Its forward: tanh and relu as kernels 3 and 4; the dense and its tanh the
// library's pair.
// CHECK: "forward": [
// CHECK: "kernel": 3,
// CHECK-NEXT: "op": "kernel",
// CHECK-NEXT: "operands": [
// CHECK-NEXT: 0
// CHECK-NEXT: ],
// CHECK-NEXT: "results": [
// CHECK-NEXT: [[TANH]]
// CHECK: "kernel": 4,
// CHECK: "fuse": "dense_activation",
// CHECK-NEXT: "op": "dense",
// CHECK: "op": "tanh",

// NONE-NOT: "code"
// NONE-NOT: "kernel"

// LINK: error: generated kernels: {{.*}}false -shared failed (status 1)

// NOCC: error: generated kernels: GPIPE_CC names 'no-such-cc', which is not a program on PATH
// NODRIVER: error: generated kernels: no C compiler driver to link them (cc, gcc or clang on PATH, or GPIPE_CC)

// OPTION: Cannot find option named 'jit'!
