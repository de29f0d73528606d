//===- BroadcastGradientsTest.cpp - Broadcasting and reductions, end to end ===//
//
// Small models over x [4, 3, 5] and parameters p and q that broadcast
// (NumPy's rules), reduce (sum, mean, max; axes kept or dropped), sum back
// (sum_to), slice, concatenate, multiply matrices (batched) and mask
// (comparisons, where, casts): z = f(x, p, q), loss = mse(z, y). Each is
// compiled (the gradients gpipe-differentiate writes, the N-D kernels the
// bundle generates), trained one step by the runtime on two micro-batches of
// two rows (so that a batched kernel runs on fewer rows than the full
// batch), and its loss and parameter gradients are compared with
//  - f64 central differences of the same function, evaluated here in double
//    with plain loops (a broadcasting evaluator of its own), on one stage and
//    across two;
//  - PyTorch autograd on committed fixtures
//    (test/Integration/Inputs/broadcast-autograd.json,
//    scripts/pytorch/broadcast_fixtures.py), with PyTorch's parameter values:
//    among them a maximum reached several times (torch.amax shares the
//    gradient among its ties).
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/exec/Executor.h"

#include "AllClose.h"
#include "CompiledSupport.h"
#include "DoubleTensors.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace rt = gpipe::runtime;
using gpipe::testing::compile;

