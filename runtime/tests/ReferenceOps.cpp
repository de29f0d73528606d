//===- ReferenceOps.cpp - Plain-loop double-precision reference of the ops ===//
//
// Written from the formulas, one loop per index, favouring obviousness over
// speed: this file is the ground truth of the kernel tests.
//
//===----------------------------------------------------------------------===//

#include "ReferenceOps.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace gpipe::reference {

//===-- dense -------------------------------------------------------------===//

Vec denseForward(const Vec &x, const Vec &w, const Vec &b, int64_t rows,
                 int64_t in, int64_t out) {
  Vec y(rows * out);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double sum = b[o];
      for (int64_t i = 0; i < in; ++i)
        sum += x[r * in + i] * w[i * out + o];
      y[r * out + o] = sum;
    }
  return y;
}

DenseGrads denseBackward(const Vec &dy, const Vec &x, const Vec &w,
                         int64_t rows, int64_t in, int64_t out) {
  DenseGrads g{Vec(rows * in, 0.0), Vec(in * out, 0.0), Vec(out, 0.0)};
  // y[r,o] = b[o] + sum_i x[r,i] w[i,o].
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double d = dy[r * out + o];
      g.db[o] += d;
      for (int64_t i = 0; i < in; ++i) {
        g.dx[r * in + i] += d * w[i * out + o];
        g.dw[i * out + o] += d * x[r * in + i];
      }
    }
  return g;
}

//===-- element-wise ------------------------------------------------------===//

// PyTorch's: relu(NaN) = NaN, and threshold_backward passes the gradient
// unless x <= 0 (so where x is NaN).
Vec reluForward(const Vec &x) {
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    y[i] = x[i] > 0 || std::isnan(x[i]) ? x[i] : 0.0;
  return y;
}

Vec reluBackward(const Vec &x, const Vec &dy) {
  Vec dx(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    dx[i] = x[i] <= 0 ? 0.0 : dy[i];
  return dx;
}

static const double kPi = 3.14159265358979323846;
static const double kGeluC = std::sqrt(2.0 / kPi);
static const double kGeluA = 0.044715;

Vec geluForward(const Vec &x) {
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double u = kGeluC * (x[i] + kGeluA * x[i] * x[i] * x[i]);
    y[i] = 0.5 * x[i] * (1.0 + std::tanh(u));
  }
  return y;
}

Vec geluBackward(const Vec &x, const Vec &dy) {
  Vec dx(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double v = x[i];
    double u = kGeluC * (v + kGeluA * v * v * v);
    double du = kGeluC * (1.0 + 3.0 * kGeluA * v * v);
    double t = std::tanh(u);
    // d/dx [0.5 x (1 + t(u(x)))] = 0.5 (1 + t) + 0.5 x (1 - t^2) u'(x).
    double derivative = 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * du;
    dx[i] = dy[i] * derivative;
  }
  return dx;
}

Vec geluErfForward(const Vec &x) {
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    y[i] = 0.5 * x[i] * (1.0 + std::erf(x[i] / std::sqrt(2.0)));
  return y;
}

Vec geluErfBackward(const Vec &x, const Vec &dy) {
  Vec dx(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    double v = x[i];
    // d/dx [x Phi(x)] = Phi(x) + x phi(x), phi the standard normal density.
    double cdf = 0.5 * (1.0 + std::erf(v / std::sqrt(2.0)));
    double density = std::exp(-0.5 * v * v) / std::sqrt(2.0 * kPi);
    dx[i] = dy[i] * (cdf + v * density);
  }
  return dx;
}

Vec tanhForward(const Vec &x) {
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    y[i] = std::tanh(x[i]);
  return y;
}

Vec tanhBackward(const Vec &x, const Vec &dy) {
  Vec dx(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    // d tanh / dx = 1 / cosh^2.
    double c = std::cosh(x[i]);
    dx[i] = dy[i] / (c * c);
  }
  return dx;
}

Vec addForward(const Vec &a, const Vec &b) {
  Vec y(a.size());
  for (size_t i = 0; i < a.size(); ++i)
    y[i] = a[i] + b[i];
  return y;
}

AddGrads addBackward(const Vec &dy) { return AddGrads{dy, dy}; }

//===-- softmax -----------------------------------------------------------===//

Vec softmaxForward(const Vec &x, int64_t rows, int64_t cols) {
  Vec y(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    const double *row = &x[r * cols];
    double maxValue = row[0];
    for (int64_t c = 1; c < cols; ++c)
      maxValue = std::max(maxValue, row[c]);
    double denominator = 0;
    for (int64_t c = 0; c < cols; ++c)
      denominator += std::exp(row[c] - maxValue);
    for (int64_t c = 0; c < cols; ++c)
      y[r * cols + c] = std::exp(row[c] - maxValue) / denominator;
  }
  return y;
}

