//===- ImageKernels.h - Scalar bodies of the kernels over images -*- C++
//-*-===//
//
// The DeviceKernels.h functors of the ops over channels-last images
// [batch, height, width, channels], all driven by a WindowGeometry
// (OpTable.h). conv2d is a GEMM over a patch matrix: Im2col builds it and
// Col2im folds a patch gradient back onto the image. Every gradient is a
// gather, an item per input element that adds its contributions in a fixed
// order: deterministic, with no atomics, on the host and the GPU alike.
//
// The patch matrix of a conv2d is [pixels, groups, KH, KW, C / groups]
// (pixels = batch x outHeight x outWidth): group g's patches are a
// column block of width KH KW C / groups, so each group is one GEMM of a
// strided batch against its filters' column block of the HWIO weight.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_DEVICE_IMAGEKERNELS_H
#define GPIPE_RUNTIME_DEVICE_IMAGEKERNELS_H

#include "gpipe/runtime/bundle/OpTable.h"
#include "gpipe/runtime/kernels/DropoutHash.h" // GPIPE_HD

#include <cstdint>

namespace gpipe::runtime::device::kernels {

/// Pixel (n, h, w) of an item index over [batch, height, width, channels]:
/// splits `i` into its channel and its pixel's coordinates.
struct ImageIndex {
  int64_t n, h, w, c;
  GPIPE_HD ImageIndex(int64_t i, int64_t height, int64_t width,
                      int64_t channels) {
    c = i % channels;
    int64_t t = i / channels;
    w = t % width;
    t /= width;
    h = t % height;
    n = t / height;
  }
};

/// The output rows (or columns) whose window covers input row `h`: those
/// o with o * stride - pad <= h < o * stride - pad + kernel, in [0, out).
struct CoveringRange {
  int64_t first, last; ///< inclusive; first > last when none
  GPIPE_HD CoveringRange(int64_t h, int64_t kernel, int64_t stride, int64_t pad,
                         int64_t out) {
    int64_t hi = h + pad; // o * stride <= hi and o * stride > hi - kernel
    last = hi / stride;
    int64_t low = hi - kernel + 1;
    first = low <= 0 ? 0 : (low + stride - 1) / stride;
    if (last > out - 1)
      last = out - 1;
  }
};

/// The sum over the output pixels (oh, ow) whose window covers input pixel
/// `at`, rows first, of term(oh, ow): every gradient's gather, in one order.
template <class Term>
GPIPE_HD float sumOverCoveringWindows(const WindowGeometry &g,
                                      const ImageIndex &at, const Term &term) {
  const CoveringRange rows(at.h, g.kernelH, g.strideH, g.padH, g.outHeight);
  const CoveringRange cols(at.w, g.kernelW, g.strideW, g.padW, g.outWidth);
  float sum = 0.0f;
  for (int64_t oh = rows.first; oh <= rows.last; ++oh)
    for (int64_t ow = cols.first; ow <= cols.last; ++ow)
      sum += term(oh, ow);
  return sum;
}

//===-- conv2d: item = run of C / groups patch entries / element of dx ----===//

/// Item t = (pixel, group, kh, kw): copies a run of C / groups channels.
struct Im2col {
  const float *x;
  float *patches;
  WindowGeometry g;
  GPIPE_HD void operator()(int64_t i) const {
    const int64_t perGroup = g.channels / g.groups;
    int64_t t = i;
    const int64_t kw = t % g.kernelW;
    t /= g.kernelW;
    const int64_t kh = t % g.kernelH;
    t /= g.kernelH;
    const int64_t group = t % g.groups;
    const int64_t pixel = t / g.groups;
    const int64_t ow = pixel % g.outWidth;
    const int64_t oh = (pixel / g.outWidth) % g.outHeight;
    const int64_t n = pixel / (g.outWidth * g.outHeight);
    const int64_t h = oh * g.strideH - g.padH + kh;
    const int64_t w = ow * g.strideW - g.padW + kw;
    float *run = patches + i * perGroup;
    if (h >= 0 && h < g.height && w >= 0 && w < g.width) {
      const float *from = x + ((n * g.height + h) * g.width + w) * g.channels +
                          group * perGroup;
      for (int64_t cc = 0; cc < perGroup; ++cc)
        run[cc] = from[cc];
    } else {
      for (int64_t cc = 0; cc < perGroup; ++cc)
        run[cc] = 0.0f;
    }
  }
};

/// dx[n, h, w, c] = the sum of the patch-gradient entries that read it, in
/// the order of the windows (rows, then columns).
struct Col2im {
  const float *patches;
  float *dx;
  WindowGeometry g;
  GPIPE_HD void operator()(int64_t i) const {
    const ImageIndex at(i, g.height, g.width, g.channels);
    const int64_t perGroup = g.channels / g.groups;
    const int64_t group = at.c / perGroup, cc = at.c - group * perGroup;
    const int64_t patch = g.kernelH * g.kernelW * perGroup;
    dx[i] = sumOverCoveringWindows(g, at, [&](int64_t oh, int64_t ow) {
      const int64_t kh = at.h + g.padH - oh * g.strideH;
      const int64_t kw = at.w + g.padW - ow * g.strideW;
      const int64_t pixel = (at.n * g.outHeight + oh) * g.outWidth + ow;
      return patches[(pixel * g.groups + group) * patch +
                     (kh * g.kernelW + kw) * perGroup + cc];
    });
  }
};

//===-- pools: item = element of y / of dx --------------------------------===//

/// The in-image part of output pixel (oh, ow)'s window: rows [h0, h1),
/// columns [w0, w1). Never empty: the pools' padding is below the window.
struct PoolWindow {
  int64_t h0, h1, w0, w1;
  GPIPE_HD PoolWindow(const WindowGeometry &g, int64_t oh, int64_t ow) {
    h0 = oh * g.strideH - g.padH;
    w0 = ow * g.strideW - g.padW;
    h1 = h0 + g.kernelH < g.height ? h0 + g.kernelH : g.height;
    w1 = w0 + g.kernelW < g.width ? w0 + g.kernelW : g.width;
    h0 = h0 < 0 ? 0 : h0;
    w0 = w0 < 0 ? 0 : w0;
  }
  GPIPE_HD int64_t count() const { return (h1 - h0) * (w1 - w0); }
};

/// The pixel index (h * width + w) of the first maximum of channel c in a
/// window of image n, rows first; of its last NaN if it holds one, as
/// PyTorch's max_pool2d (`val > maxval || isnan(val)`): the pool's value is
/// then NaN and its gradient goes to that NaN.
GPIPE_HD inline int64_t windowArgMax(const float *x, const WindowGeometry &g,
                                     const PoolWindow &window, int64_t n,
                                     int64_t c) {
  int64_t best = window.h0 * g.width + window.w0;
  float bestValue = x[(n * g.height * g.width + best) * g.channels + c];
  for (int64_t h = window.h0; h < window.h1; ++h)
    for (int64_t w = window.w0; w < window.w1; ++w) {
      const float v = x[((n * g.height + h) * g.width + w) * g.channels + c];
      if (v > bestValue || v != v) {
        bestValue = v;
        best = h * g.width + w;
      }
    }
  return best;
}

struct MaxPool2d {
  const float *x;
  float *y;
  WindowGeometry g;
  GPIPE_HD void operator()(int64_t i) const {
    const ImageIndex at(i, g.outHeight, g.outWidth, g.channels);
    const PoolWindow window(g, at.h, at.w);
    const int64_t best = windowArgMax(x, g, window, at.n, at.c);
    y[i] = x[(at.n * g.height * g.width + best) * g.channels + at.c];
  }
};

/// dx[n, h, w, c]: dy of every window whose first maximum is (h, w).
struct MaxPool2dGrad {
  const float *x, *dy;
  float *dx;
  WindowGeometry g;
  GPIPE_HD void operator()(int64_t i) const {
    const ImageIndex at(i, g.height, g.width, g.channels);
    const int64_t self = at.h * g.width + at.w;
    dx[i] = sumOverCoveringWindows(g, at, [&](int64_t oh, int64_t ow) {
      return windowArgMax(x, g, PoolWindow(g, oh, ow), at.n, at.c) == self
                 ? dy[((at.n * g.outHeight + oh) * g.outWidth + ow) *
                          g.channels +
                      at.c]
                 : 0.0f;
    });
  }
};

/// The mean of the window's in-image pixels.
struct AvgPool2d {
  const float *x;
  float *y;
  WindowGeometry g;
  GPIPE_HD void operator()(int64_t i) const {
    const ImageIndex at(i, g.outHeight, g.outWidth, g.channels);
    const PoolWindow window(g, at.h, at.w);
    float sum = 0.0f;
    for (int64_t h = window.h0; h < window.h1; ++h)
      for (int64_t w = window.w0; w < window.w1; ++w)
        sum += x[((at.n * g.height + h) * g.width + w) * g.channels + at.c];
    y[i] = sum / static_cast<float>(window.count());
  }
};

struct AvgPool2dGrad {
  const float *dy;
  float *dx;
  WindowGeometry g;
  GPIPE_HD void operator()(int64_t i) const {
    const ImageIndex at(i, g.height, g.width, g.channels);
    dx[i] = sumOverCoveringWindows(g, at, [&](int64_t oh, int64_t ow) {
      return dy[((at.n * g.outHeight + oh) * g.outWidth + ow) * g.channels +
                at.c] /
             static_cast<float>(PoolWindow(g, oh, ow).count());
    });
  }
};

//===-- global average pool: item = element of y [N, C] / of dx -----------===//

struct GlobalAvgPool {
  const float *x;
  float *y;
  int64_t pixels, channels;
  GPIPE_HD void operator()(int64_t i) const {
    const int64_t n = i / channels, c = i - n * channels;
    const float *image = x + n * pixels * channels + c;
    float sum = 0.0f;
    for (int64_t p = 0; p < pixels; ++p)
      sum += image[p * channels];
    y[i] = sum / static_cast<float>(pixels);
  }
};

struct GlobalAvgPoolGrad {
  const float *dy;
  float *dx;
  int64_t pixels, channels;
  GPIPE_HD void operator()(int64_t i) const {
    const int64_t n = i / (pixels * channels), c = i % channels;
    dx[i] = dy[n * channels + c] / static_cast<float>(pixels);
  }
};

} // namespace gpipe::runtime::device::kernels

#endif // GPIPE_RUNTIME_DEVICE_IMAGEKERNELS_H
