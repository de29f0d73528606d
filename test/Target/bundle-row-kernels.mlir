// Leading reductions fuse: a run may start its rows with reductions over the
// trailing axes that its later steps read (KernelSpec::rowDims). The
// gradient of an RMSNorm's mean square and the backward of the softmax
// written in general ops before it (its sum of dy's products, then the
// division's and the exponential's gradients) are one row kernel of two
// leading sums; the forward's softmax is not, as the backward reads its
// maximum, exponentials and sum. The named softmax and its gradient stay
// the library's under codegen=native too (the runtime pairs the gradient
// with its forward; as a pair the library's measure as fast:
// docs/Architecture.md).
// RUN: gpipe-opt %s -gpipe-compile="num-stages=1 num-microbatches=2" -o %t.mlir
// RUN: gpipe-translate --gpipe-to-bundle --gpipe-codegen=native %t.mlir | FileCheck %s
// RUN: gpipe-translate --gpipe-to-bundle %t.mlir | FileCheck %s --check-prefix=LIBRARY
// RUN: gpipe-translate --gpipe-to-bundle --gpipe-codegen=native --gpipe-ptx %t.mlir | FileCheck %s --check-prefix=PTX

// CHECK: "kernels": [
// CHECK-DAG: "ops": "rank 2 rows 1: {{.*}}reduce_sum({{.*}}rsqrt_grad({{.*}}reduce_mean_grad[count=16]({{.*}}div_rhs_grad({{.*}}reduce_sum({{.*}}reduce_sum_grad({{.*}}exp_grad({{.*}}->out",

// CHECK-DAG: "op": "softmax",
// CHECK-DAG: "op": "softmax_grad",

// Without codegen=native the same.
// LIBRARY-DAG: "op": "softmax",
// LIBRARY-DAG: "op": "softmax_grad",

// The PTX has an entry per kernel, rows striding over the threads.
// PTX: "cuda": {
// PTX: .visible .entry gpipe_kernel_
gpipe.model @rows batch 4 {
  %x = gpipe.input "x" : tensor<4x3x16xf32>
  %t = gpipe.input "t" : tensor<4x3x16xf32>
  %y = gpipe.layer "softmax" -> tensor<4x3x16xf32> {
    %w = gpipe.param "w" normal : tensor<16xf32>
    %a = gpipe.mul %x, %w : tensor<4x3x16xf32>, tensor<16xf32> -> tensor<4x3x16xf32>
    %m = gpipe.reduce_max %a axes [2] : tensor<4x3x16xf32> -> tensor<4x3x1xf32>
    %s = gpipe.sub %a, %m : tensor<4x3x16xf32>, tensor<4x3x1xf32> -> tensor<4x3x16xf32>
    %e = gpipe.exp %s : tensor<4x3x16xf32>
    %z = gpipe.reduce_sum %e axes [2] : tensor<4x3x16xf32> -> tensor<4x3x1xf32>
    %p = gpipe.div %e, %z : tensor<4x3x16xf32>, tensor<4x3x1xf32> -> tensor<4x3x16xf32>
    gpipe.yield %p : tensor<4x3x16xf32>
  }
  %r = gpipe.layer "rmsnorm" -> tensor<4x3x16xf32> {
    %g = gpipe.param "g" ones : tensor<16xf32>
    %sq = gpipe.mul %y, %y : tensor<4x3x16xf32>
    %ms = gpipe.reduce_mean %sq axes [2] : tensor<4x3x16xf32> -> tensor<4x3x1xf32>
    %rs = gpipe.rsqrt %ms : tensor<4x3x1xf32>
    %n = gpipe.mul %y, %rs : tensor<4x3x16xf32>, tensor<4x3x1xf32> -> tensor<4x3x16xf32>
    %o = gpipe.mul %n, %g : tensor<4x3x16xf32>, tensor<16xf32> -> tensor<4x3x16xf32>
    gpipe.yield %o : tensor<4x3x16xf32>
  }
  %q = gpipe.layer "named" -> tensor<4x3x16xf32> {
    %v = gpipe.param "v" normal : tensor<16xf32>
    %b = gpipe.mul %r, %v : tensor<4x3x16xf32>, tensor<16xf32> -> tensor<4x3x16xf32>
    %0 = gpipe.softmax %b : tensor<4x3x16xf32>
    gpipe.yield %0 : tensor<4x3x16xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %q, %t : (tensor<4x3x16xf32>, tensor<4x3x16xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