Vec softmaxBackward(const Vec &x, const Vec &dy, int64_t rows, int64_t cols) {
  Vec y = softmaxForward(x, rows, cols);
  Vec dx(rows * cols, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) {
      double sum = 0;
      for (int64_t i = 0; i < cols; ++i) {
        double jacobian =
            y[r * cols + i] * ((i == j ? 1.0 : 0.0) - y[r * cols + j]);
        sum += dy[r * cols + i] * jacobian;
      }
      dx[r * cols + j] = sum;
    }
  return dx;
}

//===-- layer norm --------------------------------------------------------===//

LayerNormResult layerNormForward(const Vec &x, const Vec &gamma,
                                 const Vec &beta, int64_t rows, int64_t cols,
                                 double epsilon) {
  LayerNormResult result{Vec(rows * cols), Vec(rows), Vec(rows)};
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0;
    for (int64_t c = 0; c < cols; ++c)
      mean += x[r * cols + c];
    mean /= cols;
    double var = 0;
    for (int64_t c = 0; c < cols; ++c)
      var += (x[r * cols + c] - mean) * (x[r * cols + c] - mean);
    var /= cols;
    double rstd = 1.0 / std::sqrt(var + epsilon);
    for (int64_t c = 0; c < cols; ++c)
      result.y[r * cols + c] =
          (x[r * cols + c] - mean) * rstd * gamma[c] + beta[c];
    result.mean[r] = mean;
    result.rstd[r] = rstd;
  }
  return result;
}

LayerNormGrads layerNormBackward(const Vec &dy, const Vec &x, const Vec &gamma,
                                 int64_t rows, int64_t cols, double epsilon) {
  LayerNormGrads g{Vec(rows * cols, 0.0), Vec(cols, 0.0), Vec(cols, 0.0)};
  LayerNormResult forward =
      layerNormForward(x, Vec(cols, 1.0), Vec(cols, 0.0), rows, cols, epsilon);
  for (int64_t r = 0; r < rows; ++r) {
    double mean = forward.mean[r];
    double rstd = forward.rstd[r];
    double var = 1.0 / (rstd * rstd) - epsilon;
    // y = xhat * gamma + beta with xhat = (x - mean) / sqrt(var + eps).
    Vec dxhat(cols);
    for (int64_t c = 0; c < cols; ++c) {
      double xhat = (x[r * cols + c] - mean) * rstd;
      g.dgamma[c] += dy[r * cols + c] * xhat;
      g.dbeta[c] += dy[r * cols + c];
      dxhat[c] = dy[r * cols + c] * gamma[c];
    }
    // xhat depends on var: d xhat_c / d var = -(x_c - mean) (var + eps)^-3/2
    // / 2.
    double dvar = 0;
    for (int64_t c = 0; c < cols; ++c)
      dvar += dxhat[c] * (x[r * cols + c] - mean) * -0.5 *
              std::pow(var + epsilon, -1.5);
    // xhat and var depend on mean: var = mean_c (x_c - mean)^2 (the var path
    // contributes sum_c (x_c - mean) = 0, kept for the literal chain rule).
    double sumCentered = 0;
    for (int64_t c = 0; c < cols; ++c)
      sumCentered += x[r * cols + c] - mean;
    double dmean = 0;
    for (int64_t c = 0; c < cols; ++c)
      dmean += dxhat[c] * -rstd;
    dmean += dvar * -2.0 * sumCentered / cols;
    // mean and var depend on every x_c.
    for (int64_t c = 0; c < cols; ++c)
      g.dx[r * cols + c] = dxhat[c] * rstd +
                           dvar * 2.0 * (x[r * cols + c] - mean) / cols +
                           dmean / cols;
  }
  return g;
}

//===-- embedding ---------------------------------------------------------===//

Vec embeddingForward(const std::vector<int32_t> &ids, const Vec &table,
                     int64_t vocab, int64_t width) {
  Vec y(ids.size() * width);
  for (size_t n = 0; n < ids.size(); ++n) {
    assert(ids[n] >= 0 && ids[n] < vocab && "reference: id out of range");
    (void)vocab;
    for (int64_t c = 0; c < width; ++c)
      y[n * width + c] = table[ids[n] * width + c];
  }
  return y;
}

Vec embeddingBackward(const std::vector<int32_t> &ids, const Vec &dy,
                      int64_t vocab, int64_t width) {
  Vec dtable(vocab * width, 0.0);
  for (size_t n = 0; n < ids.size(); ++n)
    for (int64_t c = 0; c < width; ++c)
      dtable[ids[n] * width + c] += dy[n * width + c];
  return dtable;
}