namespace {

using gpipe::testing::count;
using gpipe::testing::doublesOf;
using gpipe::testing::floatsOf;
using gpipe::testing::fromFloats;
using gpipe::testing::Shape;
using gpipe::testing::T;

/// The coordinates of flat index `i` in `shape`.
Shape coordinates(int64_t i, const Shape &shape) {
  Shape at(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    at[d] = i % shape[d];
    i /= shape[d];
  }
  return at;
}

/// `t`'s element at `at` (coordinates in a shape `t` broadcasts to, aligned
/// at the last dimension).
double read(const T &t, const Shape &at) {
  int64_t index = 0;
  size_t offset = at.size() - t.shape.size();
  for (size_t d = 0; d < t.shape.size(); ++d)
    index = index * t.shape[d] + (t.shape[d] == 1 ? 0 : at[offset + d]);
  return t.v[index];
}

T binary(const T &a, const T &b, const std::function<double(double, double)> &f) {
  T out;
  size_t rank = std::max(a.shape.size(), b.shape.size());
  for (size_t d = 0; d < rank; ++d) {
    auto dim = [&](const T &t) {
      size_t offset = rank - t.shape.size();
      return d < offset ? int64_t(1) : t.shape[d - offset];
    };
    out.shape.push_back(std::max(dim(a), dim(b)));
  }
  for (int64_t i = 0; i < count(out.shape); ++i) {
    Shape at = coordinates(i, out.shape);
    out.v.push_back(f(read(a, at), read(b, at)));
  }
  return out;
}

T unary(const T &a, const std::function<double(double)> &f) {
  T out = a;
  for (double &v : out.v)
    v = f(v);
  return out;
}

enum class Reduce { Sum, Mean, Max };

/// `a` reduced over `axes`, kept as 1 or dropped.
T reduce(const T &a, const std::vector<size_t> &axes, bool keep, Reduce kind) {
  Shape kept = a.shape;
  for (size_t axis : axes)
    kept[axis] = 1;
  T out{kept, std::vector<double>(count(kept),
                                  kind == Reduce::Max
                                      ? -std::numeric_limits<double>::infinity()
                                      : 0.0)};
  for (int64_t i = 0; i < count(a.shape); ++i) {
    Shape at = coordinates(i, a.shape);
    for (size_t axis : axes)
      at[axis] = 0;
    int64_t index = 0;
    for (size_t d = 0; d < kept.size(); ++d)
      index = index * kept[d] + at[d];
    out.v[index] = kind == Reduce::Max ? std::max(out.v[index], a.v[i])
                                       : out.v[index] + a.v[i];
  }
  if (kind == Reduce::Mean)
    for (double &v : out.v)
      v /= double(count(a.shape) / count(kept));
  if (!keep) {
    Shape dropped;
    for (size_t d = 0; d < kept.size(); ++d)
      if (std::find(axes.begin(), axes.end(), d) == axes.end())
        dropped.push_back(kept[d]);
    out.shape = dropped;
  }
  return out;
}

double sigmoid(double v) { return 1 / (1 + std::exp(-v)); }
T add(const T &a, const T &b) {
  return binary(a, b, [](double u, double v) { return u + v; });
}
T mul(const T &a, const T &b) {
  return binary(a, b, [](double u, double v) { return u * v; });
}

/// Every steps[d]-th element of `a` from starts[d], `shape` of them.
T slice(const T &a, const Shape &starts, const Shape &steps,
        const Shape &shape) {
  T out{shape, {}};
  for (int64_t i = 0; i < count(shape); ++i) {
    Shape at = coordinates(i, shape);
    int64_t index = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      index = index * a.shape[d] + starts[d] + steps[d] * at[d];
    out.v.push_back(a.v[index]);
  }
  return out;
}

/// `parts` one after another along `axis`.
T concat(const std::vector<T> &parts, size_t axis) {
  T out{parts[0].shape, {}};
  out.shape[axis] = 0;
  for (const T &part : parts)
    out.shape[axis] += part.shape[axis];
  for (int64_t i = 0; i < count(out.shape); ++i) {
    Shape at = coordinates(i, out.shape);
    size_t k = 0;
    while (at[axis] >= parts[k].shape[axis])
      at[axis] -= parts[k++].shape[axis];
    int64_t index = 0;
    for (size_t d = 0; d < at.size(); ++d)
      index = index * parts[k].shape[d] + at[d];
    out.v.push_back(parts[k].v[index]);
  }
  return out;
}

/// The last two dimensions of `a` swapped.
T transposeLast(const T &a) {
  T out{a.shape, {}};
  size_t r = a.shape.size();
  std::swap(out.shape[r - 2], out.shape[r - 1]);
  for (int64_t i = 0; i < count(out.shape); ++i) {
    Shape at = coordinates(i, out.shape);
    std::swap(at[r - 2], at[r - 1]);
    int64_t index = 0;
    for (size_t d = 0; d < r; ++d)
      index = index * a.shape[d] + at[d];
    out.v.push_back(a.v[index]);
  }
  return out;
}

/// numpy.matmul of `a` [..., M, K] and `b` [..., K, N], batch dimensions
/// broadcasting.
T matmul(const T &a, const T &b) {
  Shape batchA(a.shape.begin(), a.shape.end() - 2),
      batchB(b.shape.begin(), b.shape.end() - 2);
  size_t rank = std::max(batchA.size(), batchB.size());
  Shape batch;
  for (size_t d = 0; d < rank; ++d) {
    auto dim = [&](const Shape &s) {
      size_t offset = rank - s.size();
      return d < offset ? int64_t(1) : s[d - offset];
    };
    batch.push_back(std::max(dim(batchA), dim(batchB)));
  }
  const int64_t m = a.shape[a.shape.size() - 2], k = a.shape.back(),
                n = b.shape.back();
  // The element of `t` (batch `t.shape` minus its matrix) at batch
  // coordinates `at` (broadcast) and matrix position (i, j).
  auto element = [&](const T &t, const Shape &at, int64_t i, int64_t j) {
    size_t tb = t.shape.size() - 2, offset = rank - tb;
    int64_t index = 0;
    for (size_t d = 0; d < tb; ++d)
      index = index * t.shape[d] + (t.shape[d] == 1 ? 0 : at[offset + d]);
    return t.v[(index * t.shape[tb] + i) * t.shape[tb + 1] + j];
  };
  T out{batch, {}};
  out.shape.push_back(m);
  out.shape.push_back(n);
  for (int64_t c = 0; c < count(batch); ++c) {
    Shape at = coordinates(c, batch);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t l = 0; l < k; ++l)
          sum += element(a, at, i, l) * element(b, at, l, j);
        out.v.push_back(sum);
      }
  }
  return out;
}

const Shape kX = {4, 3, 5};

struct Case {
  std::string name;
  Shape p, q, z;
  /// Which parameters the body reads.
  bool usesP, usesQ;
  /// MLIR lines over %x, %p, %q; the last defines %z.
  std::string body;
  std::function<T(const T &x, const T &p, const T &q)> f;
  /// Whether central differences apply (no tie at the parameters).
  bool smooth = true;
};

void PrintTo(const Case &c, std::ostream *os) { *os << c.name; }

