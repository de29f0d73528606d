//===- DeviceImageOps.cpp - The ops over images, issued as kernels --------===//
//
// conv2d is one strided-batch GEMM over its patch matrix (a GEMM per group;
// ImageKernels.h's layout), built by im2col in the op's scratch, except for
// a pointwise kernel, whose patch matrix is the input itself. Its gradient
// builds the patch matrix again (for dw) and then reuses that buffer for the
// patch gradient (for dx): the stream orders the two. The pools and flatten
// are single kernels.
//
//===----------------------------------------------------------------------===//

#include "exec/DeviceExecutorImpl.h"

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;

std::string DeviceExecutor::Impl::issueImageOp(
    unsigned device, const Op &op, const std::vector<const DeviceValue *> &in,
    const std::vector<float *> &out, const DeviceValue *result,
    const std::vector<bool> &accumulateInto) {
  const StreamId s = compute(device);
  DeviceBackend &b = *issue;
  auto f = [&](size_t k) { return in[k]->f(); };
  // The patch matrix's buffer: the plan's scratch for this op.
  auto patchBuffer = [&]() {
    return reinterpret_cast<float *>(
        scratchBuffer(device, scratchBytesAt(op, in)));
  };
  switch (op.kind) {
  case OpKind::Conv2d: {
    const WindowGeometry g =
        convGeometryOf(in[0]->shape.data(), in[1]->shape.data(), op.window);
    const float *patches = f(0);
    if (!g.isPointwise()) {
      float *buffer = patchBuffer();
      b.im2col(s, f(0), buffer, g);
      patches = buffer;
    }
    // y[:, group] = patches[:, group] w[:, group], a GEMM per group.
    const int64_t perGroup = g.filters / g.groups, patch = g.patch();
    GemmBatch gemm;
    gemm.m = g.pixels(), gemm.n = perGroup, gemm.k = patch;
    gemm.a = patches, gemm.lda = g.groups * patch, gemm.strideA = patch;
    gemm.b = f(1), gemm.ldb = g.filters, gemm.strideB = perGroup;
    gemm.bIsParameter = packable(*in[1]);
    gemm.c = out[0], gemm.ldc = g.filters, gemm.strideC = perGroup;
    gemm.count = g.groups;
    b.gemm(s, gemm);
    if (in.size() == 3)
      b.addRowVector(s, f(2), out[0], g.pixels(), g.filters);
    return {};
  }
  case OpKind::Conv2dGrad: {
    // (dy, x, w) -> (dx, dw)
    const WindowGeometry g =
        convGeometryOf(in[1]->shape.data(), in[2]->shape.data(), op.window);
    const int64_t perGroup = g.filters / g.groups, patch = g.patch();
    float *buffer = g.isPointwise() ? nullptr : patchBuffer();
    if (out[1]) { // dw[:, group] (+)= patches[:, group]^T dy[:, group]
      const float *patches = f(1);
      if (buffer) {
        b.im2col(s, f(1), buffer, g);
        patches = buffer;
      }
      GemmBatch gemm;
      gemm.transA = true;
      gemm.m = patch, gemm.n = perGroup, gemm.k = g.pixels();
      gemm.beta = accumulateInto[1] ? 1.0f : 0.0f;
      gemm.a = patches, gemm.lda = g.groups * patch, gemm.strideA = patch;
      gemm.b = f(0), gemm.ldb = g.filters, gemm.strideB = perGroup;
      gemm.c = out[1], gemm.ldc = g.filters, gemm.strideC = perGroup;
      gemm.count = g.groups;
      b.gemm(s, gemm);
    }
    if (out[0]) { // dpatches[:, group] = dy[:, group] w[:, group]^T, folded
      GemmBatch gemm;
      gemm.transB = true;
      gemm.m = g.pixels(), gemm.n = patch, gemm.k = perGroup;
      gemm.a = f(0), gemm.lda = g.filters, gemm.strideA = perGroup;
      gemm.b = f(2), gemm.ldb = g.filters, gemm.strideB = perGroup;
      gemm.bIsParameter = packable(*in[2]);
      gemm.c = buffer ? buffer : out[0], gemm.ldc = g.groups * patch;
      gemm.strideC = patch;
      gemm.count = g.groups;
      b.gemm(s, gemm);
      if (buffer)
        b.col2im(s, buffer, out[0], g);
    }
    return {};
  }
  case OpKind::MaxPool2d:
    b.maxPool2d(s, f(0), out[0],
                poolGeometryOf(in[0]->shape.data(), op.window));
    return {};
  case OpKind::MaxPool2dGrad:
    b.maxPool2dGrad(s, f(1), f(0), out[0],
                    poolGeometryOf(in[1]->shape.data(), op.window));
    return {};
  case OpKind::AvgPool2d:
    b.avgPool2d(s, f(0), out[0],
                poolGeometryOf(in[0]->shape.data(), op.window));
    return {};
  case OpKind::AvgPool2dGrad: // dx is shaped as the forward's input
    b.avgPool2dGrad(s, f(0), out[0],
                    poolGeometryOf(result->shape.data(), op.window));
    return {};
  case OpKind::GlobalAvgPoolGrad: {
    const std::vector<int64_t> &x = result->shape;
    b.globalAvgPoolGrad(s, f(0), out[0], x[0], x[1] * x[2], x[3]);
    return {};
  }
  case OpKind::GlobalAvgPool: {
    const std::vector<int64_t> &x = in[0]->shape;
    b.globalAvgPool(s, f(0), out[0], x[0], x[1] * x[2], x[3]);
    return {};
  }
  case OpKind::Flatten: // the same elements in the same order
  case OpKind::FlattenGrad:
    b.copyBetweenDevices(s, out[0], device, f(0), device,
                         in[0]->numElements() * 4);
    return {};
  default:
    break;
  }
  return std::string("is not an image op");
}
