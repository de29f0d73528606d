//===- ReferenceConvOps.h - Double-precision reference of the conv ops ----===//
//
// The ground truth for the convolutional ops of the gpipe dialect,
// in the style of ReferenceOps.h: forward and analytic backward written from
// the definition with plain loops in double precision, no BLAS and no code
// shared with the runtime. The backward functions are checked against
// central finite differences of the forward (ReferenceConvTest.cpp).
//
// Layouts are the dialect's: images channels-last [N, H, W, C], weights
// [KH, KW, C / groups, F], biases [F]. Backward functions RETURN fresh
// gradients.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_TESTS_REFERENCECONVOPS_H
#define GPIPE_RUNTIME_TESTS_REFERENCECONVOPS_H

#include "ReferenceOps.h"

namespace gpipe::reference {

/// The geometry of a 2-D convolution (gpipe.conv2d).
struct Conv2dShape {
  int64_t batch = 1, height = 1, width = 1, channels = 1;
  int64_t kernelHeight = 1, kernelWidth = 1, filters = 1;
  int64_t strideRows = 1, strideCols = 1, padRows = 0, padCols = 0;
  int64_t groups = 1;

  int64_t outHeight() const {
    return (height + 2 * padRows - kernelHeight) / strideRows + 1;
  }
  int64_t outWidth() const {
    return (width + 2 * padCols - kernelWidth) / strideCols + 1;
  }
  int64_t inputSize() const { return batch * height * width * channels; }
  int64_t weightSize() const {
    return kernelHeight * kernelWidth * (channels / groups) * filters;
  }
  int64_t outputSize() const {
    return batch * outHeight() * outWidth() * filters;
  }
};

/// y[n, i, j, f] = b[f] + the sum over the window of x * w, zero outside the
/// image; an empty `b` adds nothing.
Vec conv2dForward(const Vec &x, const Vec &w, const Vec &b,
                  const Conv2dShape &shape);
struct Conv2dGrads {
  Vec dx; // [N, H, W, C]
  Vec dw; // [KH, KW, C / groups, F]
  Vec db; // [F]
};
Conv2dGrads conv2dBackward(const Vec &dy, const Vec &x, const Vec &w,
                           const Conv2dShape &shape);

/// The geometry of a pooling window (gpipe.max_pool2d, gpipe.avg_pool2d):
/// padding is smaller than the window, and padded pixels take no part.
struct Pool2dShape {
  int64_t batch = 1, height = 1, width = 1, channels = 1;
  int64_t windowHeight = 1, windowWidth = 1;
  int64_t strideRows = 1, strideCols = 1, padRows = 0, padCols = 0;

  int64_t outHeight() const {
    return (height + 2 * padRows - windowHeight) / strideRows + 1;
  }
  int64_t outWidth() const {
    return (width + 2 * padCols - windowWidth) / strideCols + 1;
  }
  int64_t inputSize() const { return batch * height * width * channels; }
  int64_t outputSize() const {
    return batch * outHeight() * outWidth() * channels;
  }
};

/// y = the maximum of each window's in-image pixels; the backward sends dy
/// to the first maximum (rows, then columns), where the function is
/// differentiable when the maximum is unique. A window holding a NaN has
/// y = NaN and sends dy to its last NaN (PyTorch's max_pool2d).
Vec maxPool2dForward(const Vec &x, const Pool2dShape &shape);
Vec maxPool2dBackward(const Vec &dy, const Vec &x, const Pool2dShape &shape);
/// y = the mean of each window's in-image pixels (padding not counted).
Vec avgPool2dForward(const Vec &x, const Pool2dShape &shape);
Vec avgPool2dBackward(const Vec &dy, const Pool2dShape &shape);

/// Batch normalisation of x [rows, channels] (an image's pixels are rows)
/// with its own statistics: the mean and the biased variance per channel.
struct BatchNormResult {
  Vec y;
  Vec mean;     ///< [channels]
  Vec variance; ///< [channels], biased
};
BatchNormResult batchNormForward(const Vec &x, const Vec &gamma,
                                 const Vec &beta, int64_t rows,
                                 int64_t channels, double epsilon);
/// Gradients through the statistics, from the chain rule written out: the
/// paths through x directly, through the mean and through the variance.
struct BatchNormGrads {
  Vec dx, dgamma, dbeta;
};
BatchNormGrads batchNormBackward(const Vec &dy, const Vec &x, const Vec &gamma,
                                 int64_t rows, int64_t channels,
                                 double epsilon);

/// y[n, c] = the mean of x[n, :, :, c] over the height x width pixels.
Vec globalAvgPoolForward(const Vec &x, int64_t batch, int64_t pixels,
                         int64_t channels);
Vec globalAvgPoolBackward(const Vec &dy, int64_t batch, int64_t pixels,
                          int64_t channels);

} // namespace gpipe::reference

#endif // GPIPE_RUNTIME_TESTS_REFERENCECONVOPS_H