std::vector<Case> cases() {
  const std::string x = "tensor<4x3x5xf32>";
  return {
      {"bias_add", {5}, {1}, kX, true, false,
       "%z = gpipe.add %x, %p : " + x + ", tensor<5xf32> -> " + x,
       [](const T &x, const T &p, const T &) { return add(x, p); }},
      {"scale_rows", {1}, {3, 1}, kX, false, true,
       "%z = gpipe.mul %x, %q : " + x + ", tensor<3x1xf32> -> " + x,
       [](const T &x, const T &, const T &q) { return mul(x, q); }},
      {"outer_sub", {5}, {3, 1}, kX, true, true,
       "%d = gpipe.sub %q, %p : tensor<3x1xf32>, tensor<5xf32> -> "
       "tensor<3x5xf32>\n"
       "%z = gpipe.add %x, %d : " + x + ", tensor<3x5xf32> -> " + x,
       [](const T &x, const T &p, const T &q) {
         return add(x, binary(q, p, [](double a, double b) { return a - b; }));
       }},
      {"div_broadcast", {1}, {3, 1}, kX, false, true,
       "%e = gpipe.exp %q : tensor<3x1xf32>\n"
       "%z = gpipe.div %x, %e : " + x + ", tensor<3x1xf32> -> " + x,
       [](const T &x, const T &, const T &q) {
         return binary(x, unary(q, [](double v) { return std::exp(v); }),
                       [](double a, double b) { return a / b; });
       }},
      {"pow_broadcast", {1}, {3, 1}, kX, false, true,
       "%s = gpipe.sigmoid %x : " + x + "\n"
       "%z = gpipe.pow %s, %q : " + x + ", tensor<3x1xf32> -> " + x,
       [](const T &x, const T &, const T &q) {
         return binary(unary(x, sigmoid), q,
                       [](double a, double b) { return std::pow(a, b); });
       }},
      {"max_min", {5}, {3, 1}, kX, true, true,
       "%a = gpipe.max %x, %p : " + x + ", tensor<5xf32> -> " + x + "\n"
       "%b = gpipe.min %x, %q : " + x + ", tensor<3x1xf32> -> " + x + "\n"
       "%z = gpipe.add %a, %b : " + x,
       [](const T &x, const T &p, const T &q) {
         return add(
             binary(x, p, [](double a, double b) { return std::max(a, b); }),
             binary(x, q, [](double a, double b) { return std::min(a, b); }));
       }},
      {"rmsnorm", {5}, {1}, kX, true, false,
       "%sq = gpipe.mul %x, %x : " + x + "\n"
       "%ms = gpipe.reduce_mean %sq axes [2] : " + x + " -> tensor<4x3x1xf32>\n"
       "%r = gpipe.rsqrt %ms : tensor<4x3x1xf32>\n"
       "%n = gpipe.mul %x, %r : " + x + ", tensor<4x3x1xf32> -> " + x + "\n"
       "%z = gpipe.mul %n, %p : " + x + ", tensor<5xf32> -> " + x,
       [](const T &x, const T &p, const T &) {
         T ms = reduce(mul(x, x), {2}, true, Reduce::Mean);
         T r = unary(ms, [](double v) { return 1 / std::sqrt(v); });
         return mul(mul(x, r), p);
       }},
      {"softmax", {5}, {1}, kX, true, false,
       "%a = gpipe.mul %x, %p : " + x + ", tensor<5xf32> -> " + x + "\n"
       "%m = gpipe.reduce_max %a axes [2] : " + x + " -> tensor<4x3x1xf32>\n"
       "%c = gpipe.sub %a, %m : " + x + ", tensor<4x3x1xf32> -> " + x + "\n"
       "%e = gpipe.exp %c : " + x + "\n"
       "%s = gpipe.reduce_sum %e axes [2] : " + x + " -> tensor<4x3x1xf32>\n"
       "%z = gpipe.div %e, %s : " + x + ", tensor<4x3x1xf32> -> " + x,
       [](const T &x, const T &p, const T &) {
         T a = mul(x, p);
         T m = reduce(a, {2}, true, Reduce::Max);
         T e = unary(binary(a, m, [](double u, double v) { return u - v; }),
                     [](double v) { return std::exp(v); });
         T s = reduce(e, {2}, true, Reduce::Sum);
         return binary(e, s, [](double u, double v) { return u / v; });
       }},
      {"sum_middle", {5}, {1}, {4, 5}, true, false,
       "%a = gpipe.mul %x, %p : " + x + ", tensor<5xf32> -> " + x + "\n"
       "%z = gpipe.reduce_sum %a axes [1] : " + x + " -> tensor<4x5xf32>",
       [](const T &x, const T &p, const T &) {
         return reduce(mul(x, p), {1}, false, Reduce::Sum);
       }},
      {"sum_to", {1}, {3, 1}, {4, 1, 5}, false, true,
       "%a = gpipe.mul %x, %q : " + x + ", tensor<3x1xf32> -> " + x + "\n"
       "%z = gpipe.sum_to %a : " + x + " -> tensor<4x1x5xf32>",
       [](const T &x, const T &, const T &q) {
         return reduce(mul(x, q), {1}, true, Reduce::Sum);
       }},
      {"mean_rows", {5}, {1}, {4}, true, false,
       "%a = gpipe.add %x, %p : " + x + ", tensor<5xf32> -> " + x + "\n"
       "%z = gpipe.reduce_mean %a axes [1, 2] : " + x + " -> tensor<4xf32>",
       [](const T &x, const T &p, const T &) {
         return reduce(add(x, p), {1, 2}, false, Reduce::Mean);
       }},
      {"broadcast_to", {1}, {3, 1}, kX, false, true,
       "%b = gpipe.broadcast_to %q : tensor<3x1xf32> -> tensor<3x5xf32>\n"
       "%z = gpipe.mul %x, %b : " + x + ", tensor<3x5xf32> -> " + x,
       [](const T &x, const T &, const T &q) { return mul(x, q); }},
      {"max_drop", {5}, {1}, {4, 5}, true, false,
       "%a = gpipe.mul %x, %p : " + x + ", tensor<5xf32> -> " + x + "\n"
       "%z = gpipe.reduce_max %a axes [1] : " + x + " -> tensor<4x5xf32>",
       [](const T &x, const T &p, const T &) {
         return reduce(mul(x, p), {1}, false, Reduce::Max);
       }},
      // Heads split, scaled per position and merged back: reshape and
      // transpose, fused with a broadcasting mul.
      {"heads", {5}, {3, 1}, kX, false, true,
       "%h = gpipe.reshape %x : " + x + " -> tensor<4x3x5x1xf32>\n"
       "%t = gpipe.transpose %h perm [0, 2, 1, 3] : tensor<4x3x5x1xf32> -> "
       "tensor<4x5x3x1xf32>\n"
       "%s = gpipe.mul %t, %q : tensor<4x5x3x1xf32>, tensor<3x1xf32> -> "
       "tensor<4x5x3x1xf32>\n"
       "%b = gpipe.transpose %s perm [0, 2, 1, 3] : tensor<4x5x3x1xf32> -> "
       "tensor<4x3x5x1xf32>\n"
       "%z = gpipe.reshape %b : tensor<4x3x5x1xf32> -> " + x,
       [](const T &x, const T &, const T &q) { return mul(x, q); }},
      // Reductions over axes of size 1: the maximum of one element, a mean
      // of one; the kernels reduce over nothing.
      {"unit_axes", {5}, {1}, kX, true, false,
       "%a = gpipe.mul %x, %p : " + x + ", tensor<5xf32> -> " + x + "\n"
       "%r = gpipe.reshape %a : " + x + " -> tensor<4x3x1x5xf32>\n"
       "%m = gpipe.reduce_max %r axes [2] : tensor<4x3x1x5xf32> -> "
       "tensor<4x3x1x5xf32>\n"
       "%z = gpipe.reduce_mean %m axes [2] : tensor<4x3x1x5xf32> -> " + x,
       [](const T &x, const T &p, const T &) { return mul(x, p); }},
      // The same after a transpose fused into the reduction's kernel, whose
      // input buffer is free once it runs: the plan puts the output there,
      // and the kernel runs in place.
      {"unit_axes_in_place", {5}, {1}, kX, true, false,
       "%h = gpipe.reshape %x : " + x + " -> tensor<4x3x5x1xf32>\n"
       "%t = gpipe.transpose %h perm [0, 1, 3, 2] : tensor<4x3x5x1xf32> -> "
       "tensor<4x3x1x5xf32>\n"
       "%m = gpipe.reduce_mean %t axes [2] : tensor<4x3x1x5xf32> -> "
       "tensor<4x3x1x5xf32>\n"
       "%r = gpipe.reshape %m : tensor<4x3x1x5xf32> -> " + x + "\n"
       "%z = gpipe.mul %r, %p : " + x + ", tensor<5xf32> -> " + x,
       [](const T &x, const T &p, const T &) { return mul(x, p); }},
      {"ties", {1}, {3, 1}, {4, 1, 1}, false, true,
       "%t = gpipe.min %x, %q : " + x + ", tensor<3x1xf32> -> " + x + "\n"
       "%z = gpipe.reduce_max %t axes [1, 2] : " + x + " -> tensor<4x1x1xf32>",
       [](const T &x, const T &, const T &q) {
         return reduce(binary(x, q,
                              [](double a, double b) { return std::min(a, b); }),
                       {1, 2}, true, Reduce::Max);
       },
       /*smooth=*/false},
      // Rotary embeddings' rotate-half: two slices, a negation, a concat.
      {"rotate_half", {5}, {1}, kX, true, false,
       "%a = gpipe.mul %x, %p : " + x + ", tensor<5xf32> -> " + x + "\n"
       "%lo = gpipe.slice %a starts [0, 0, 0] steps [1, 1, 1] : " + x +
           " -> tensor<4x3x2xf32>\n"
       "%hi = gpipe.slice %a starts [0, 0, 2] steps [1, 1, 1] : " + x +
           " -> tensor<4x3x3xf32>\n"
       "%n = gpipe.neg %hi : tensor<4x3x3xf32>\n"
       "%z = gpipe.concat %n, %lo axis 2 : tensor<4x3x3xf32>, "
       "tensor<4x3x2xf32> -> " + x,
       [](const T &x, const T &p, const T &) {
         T a = mul(x, p);
         T hi = slice(a, {0, 0, 2}, {1, 1, 1}, {4, 3, 3});
         return concat({unary(hi, [](double v) { return -v; }),
                         slice(a, {0, 0, 0}, {1, 1, 1}, {4, 3, 2})},
                        2);
       }},
      // A strided slice (every other feature from the second position),
      // read twice, concatenated with its square along the positions.
      {"strided_slices", {1}, {3, 1}, {4, 4, 3}, false, true,
       "%a = gpipe.mul %x, %q : " + x + ", tensor<3x1xf32> -> " + x + "\n"
       "%s = gpipe.slice %a starts [0, 1, 0] steps [1, 1, 2] : " + x +
           " -> tensor<4x2x3xf32>\n"
       "%s2 = gpipe.mul %s, %s : tensor<4x2x3xf32>\n"
       "%z = gpipe.concat %s, %s2 axis 1 : tensor<4x2x3xf32>, "
       "tensor<4x2x3xf32> -> tensor<4x4x3xf32>",
       [](const T &x, const T &, const T &q) {
         T s = slice(mul(x, q), {0, 1, 0}, {1, 1, 2}, {4, 2, 3});
         return concat({s, mul(s, s)}, 1);
       }},
      // A split in three (a fused projection's q, k, v), two parts
      // multiplied and the third concatenated after them.
      {"split_parts", {5}, {1}, {4, 3, 3}, true, false,
       "%a = gpipe.add %x, %p : " + x + ", tensor<5xf32> -> " + x + "\n"
       "%0 = gpipe.slice %a starts [0, 0, 0] steps [1, 1, 1] : " + x +
           " -> tensor<4x3x1xf32>\n"
       "%1 = gpipe.slice %a starts [0, 0, 1] steps [1, 1, 1] : " + x +
           " -> tensor<4x3x2xf32>\n"
       "%2 = gpipe.slice %a starts [0, 0, 3] steps [1, 1, 1] : " + x +
           " -> tensor<4x3x2xf32>\n"
       "%m = gpipe.mul %2, %1 : tensor<4x3x2xf32>\n"
       "%z = gpipe.concat %m, %0 axis 2 : tensor<4x3x2xf32>, "
       "tensor<4x3x1xf32> -> tensor<4x3x3xf32>",
       [](const T &x, const T &p, const T &) {
         T a = add(x, p);
         return concat({mul(slice(a, {0, 0, 3}, {1, 1, 1}, {4, 3, 2}),
                            slice(a, {0, 0, 1}, {1, 1, 1}, {4, 3, 2})),
                        slice(a, {0, 0, 0}, {1, 1, 1}, {4, 3, 1})},
                       2);
       }},
      // Batched matrix products (a library GEMM per matrix): a parameter
      // matrix shared by every example, an example's matrix transposed, a
      // parameter transposed, and attention written out (scores, softmax,
      // weighted sum) with both operands per example.
      {"matmul_param", {5, 5}, {1}, kX, true, false,
       "%z = gpipe.matmul %x, %p : (" + x + ", tensor<5x5xf32>) -> " + x,
       [](const T &x, const T &p, const T &) { return matmul(x, p); }},
      {"matmul_transposed", {1}, {3, 5}, {4, 5, 5}, false, true,
       "%z = gpipe.matmul %x, %q transpose_lhs : (" + x +
           ", tensor<3x5xf32>) -> tensor<4x5x5xf32>",
       [](const T &x, const T &, const T &q) {
         return matmul(transposeLast(x), q);
       }},
      {"matmul_param_transposed", {2, 5}, {1}, {4, 3, 2}, true, false,
       "%z = gpipe.matmul %x, %p transpose_rhs : (" + x +
           ", tensor<2x5xf32>) -> tensor<4x3x2xf32>",
       [](const T &x, const T &p, const T &) {
         return matmul(x, transposeLast(p));
       }},
      {"attention", {5}, {1}, kX, true, false,
       "%a = gpipe.mul %x, %p : " + x + ", tensor<5xf32> -> " + x + "\n"
       "%s = gpipe.matmul %a, %a transpose_rhs : (" + x + ", " + x +
           ") -> tensor<4x3x3xf32>\n"
       "%m = gpipe.reduce_max %s axes [2] : tensor<4x3x3xf32> -> "
       "tensor<4x3x1xf32>\n"
       "%c = gpipe.sub %s, %m : tensor<4x3x3xf32>, tensor<4x3x1xf32> -> "
       "tensor<4x3x3xf32>\n"
       "%e = gpipe.exp %c : tensor<4x3x3xf32>\n"
       "%d = gpipe.reduce_sum %e axes [2] : tensor<4x3x3xf32> -> "
       "tensor<4x3x1xf32>\n"
       "%w = gpipe.div %e, %d : tensor<4x3x3xf32>, tensor<4x3x1xf32> -> "
       "tensor<4x3x3xf32>\n"
       "%z = gpipe.matmul %w, %a : (tensor<4x3x3xf32>, " + x + ") -> " + x,
       [](const T &x, const T &p, const T &) {
         T a = mul(x, p);
         T s = matmul(a, transposeLast(a));
         T m = reduce(s, {2}, true, Reduce::Max);
         T e = unary(binary(s, m, [](double u, double v) { return u - v; }),
                     [](double v) { return std::exp(v); });
         T w = binary(e, reduce(e, {2}, true, Reduce::Sum),
                      [](double u, double v) { return u / v; });
         return matmul(w, a);
       }},
      // Masks: a comparison's i1 result selects between two branches
      // (where), or becomes 0/1 factors (cast); neither passes a gradient
      // through the comparison.
      {"where_mask", {5}, {3, 1}, kX, true, true,
       "%c = gpipe.gt %x, %p : " + x + ", tensor<5xf32> -> tensor<4x3x5xi1>\n"
       "%m = gpipe.mul %x, %q : " + x + ", tensor<3x1xf32> -> " + x + "\n"
       "%z = gpipe.where %c, %m, %p : tensor<4x3x5xi1>, " + x +
           ", tensor<5xf32> -> " + x,
       [](const T &x, const T &p, const T &q) {
         T m = mul(x, q);
         T out = m;
         for (int64_t i = 0; i < count(kX); ++i) {
           Shape at = coordinates(i, kX);
           if (!(x.v[i] > read(p, at)))
             out.v[i] = read(p, at);
         }
         return out;
       }},
      {"cast_mask", {5}, {3, 1}, kX, true, true,
       "%c = gpipe.gt %x, %q : " + x + ", tensor<3x1xf32> -> tensor<4x3x5xi1>\n"
       "%f = gpipe.cast %c : tensor<4x3x5xi1> -> " + x + "\n"
       "%m = gpipe.mul %x, %f : " + x + "\n"
       "%z = gpipe.add %m, %p : " + x + ", tensor<5xf32> -> " + x,
       [](const T &x, const T &p, const T &q) {
         T f = binary(x, q, [](double a, double b) { return a > b ? 1.0 : 0.0; });
         return add(mul(x, f), p);
       }},
  };
}

