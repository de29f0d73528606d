//===- ReferenceConvOps.cpp - Double-precision reference of the conv ops --===//

#include "ReferenceConvOps.h"

#include <cmath>
#include <cstddef>
#include <vector>

using namespace gpipe;
using namespace gpipe::reference;

namespace {
/// Visits every (output pixel, kernel tap, input channel of the group,
/// filter) of a convolution with the flat indices of the input element it
/// reads (or -1 outside the padded border), the weight and the output.
template <typename Visit> void forEachTap(const Conv2dShape &s, Visit visit) {
  const int64_t groupChannels = s.channels / s.groups;
  const int64_t groupFilters = s.filters / s.groups;
  const int64_t oh = s.outHeight(), ow = s.outWidth();
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        for (int64_t f = 0; f < s.filters; ++f) {
          const int64_t group = f / groupFilters;
          const int64_t out = ((n * oh + i) * ow + j) * s.filters + f;
          for (int64_t kh = 0; kh < s.kernelHeight; ++kh)
            for (int64_t kw = 0; kw < s.kernelWidth; ++kw) {
              const int64_t row = i * s.strideRows - s.padRows + kh;
              const int64_t col = j * s.strideCols - s.padCols + kw;
              const bool inside =
                  row >= 0 && row < s.height && col >= 0 && col < s.width;
              for (int64_t c = 0; c < groupChannels; ++c) {
                const int64_t channel = group * groupChannels + c;
                const int64_t in =
                    inside
                        ? ((n * s.height + row) * s.width + col) * s.channels +
                              channel
                        : -1;
                const int64_t weight =
                    ((kh * s.kernelWidth + kw) * groupChannels + c) *
                        s.filters +
                    f;
                visit(in, weight, out);
              }
            }
        }
}

/// Visits every output pixel and channel of a pool with the flat indices of
/// its window's in-image inputs (rows, then columns) and its output.
template <typename Visit>
void forEachWindow(const Pool2dShape &s, Visit visit) {
  const int64_t oh = s.outHeight(), ow = s.outWidth();
  std::vector<int64_t> inputs;
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        for (int64_t c = 0; c < s.channels; ++c) {
          inputs.clear();
          for (int64_t kh = 0; kh < s.windowHeight; ++kh)
            for (int64_t kw = 0; kw < s.windowWidth; ++kw) {
              const int64_t row = i * s.strideRows - s.padRows + kh;
              const int64_t col = j * s.strideCols - s.padCols + kw;
              if (row >= 0 && row < s.height && col >= 0 && col < s.width)
                inputs.push_back(
                    ((n * s.height + row) * s.width + col) * s.channels + c);
            }
          visit(inputs, ((n * oh + i) * ow + j) * s.channels + c);
        }
}

/// The first input of `inputs` holding their maximum, or their last NaN:
/// PyTorch's max_pool2d takes val when `val > maxval || isnan(val)`.
int64_t firstMaximum(const Vec &x, const std::vector<int64_t> &inputs) {
  int64_t best = inputs.front();
  for (int64_t in : inputs)
    if (x[in] > x[best] || std::isnan(x[in]))
      best = in;
  return best;
}
} // namespace

Vec reference::maxPool2dForward(const Vec &x, const Pool2dShape &shape) {
  Vec y(shape.outputSize());
  forEachWindow(shape, [&](const std::vector<int64_t> &inputs, int64_t out) {
    y[out] = x[firstMaximum(x, inputs)];
  });
  return y;
}

Vec reference::maxPool2dBackward(const Vec &dy, const Vec &x,
                                 const Pool2dShape &shape) {
  Vec dx(shape.inputSize(), 0.0);
  forEachWindow(shape, [&](const std::vector<int64_t> &inputs, int64_t out) {
    dx[firstMaximum(x, inputs)] += dy[out];
  });
  return dx;
}

Vec reference::avgPool2dForward(const Vec &x, const Pool2dShape &shape) {
  Vec y(shape.outputSize(), 0.0);
  forEachWindow(shape, [&](const std::vector<int64_t> &inputs, int64_t out) {
    for (int64_t in : inputs)
      y[out] += x[in];
    y[out] /= double(inputs.size());
  });
  return y;
}

Vec reference::avgPool2dBackward(const Vec &dy, const Pool2dShape &shape) {
  Vec dx(shape.inputSize(), 0.0);
  forEachWindow(shape, [&](const std::vector<int64_t> &inputs, int64_t out) {
    for (int64_t in : inputs)
      dx[in] += dy[out] / double(inputs.size());
  });
  return dx;
}