//===-- multi-head self-attention -----------------------------------------===//
//
// Per batch element b and head h, with dh = d / heads and e in [0, dh):
//   q[i,e] = qkv[b,i,h dh + e], k[i,e] = qkv[b,i,d + h dh + e],
//   v[i,e] = qkv[b,i,2d + h dh + e], qkv = x wqkv + qkv_bias,
//   s[i,j] = sum_e q[i,e] k[j,e] / sqrt(dh)  (j <= i only when causal),
//   p[i,:] = softmax(s[i,:]),
//   context[b,i,h dh + e] = sum_j p[i,j] v[j,e],
//   y = context wo + out_bias (no biases: zero).

namespace {
struct AttentionShape {
  int64_t batch, seq, width, heads, headWidth;
  bool causal;
  int64_t qkvIndex(int64_t b, int64_t i, int64_t part, int64_t h,
                   int64_t e) const {
    return (b * seq + i) * 3 * width + part * width + h * headWidth + e;
  }
  int64_t probIndex(int64_t b, int64_t h, int64_t i, int64_t j) const {
    return ((b * heads + h) * seq + i) * seq + j;
  }
  int64_t tokenIndex(int64_t b, int64_t i, int64_t c) const {
    return (b * seq + i) * width + c;
  }
  bool allowed(int64_t i, int64_t j) const { return !causal || j <= i; }
};
enum { kQ = 0, kK = 1, kV = 2 };
} // namespace

AttentionResult attentionForward(const Vec &x, const Vec &wqkv, const Vec &wo,
                                 int64_t batch, int64_t seq, int64_t width,
                                 int64_t heads, bool causal, const Vec &qkvBias,
                                 const Vec &outBias) {
  AttentionShape shape{batch, seq, width, heads, width / heads, causal};
  int64_t tokens = batch * seq;
  AttentionResult result;
  result.qkv =
      denseForward(x, wqkv, qkvBias.empty() ? Vec(3 * width, 0.0) : qkvBias,
                   tokens, width, 3 * width);
  result.probs.assign(batch * heads * seq * seq, 0.0);
  result.lse.assign(batch * heads * seq, 0.0);
  result.context.assign(tokens * width, 0.0);
  const Vec &qkv = result.qkv;
  double scale = 1.0 / std::sqrt(static_cast<double>(shape.headWidth));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < seq; ++i) {
        // Scores of query i against every allowed key j, then softmax.
        Vec scores(seq, 0.0);
        double maxScore = -INFINITY;
        for (int64_t j = 0; j < seq; ++j) {
          if (!shape.allowed(i, j))
            continue;
          double dot = 0;
          for (int64_t e = 0; e < shape.headWidth; ++e)
            dot += qkv[shape.qkvIndex(b, i, kQ, h, e)] *
                   qkv[shape.qkvIndex(b, j, kK, h, e)];
          scores[j] = dot * scale;
          maxScore = std::max(maxScore, scores[j]);
        }
        double denominator = 0;
        for (int64_t j = 0; j < seq; ++j)
          if (shape.allowed(i, j))
            denominator += std::exp(scores[j] - maxScore);
        for (int64_t j = 0; j < seq; ++j)
          if (shape.allowed(i, j))
            result.probs[shape.probIndex(b, h, i, j)] =
                std::exp(scores[j] - maxScore) / denominator;
        result.lse[(b * heads + h) * seq + i] =
            maxScore + std::log(denominator);
        // Weighted sum of the values.
        for (int64_t e = 0; e < shape.headWidth; ++e) {
          double sum = 0;
          for (int64_t j = 0; j < seq; ++j)
            sum += result.probs[shape.probIndex(b, h, i, j)] *
                   qkv[shape.qkvIndex(b, j, kV, h, e)];
          result.context[shape.tokenIndex(b, i, h * shape.headWidth + e)] = sum;
        }
      }
  result.y = denseForward(result.context, wo,
                          outBias.empty() ? Vec(width, 0.0) : outBias, tokens,
                          width, width);
  return result;
}