std::string tensorType(const Shape &shape) {
  std::string text = "tensor<";
  for (int64_t d : shape)
    text += std::to_string(d) + "x";
  return text + "f32>";
}

std::string model(const Case &c) {
  std::string z = tensorType(c.z), text;
  text += "gpipe.model @m batch 4 {\n";
  text += "  %x = gpipe.input \"x\" : tensor<4x3x5xf32>\n";
  text += "  %y = gpipe.input \"y\" : " + z + "\n";
  text += "  %out = gpipe.layer \"op\" -> " + z + " {\n";
  if (c.usesP)
    text += "    %p = gpipe.param \"p\" normal scale 0.5 : " +
            tensorType(c.p) + "\n";
  if (c.usesQ)
    text += "    %q = gpipe.param \"q\" normal scale 0.5 : " +
            tensorType(c.q) + "\n";
  llvm::SmallVector<llvm::StringRef> lines;
  llvm::StringRef(c.body).split(lines, '\n');
  for (llvm::StringRef line : lines)
    text += "    " + line.str() + "\n";
  text += "    gpipe.yield %z : " + z + "\n  }\n";
  text += "  %l = gpipe.layer \"loss\" -> tensor<f32> {\n";
  text += "    %0 = gpipe.mse_loss %out, %y : (" + z + ", " + z +
          ") -> tensor<f32>\n";
  text += "    gpipe.yield %0 : tensor<f32>\n  }\n";
  text += "  gpipe.return %l : tensor<f32>\n}\n";
  return text;
}