Vec reference::conv2dForward(const Vec &x, const Vec &w, const Vec &b,
                             const Conv2dShape &shape) {
  Vec y(shape.outputSize(), 0.0);
  forEachTap(shape, [&](int64_t in, int64_t weight, int64_t out) {
    if (in >= 0)
      y[out] += x[in] * w[weight];
  });
  if (!b.empty())
    for (std::size_t k = 0; k < y.size(); ++k)
      y[k] += b[k % shape.filters];
  return y;
}

Conv2dGrads reference::conv2dBackward(const Vec &dy, const Vec &x, const Vec &w,
                                      const Conv2dShape &shape) {
  Conv2dGrads g;
  g.dx.assign(shape.inputSize(), 0.0);
  g.dw.assign(shape.weightSize(), 0.0);
  g.db.assign(shape.filters, 0.0);
  forEachTap(shape, [&](int64_t in, int64_t weight, int64_t out) {
    if (in < 0)
      return;
    g.dx[in] += dy[out] * w[weight];
    g.dw[weight] += dy[out] * x[in];
  });
  for (std::size_t k = 0; k < dy.size(); ++k)
    g.db[k % shape.filters] += dy[k];
  return g;
}

Vec reference::globalAvgPoolForward(const Vec &x, int64_t batch, int64_t pixels,
                                    int64_t channels) {
  Vec y(batch * channels, 0.0);
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t p = 0; p < pixels; ++p)
      for (int64_t c = 0; c < channels; ++c)
        y[n * channels + c] += x[(n * pixels + p) * channels + c];
  for (double &v : y)
    v /= double(pixels);
  return y;
}

Vec reference::globalAvgPoolBackward(const Vec &dy, int64_t batch,
                                     int64_t pixels, int64_t channels) {
  Vec dx(batch * pixels * channels);
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t p = 0; p < pixels; ++p)
      for (int64_t c = 0; c < channels; ++c)
        dx[(n * pixels + p) * channels + c] =
            dy[n * channels + c] / double(pixels);
  return dx;
}

BatchNormResult reference::batchNormForward(const Vec &x, const Vec &gamma,
                                            const Vec &beta, int64_t rows,
                                            int64_t channels, double epsilon) {
  BatchNormResult r;
  r.mean.assign(channels, 0.0);
  r.variance.assign(channels, 0.0);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < channels; ++c)
      r.mean[c] += x[i * channels + c] / double(rows);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < channels; ++c) {
      const double d = x[i * channels + c] - r.mean[c];
      r.variance[c] += d * d / double(rows);
    }
  r.y.resize(x.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < channels; ++c)
      r.y[i * channels + c] = gamma[c] * (x[i * channels + c] - r.mean[c]) /
                                  std::sqrt(r.variance[c] + epsilon) +
                              beta[c];
  return r;
}

BatchNormGrads reference::batchNormBackward(const Vec &dy, const Vec &x,
                                            const Vec &gamma, int64_t rows,
                                            int64_t channels, double epsilon) {
  const BatchNormResult f =
      batchNormForward(x, gamma, Vec(channels, 0.0), rows, channels, epsilon);
  BatchNormGrads g;
  g.dx.assign(x.size(), 0.0);
  g.dgamma.assign(channels, 0.0);
  g.dbeta.assign(channels, 0.0);
  const double n = double(rows);
  for (int64_t c = 0; c < channels; ++c) {
    const double s = std::sqrt(f.variance[c] + epsilon);
    // y = gamma (x - mu) / s: dL/dvar and dL/dmu collect every row's path.
    double dvar = 0.0, dmu = 0.0;
    for (int64_t i = 0; i < rows; ++i) {
      const double xc = x[i * channels + c] - f.mean[c];
      const double dxhat = dy[i * channels + c] * gamma[c];
      dvar += dxhat * xc * -0.5 / (s * s * s);
      dmu += -dxhat / s;
      g.dgamma[c] += dy[i * channels + c] * xc / s;
      g.dbeta[c] += dy[i * channels + c];
    }
    // d(var)/d(mu) = -2 mean(x - mu) = 0.
    for (int64_t i = 0; i < rows; ++i) {
      const double xc = x[i * channels + c] - f.mean[c];
      g.dx[i * channels + c] =
          dy[i * channels + c] * gamma[c] / s + dvar * 2.0 * xc / n + dmu / n;
    }
  }
  return g;
}