AttentionGrads attentionBackward(const Vec &dy, const Vec &x, const Vec &wqkv,
                                 const Vec &wo, int64_t batch, int64_t seq,
                                 int64_t width, int64_t heads, bool causal,
                                 const Vec &qkvBias, const Vec &outBias) {
  AttentionShape shape{batch, seq, width, heads, width / heads, causal};
  int64_t tokens = batch * seq;
  AttentionResult forward = attentionForward(x, wqkv, wo, batch, seq, width,
                                             heads, causal, qkvBias, outBias);
  const Vec &qkv = forward.qkv;
  const Vec &probs = forward.probs;
  double scale = 1.0 / std::sqrt(static_cast<double>(shape.headWidth));

  AttentionGrads g;
  // y = context wo.
  DenseGrads output =
      denseBackward(dy, forward.context, wo, tokens, width, width);
  g.dwo = output.dw;
  g.dbo = output.db;
  const Vec &dcontext = output.dx;

  Vec dqkv(tokens * 3 * width, 0.0);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      // context[i,e] = sum_j p[i,j] v[j,e].
      Vec dprobs(seq * seq, 0.0);
      for (int64_t i = 0; i < seq; ++i)
        for (int64_t j = 0; j < seq; ++j)
          for (int64_t e = 0; e < shape.headWidth; ++e) {
            double dc =
                dcontext[shape.tokenIndex(b, i, h * shape.headWidth + e)];
            dprobs[i * seq + j] += dc * qkv[shape.qkvIndex(b, j, kV, h, e)];
            dqkv[shape.qkvIndex(b, j, kV, h, e)] +=
                probs[shape.probIndex(b, h, i, j)] * dc;
          }
      // p[i,:] = softmax(s[i,:]) over the allowed j: explicit Jacobian.
      Vec dscores(seq * seq, 0.0);
      for (int64_t i = 0; i < seq; ++i)
        for (int64_t j = 0; j < seq; ++j) {
          if (!shape.allowed(i, j))
            continue;
          double sum = 0;
          for (int64_t jj = 0; jj < seq; ++jj) {
            if (!shape.allowed(i, jj))
              continue;
            double pjj = probs[shape.probIndex(b, h, i, jj)];
            double pj = probs[shape.probIndex(b, h, i, j)];
            sum += dprobs[i * seq + jj] * pjj * ((jj == j ? 1.0 : 0.0) - pj);
          }
          dscores[i * seq + j] = sum;
        }
      // s[i,j] = scale * sum_e q[i,e] k[j,e].
      for (int64_t i = 0; i < seq; ++i)
        for (int64_t j = 0; j < seq; ++j) {
          if (!shape.allowed(i, j))
            continue;
          double ds = dscores[i * seq + j] * scale;
          for (int64_t e = 0; e < shape.headWidth; ++e) {
            dqkv[shape.qkvIndex(b, i, kQ, h, e)] +=
                ds * qkv[shape.qkvIndex(b, j, kK, h, e)];
            dqkv[shape.qkvIndex(b, j, kK, h, e)] +=
                ds * qkv[shape.qkvIndex(b, i, kQ, h, e)];
          }
        }
    }
  // qkv = x wqkv.
  DenseGrads input = denseBackward(dqkv, x, wqkv, tokens, width, 3 * width);
  g.dx = input.dx;
  g.dwqkv = input.dw;
  g.dbqkv = input.db;
  return g;
}

//===-- dropout -----------------------------------------------------------===//

Vec dropoutForward(const Vec &x, const std::vector<uint8_t> &mask,
                   double rate) {
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    y[i] = mask[i] ? x[i] / (1.0 - rate) : x[i] * 0.0; // PyTorch's x * 0
  return y;
}

Vec dropoutBackward(const std::vector<uint8_t> &mask, const Vec &dy,
                    double rate) {
  Vec dx(dy.size());
  for (size_t i = 0; i < dy.size(); ++i)
    dx[i] = mask[i] ? dy[i] / (1.0 - rate) : dy[i] * 0.0;
  return dx;
}

//===-- losses ------------------------------------------------------------===//

double softmaxCrossEntropyForward(const Vec &logits,
                                  const std::vector<int32_t> &labels,
                                  int64_t rows, int64_t classes) {
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    // -log softmax[label] = log(sum_c exp(l_c)) - l_label, shifted by the max.
    double maxValue = logits[r * classes];
    for (int64_t c = 1; c < classes; ++c)
      maxValue = std::max(maxValue, logits[r * classes + c]);
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c)
      sum += std::exp(logits[r * classes + c] - maxValue);
    double logSumExp = maxValue + std::log(sum);
    total += logSumExp - logits[r * classes + labels[r]];
  }
  return total / rows;
}

Vec softmaxCrossEntropyBackward(const Vec &logits,
                                const std::vector<int32_t> &labels,
                                double scale, int64_t rows, int64_t classes) {
  Vec probs = softmaxForward(logits, rows, classes);
  Vec dlogits(rows * classes);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < classes; ++c) {
      double onehot = c == labels[r] ? 1.0 : 0.0;
      dlogits[r * classes + c] =
          scale * (probs[r * classes + c] - onehot) / rows;
    }
  return dlogits;
}

double mseForward(const Vec &prediction, const Vec &target) {
  double total = 0;
  for (size_t i = 0; i < prediction.size(); ++i)
    total += (prediction[i] - target[i]) * (prediction[i] - target[i]);
  return total / prediction.size();
}

Vec mseBackward(const Vec &prediction, const Vec &target, double scale) {
  Vec d(prediction.size());
  double n = static_cast<double>(prediction.size());
  for (size_t i = 0; i < prediction.size(); ++i)
    d[i] = scale * 2.0 * (prediction[i] - target[i]) / n;
  return d;
}

} // namespace gpipe::reference