double loss(const Case &c, const T &x, const T &p, const T &q, const T &y) {
  T z = c.f(x, p, q);
  double sum = 0;
  for (size_t i = 0; i < z.v.size(); ++i)
    sum += (z.v[i] - y.v[i]) * (z.v[i] - y.v[i]);
  return sum / double(z.v.size());
}

struct Trained {
  double loss = 0;
  std::map<std::string, std::vector<float>> grads;
  std::map<std::string, std::vector<float>> params;
};

/// One training step of `c` on K stages and two micro-batches, with the
/// given parameter values (or the initializers').
void trainOneStep(const Case &c, unsigned k, const std::vector<float> &x,
                  const std::vector<float> &y,
                  const std::map<std::string, std::vector<float>> &params,
                  Trained &out) {
  gpipe::testing::Compiled compiled =
      compile(model(c), k, /*m=*/2, gpipe::RematPolicy::Full);
  ASSERT_TRUE(compiled.error.empty()) << compiled.error;
  ASSERT_FALSE(compiled.bundle.code.kernels.empty());
  rt::ExecutorConfig config;
  config.seed = 3;
  auto executor =
      gpipe::testing::makeExecutor(std::move(compiled.bundle), config);
  ASSERT_TRUE(executor);
  for (const auto &[name, values] : params)
    ASSERT_EQ(executor->setParameter(name, values), "") << name;
  std::vector<std::string> names;
  if (c.usesP)
    names.push_back("p");
  if (c.usesQ)
    names.push_back("q");
  for (const std::string &name : names) {
    const std::vector<float> *value = executor->parameter(name);
    ASSERT_TRUE(value) << name;
    out.params[name] = *value;
  }
  rt::Batch batch;
  batch["x"] = rt::HostTensor::floats(kX, x);
  batch["y"] = rt::HostTensor::floats(c.z, y);
  rt::StepResult step = executor->trainStep(batch);
  ASSERT_TRUE(step.ok()) << step.error;
  out.loss = step.loss;
  for (const std::string &name : names) {
    const std::vector<float> *grad = executor->gradient(name);
    ASSERT_TRUE(grad) << name;
    out.grads[name] = *grad;
  }
}

