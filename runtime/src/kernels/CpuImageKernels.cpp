//===- CpuImageKernels.cpp - im2col and col2im as channel-run copies ------===//
//
// Channels last makes every (pixel, group, kernel tap) of the patch matrix a
// contiguous run of C / groups floats of the image, so the CPU copies runs
// (or zero-fills them where the tap falls in the padding) instead of
// computing each element's source with divisions, as the device functors
// must. col2im adds the runs back in a fixed order (pixels, then taps):
// deterministic, a different order of addition from Col2im's gather.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/kernels/CpuKernels.h"

#include <cstring>

using namespace gpipe::runtime;

namespace {
/// Calls run(patchOffset, imageOffset or -1 in the padding) for every run of
/// C / groups floats of the patch matrix, in its order.
template <class Run> void forEachRun(const WindowGeometry &g, Run run) {
  const int64_t perGroup = g.channels / g.groups;
  int64_t at = 0;
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t oh = 0; oh < g.outHeight; ++oh)
      for (int64_t ow = 0; ow < g.outWidth; ++ow)
        for (int64_t group = 0; group < g.groups; ++group)
          for (int64_t kh = 0; kh < g.kernelH; ++kh) {
            const int64_t h = oh * g.strideH - g.padH + kh;
            for (int64_t kw = 0; kw < g.kernelW; ++kw, at += perGroup) {
              const int64_t w = ow * g.strideW - g.padW + kw;
              const bool inside =
                  h >= 0 && h < g.height && w >= 0 && w < g.width;
              run(at, inside ? ((n * g.height + h) * g.width + w) * g.channels +
                                   group * perGroup
                             : -1);
            }
          }
}
} // namespace

void cpu::im2col(const float *x, float *patches, const WindowGeometry &g) {
  const size_t bytes = size_t(g.channels / g.groups) * sizeof(float);
  forEachRun(g, [&](int64_t at, int64_t from) {
    if (from < 0)
      std::memset(patches + at, 0, bytes);
    else
      std::memcpy(patches + at, x + from, bytes);
  });
}

void cpu::col2im(const float *patches, float *dx, const WindowGeometry &g) {
  const int64_t perGroup = g.channels / g.groups;
  std::memset(
      dx, 0, size_t(g.batch * g.height * g.width * g.channels) * sizeof(float));
  forEachRun(g, [&](int64_t at, int64_t to) {
    if (to >= 0)
      for (int64_t k = 0; k < perGroup; ++k)
        dx[to + k] += patches[at + k];
  });
}