void checkCentralDifferences(const Case &c, unsigned k) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(count(kX)), y(count(c.z));
  for (float &v : x)
    v = u(rng);
  for (float &v : y)
    v = u(rng);
  Trained trained;
  trainOneStep(c, k, x, y, {}, trained);
  if (::testing::Test::HasFatalFailure())
    return;
  // Unused parameters are ones of their shape (the reference ignores them).
  std::map<std::string, T> w = {
      {"p", {c.p, std::vector<double>(count(c.p), 1.0)}},
      {"q", {c.q, std::vector<double>(count(c.q), 1.0)}}};
  for (const auto &[name, values] : trained.params)
    w[name] = fromFloats(name == "p" ? c.p : c.q, values);
  T tx = fromFloats(kX, x), ty = fromFloats(c.z, y);
  double expected = loss(c, tx, w["p"], w["q"], ty);
  EXPECT_NEAR(trained.loss, expected, 1e-5 * std::max(1.0, std::fabs(expected)))
      << c.name;
  for (const auto &[name, grad] : trained.grads) {
    std::vector<double> numeric(grad.size());
    for (size_t i = 0; i < numeric.size(); ++i) {
      const double h = 1e-6;
      std::map<std::string, T> up = w, down = w;
      up[name].v[i] += h;
      down[name].v[i] -= h;
      numeric[i] = (loss(c, tx, up["p"], up["q"], ty) -
                    loss(c, tx, down["p"], down["q"], ty)) /
                   (2 * h);
    }
    EXPECT_TRUE(gpipe::testing::allClose(grad, numeric, 2e-4, 2e-5))
        << c.name << ": gradient of " << name;
  }
}

class BroadcastGradients : public ::testing::TestWithParam<Case> {};

TEST_P(BroadcastGradients, MatchCentralDifferencesOnOneStage) {
  if (GetParam().smooth)
    checkCentralDifferences(GetParam(), 1);
}

TEST_P(BroadcastGradients, MatchCentralDifferencesAcrossTwoStages) {
  if (GetParam().smooth)
    checkCentralDifferences(GetParam(), 2);
}

TEST_P(BroadcastGradients, MatchPyTorchAutogradOnCommittedFixtures) {
  const Case &c = GetParam();
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(GPIPE_INTEGRATION_FIXTURES_DIR
                                  "/broadcast-autograd.json");
  ASSERT_TRUE(file) << "no fixture file";
  llvm::Expected<llvm::json::Value> parsed =
      llvm::json::parse((*file)->getBuffer());
  ASSERT_TRUE(bool(parsed)) << llvm::toString(parsed.takeError());
  const llvm::json::Object *fixture =
      parsed->getAsObject()->getObject("cases")->getObject(c.name);
  ASSERT_TRUE(fixture) << "no fixture for " << c.name;

  std::map<std::string, std::vector<float>> params;
  if (c.usesP)
    params["p"] = floatsOf(fixture->get("p"));
  if (c.usesQ)
    params["q"] = floatsOf(fixture->get("q"));
  Trained trained;
  trainOneStep(c, 1, floatsOf(fixture->get("x")), floatsOf(fixture->get("y")),
               params, trained);
  if (HasFatalFailure())
    return;
  double expected = *fixture->getNumber("loss");
  EXPECT_NEAR(trained.loss, expected, 2e-6 * std::max(1.0, std::fabs(expected)));
  for (const auto &[name, grad] : trained.grads)
    EXPECT_TRUE(gpipe::testing::allClose(
        grad, doublesOf(fixture->get("grad_" + name)), 1e-5, 1e-6))
        << c.name << ": gradient of " << name;
}

// A frozen parameter (a constant of the model: a position table added to
// every example) is read by the ops but never updated, not even by AdamW's
// weight decay, while the trained gain is; the loss is the reference's at
// the table's values.
TEST(FrozenParameters, AreReadButNeverUpdated) {
  const std::string text = R"(gpipe.model @m batch 4 {
  %x = gpipe.input "x" : tensor<4x3x5xf32>
  %y = gpipe.input "y" : tensor<4x3x5xf32>
  %out = gpipe.layer "embed" -> tensor<4x3x5xf32> {
    %pos = gpipe.param "pos" normal scale 0.5 frozen : tensor<3x5xf32>
    %gain = gpipe.param "gain" ones : tensor<5xf32>
    %0 = gpipe.add %x, %pos : tensor<4x3x5xf32>, tensor<3x5xf32> -> tensor<4x3x5xf32>
    %z = gpipe.mul %0, %gain : tensor<4x3x5xf32>, tensor<5xf32> -> tensor<4x3x5xf32>
    gpipe.yield %z : tensor<4x3x5xf32>
  }
  %l = gpipe.layer "loss" -> tensor<f32> {
    %0 = gpipe.mse_loss %out, %y : (tensor<4x3x5xf32>, tensor<4x3x5xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %l : tensor<f32>
}
)";
  for (unsigned k : {1u, 2u}) {
    gpipe::testing::Compiled compiled =
        compile(text, k, /*m=*/2, gpipe::RematPolicy::Full);
    ASSERT_TRUE(compiled.error.empty()) << compiled.error;
    rt::ExecutorConfig config;
    config.seed = 3;
    config.optimizer.kind = rt::OptimizerKind::AdamW;
    config.optimizer.learningRate = 0.1f;
    config.optimizer.weightDecay = 0.5f;
    auto executor =
        gpipe::testing::makeExecutor(std::move(compiled.bundle), config);
    ASSERT_TRUE(executor);
    const std::vector<float> pos = *executor->parameter("pos");
    const std::vector<float> gain = *executor->parameter("gain");
    std::mt19937 rng(8);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> x(count(kX)), y(count(kX));
    for (float &v : x)
      v = u(rng);
    for (float &v : y)
      v = u(rng);
    rt::Batch batch;
    batch["x"] = rt::HostTensor::floats(kX, x);
    batch["y"] = rt::HostTensor::floats(kX, y);
    for (int step = 0; step < 2; ++step) {
      rt::StepResult result = executor->trainStep(batch);
      ASSERT_TRUE(result.ok()) << result.error;
      if (step == 0) {
        T z = mul(add(fromFloats(kX, x), fromFloats({3, 5}, pos)),
                  fromFloats({5}, gain));
        double want = 0;
        for (size_t i = 0; i < z.v.size(); ++i)
          want += (z.v[i] - y[i]) * (z.v[i] - y[i]);
        want /= double(z.v.size());
        EXPECT_NEAR(result.loss, want, 1e-5 * std::max(1.0, want));
      }
    }
    EXPECT_EQ(*executor->parameter("pos"), pos) << "K=" << k;
    EXPECT_NE(*executor->parameter("gain"), gain) << "K=" << k;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BroadcastGradients, ::testing::ValuesIn(cases()),
    [](const ::testing::TestParamInfo<Case> &info) { return info.param.name; });

} // namespace
