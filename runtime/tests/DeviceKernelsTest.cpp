//===- DeviceKernelsTest.cpp - Device kernel bodies vs the CPU kernels ----===//
//
// Runs the functors of DeviceKernels.h through KernelsByFunctor with a
// backend whose forEach is a plain loop (ImmediateKernels), i.e. the scalar
// code the CUDA backend launches, and compares every KernelApi kernel but
// gemm with the CPU kernels (CpuKernels.h) and applyOptimizer on random data
// of several shapes: one row, one column, odd sizes.
//
// Tolerances, |actual - expected| <= rtol |expected| + atol:
//   - element-wise (relu, gelu, tanh, their grads, add, accumulate, bias,
//     mse grad, cross-entropy grad, optimizers): rtol 1e-6, atol 1e-37
//     (GELU's tails are denormal-sized on both sides); geluGrad atol 1e-6
//     (its two terms cancel where it crosses 0, near x = -0.75);
//   - row and column reductions (softmax, layer norm, column sums, losses,
//     embedding grad): rtol 1e-5, atol 1e-6 * max |expected| of the buffer
//     (entries that cancel to near zero get the buffer's scale).
// Exact: dropout's mask, output and gradient, embedding's rows.
// The CPU uses vectorized exp/tanh approximations and lane-split float sums,
// the device functors libm and sums over 32 lanes combined by a butterfly
// (run here as the GPU's warp runs it), so a few ulp are expected; the worst
// errors seen are printed at the end of the run.
//
// All randomness comes from std::mt19937_64 with fixed seeds.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/kernels/CpuKernels.h"
#include "gpipe/runtime/kernels/Optimizers.h"
#include "gpipe/runtime/kernels/KernelsByFunctor.h"

#include "ImmediateKernels.h"
#include "RandomData.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace cpu = gpipe::runtime::cpu;
using namespace gpipe::runtime;
using namespace gpipe::runtime::device;
using Floats = std::vector<float>;
using Ids = std::vector<int32_t>;
using Mask = std::vector<uint8_t>;

using gpipe::runtime::testing::ImmediateKernels;
using gpipe::runtime::testing::kStream;

namespace {

//===-- tolerances and the worst errors seen ------------------------------===//

constexpr double kElementRtol = 1e-6, kElementAtol = 1e-37;
constexpr double kGeluGradAtol = 1e-6;
constexpr double kReduceRtol = 1e-5, kReduceAtolScale = 1e-6;

struct Worst {
  double abs = 0, rel = 0;
};

std::map<std::string, Worst> &worstErrors() {
  static std::map<std::string, Worst> table;
  return table;
}

/// Prints the worst absolute and relative errors per check after the run.
class WorstErrorReport : public ::testing::Environment {
public:
  void TearDown() override {
    std::printf("Worst errors seen (device functors vs CPU kernels):\n");
    for (const auto &[name, w] : worstErrors())
      std::printf("  %-28s abs %.3g  rel %.3g\n", name.c_str(), w.abs, w.rel);
  }
};
[[maybe_unused]] const auto *const kReport =
    ::testing::AddGlobalTestEnvironment(new WorstErrorReport);

/// Element-wise closeness; records the worst errors under `name` (relative
/// errors only where |expected| exceeds atol).
::testing::AssertionResult close(const std::string &name, const Floats &actual,
                                 const Floats &expected, double rtol,
                                 double atol) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure()
           << name << ": size " << actual.size() << " != " << expected.size();
  Worst &w = worstErrors()[name];
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    double e = expected[i];
    double err = std::fabs(static_cast<double>(actual[i]) - e);
    if (!(err <= rtol * std::fabs(e) + atol) && bad++ == 0)
      first = i;
    w.abs = std::max(w.abs, err);
    if (std::fabs(e) > atol)
      w.rel = std::max(w.rel, err / std::fabs(e));
  }
  if (bad == 0)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << name << ": " << bad << " of " << actual.size()
         << " elements differ (rtol " << rtol << ", atol " << atol
         << "); first at [" << first << "]: actual " << actual[first]
         << ", expected " << expected[first];
}

::testing::AssertionResult closeElementWise(const std::string &name,
                                            const Floats &actual,
                                            const Floats &expected) {
  return close(name, actual, expected, kElementRtol, kElementAtol);
}

::testing::AssertionResult closeReduced(const std::string &name,
                                        const Floats &actual,
                                        const Floats &expected) {
  double scale = 0;
  for (float e : expected)
    scale = std::max(scale, static_cast<double>(std::fabs(e)));
  return close(name, actual, expected, kReduceRtol,
               kReduceAtolScale * scale + 1e-30);
}

//===-- data --------------------------------------------------------------===//

using gpipe::testing::randomFloats;
using gpipe::testing::randomIds;

/// Element-wise inputs: random values and the edges of the usual range (0,
/// tiny, saturating, GELU's clamped tails).
Floats elementInputs(std::mt19937_64 &rng, size_t n) {
  Floats v = randomFloats(rng, n, -6.0f, 6.0f);
  const Floats special = {0.0f,   1e-4f, -1e-4f, 3.0f,   -3.0f,  10.0f,
                          -10.0f, 30.0f, -30.0f, 100.0f, -100.0f};
  for (size_t i = 0; i < special.size() && i < n; ++i)
    v[i] = special[i];
  return v;
}

const std::vector<int64_t> kSizes = {1, 2, 7, 11, 1000, 4099};

struct Shape {
  int64_t rows, cols;
};
// {300, 19}: more rows than a column kernel's lanes (kColumnLanes), twice
// over, and a last column tile that is partly empty.
const std::vector<Shape> kShapes = {{1, 1},   {1, 7},   {5, 1},    {3, 13},
                                    {17, 64}, {9, 257}, {4, 3001}, {300, 19}};

std::string shapeName(const char *kernel, Shape s) {
  return std::string(kernel) + " " + std::to_string(s.rows) + "x" +
         std::to_string(s.cols);
}

} // namespace

//===----------------------------------------------------------------------===//
// Element-wise
//===----------------------------------------------------------------------===//

TEST(DeviceKernels, ElementWiseActivations) {
  std::mt19937_64 rng(1);
  ImmediateKernels k;
  for (int64_t n : kSizes) {
    SCOPED_TRACE(n);
    Floats x = elementInputs(rng, n), dy = randomFloats(rng, n);
    Floats y(n), dx(n), ref(n);

    k.relu(kStream, x.data(), y.data(), n);
    cpu::reluForward(x.data(), ref.data(), n);
    EXPECT_TRUE(closeElementWise("relu", y, ref));
    k.reluGrad(kStream, x.data(), dy.data(), dx.data(), n);
    cpu::reluBackward(x.data(), dy.data(), ref.data(), n);
    EXPECT_TRUE(closeElementWise("reluGrad", dx, ref));

    k.gelu(kStream, x.data(), y.data(), n);
    cpu::geluForward(x.data(), ref.data(), n);
    EXPECT_TRUE(closeElementWise("gelu", y, ref));
    k.geluGrad(kStream, x.data(), dy.data(), dx.data(), n);
    cpu::geluBackward(x.data(), dy.data(), ref.data(), n);
    // GELU's derivative crosses 0 near x = -0.75, where its two terms of
    // size 0.5 cancel: an absolute tolerance of a few of their ulps there.
    EXPECT_TRUE(close("geluGrad", dx, ref, kElementRtol, kGeluGradAtol));

    k.tanh(kStream, x.data(), y.data(), n);
    cpu::tanhForward(x.data(), ref.data(), n);
    EXPECT_TRUE(closeElementWise("tanh", y, ref));
    // From the forward's output, as the executor calls it.
    k.tanhGrad(kStream, ref.data(), dy.data(), dx.data(), n);
    Floats refDx(n);
    cpu::tanhBackward(ref.data(), dy.data(), refDx.data(), n);
    EXPECT_TRUE(closeElementWise("tanhGrad", dx, refDx));
  }
}

TEST(DeviceKernels, AddAndAccumulate) {
  std::mt19937_64 rng(2);
  ImmediateKernels k;
  for (int64_t n : kSizes) {
    SCOPED_TRACE(n);
    Floats a = randomFloats(rng, n), b = randomFloats(rng, n), y(n), ref(n);
    k.add(kStream, a.data(), b.data(), y.data(), n);
    cpu::addForward(a.data(), b.data(), ref.data(), n);
    EXPECT_TRUE(closeElementWise("add", y, ref));
    // y aliasing an operand.
    Floats aliased = a;
    k.add(kStream, aliased.data(), b.data(), aliased.data(), n);
    EXPECT_TRUE(closeElementWise("add (y = a)", aliased, ref));

    // accumulate adds onto nonzero contents.
    Floats acc = randomFloats(rng, n, 2.0f, 3.0f), accRef = acc;
    k.accumulate(kStream, a.data(), acc.data(), n);
    for (int64_t i = 0; i < n; ++i)
      accRef[i] += a[i];
    EXPECT_TRUE(closeElementWise("accumulate", acc, accRef));
  }
}

TEST(DeviceKernels, BiasForwardAndColumnSums) {
  std::mt19937_64 rng(3);
  ImmediateKernels k;
  for (Shape s : kShapes) {
    SCOPED_TRACE(shapeName("", s));
    int64_t n = s.rows * s.cols;
    Floats bias = randomFloats(rng, s.cols);
    Floats y = randomFloats(rng, n), yRef = y;
    k.addRowVector(kStream, bias.data(), y.data(), s.rows, s.cols);
    for (int64_t i = 0; i < n; ++i)
      yRef[i] += bias[i % s.cols];
    EXPECT_TRUE(closeElementWise("addRowVector", y, yRef));

    // Bias gradient: the CPU's denseBackward with only db (x and w unread).
    Floats x = randomFloats(rng, n);
    Floats sums = randomFloats(rng, s.cols, 1.0f, 2.0f), sumsRef = sums;
    k.columnSums(kStream, x.data(), sums.data(), s.rows, s.cols);
    cpu::denseBackward(x.data(), nullptr, nullptr, nullptr, nullptr,
                       sumsRef.data(), s.rows, 1, s.cols);
    EXPECT_TRUE(closeReduced("columnSums", sums, sumsRef));
  }
}

//===----------------------------------------------------------------------===//
// Rows
//===----------------------------------------------------------------------===//

TEST(DeviceKernels, Softmax) {
  std::mt19937_64 rng(4);
  ImmediateKernels k;
  for (Shape s : kShapes) {
    SCOPED_TRACE(shapeName("", s));
    int64_t n = s.rows * s.cols;
    Floats x = randomFloats(rng, n, -8.0f, 8.0f), y(n), ref(n);
    k.softmax(kStream, x.data(), y.data(), s.rows, s.cols, 0);
    cpu::softmaxForward(x.data(), ref.data(), s.rows, s.cols);
    EXPECT_TRUE(closeReduced("softmax", y, ref));
    // In place.
    Floats inPlace = x;
    k.softmax(kStream, inPlace.data(), inPlace.data(), s.rows, s.cols, 0);
    EXPECT_TRUE(closeReduced("softmax (y = x)", inPlace, ref));
  }
}

// Attention's causal mask: rows are [batch * heads, seq] queries over seq
// keys. Row r keeps columns <= r % seq; checked against a double-precision
// softmax over the kept prefix, masked entries exactly 0, rows summing to 1.
TEST(DeviceKernels, CausalSoftmax) {
  std::mt19937_64 rng(5);
  ImmediateKernels k;
  for (int64_t seq : {1, 2, 7, 33}) {
    for (int64_t blocks : {1, 3}) {
      SCOPED_TRACE("seq " + std::to_string(seq) + " blocks " +
                   std::to_string(blocks));
      int64_t rows = blocks * seq, n = rows * seq;
      Floats x = randomFloats(rng, n, -8.0f, 8.0f);
      Floats y(n, -1.0f), ref(n, 0.0f);
      k.softmax(kStream, x.data(), y.data(), rows, seq, seq);
      for (int64_t r = 0; r < rows; ++r) {
        int64_t kept = r % seq + 1;
        const float *xr = x.data() + r * seq;
        double m = *std::max_element(xr, xr + kept), sum = 0;
        for (int64_t j = 0; j < kept; ++j)
          sum += std::exp(static_cast<double>(xr[j]) - m);
        double rowSum = 0;
        for (int64_t j = 0; j < seq; ++j) {
          float v = y[r * seq + j];
          if (j >= kept) {
            EXPECT_EQ(v, 0.0f) << "masked entry (" << r << ", " << j << ")";
            continue;
          }
          ref[r * seq + j] = static_cast<float>(
              std::exp(static_cast<double>(xr[j]) - m) / sum);
          rowSum += v;
        }
        EXPECT_NEAR(rowSum, 1.0, 1e-5) << "row " << r;
      }
      EXPECT_TRUE(closeReduced("softmax causal", y, ref));
    }
  }
}

TEST(DeviceKernels, SoftmaxGrad) {
  std::mt19937_64 rng(6);
  ImmediateKernels k;
  for (Shape s : kShapes) {
    SCOPED_TRACE(shapeName("", s));
    int64_t n = s.rows * s.cols;
    Floats y(n), dy = randomFloats(rng, n), dx(n), ref(n);
    Floats x = randomFloats(rng, n, -4.0f, 4.0f);
    cpu::softmaxForward(x.data(), y.data(), s.rows, s.cols);
    k.softmaxGrad(kStream, y.data(), dy.data(), dx.data(), s.rows, s.cols);
    cpu::softmaxBackward(y.data(), dy.data(), ref.data(), s.rows, s.cols);
    EXPECT_TRUE(closeReduced("softmaxGrad", dx, ref));
    // dx aliasing dy.
    Floats inPlace = dy;
    k.softmaxGrad(kStream, y.data(), inPlace.data(), inPlace.data(), s.rows,
                  s.cols);
    EXPECT_TRUE(closeReduced("softmaxGrad (dx = dy)", inPlace, ref));
  }
}

TEST(DeviceKernels, LayerNorm) {
  std::mt19937_64 rng(7);
  ImmediateKernels k;
  const float epsilon = 1e-5f;
  for (Shape s : kShapes) {
    SCOPED_TRACE(shapeName("", s));
    int64_t n = s.rows * s.cols;
    // An offset, so that the mean's double sum and the two-pass variance
    // matter.
    Floats x = randomFloats(rng, n, 2.0f, 5.0f);
    Floats gamma = randomFloats(rng, s.cols, 0.5f, 1.5f);
    Floats beta = randomFloats(rng, s.cols);
    Floats y(n), mean(s.rows), rstd(s.rows);
    Floats yRef(n), meanRef(s.rows), rstdRef(s.rows);
    k.layerNorm(kStream, x.data(), gamma.data(), beta.data(), y.data(),
                mean.data(), rstd.data(), s.rows, s.cols, epsilon);
    cpu::layerNormForward(x.data(), gamma.data(), beta.data(), yRef.data(),
                          meanRef.data(), rstdRef.data(), s.rows, s.cols,
                          epsilon);
    EXPECT_TRUE(closeReduced("layerNorm y", y, yRef));
    EXPECT_TRUE(closeReduced("layerNorm mean", mean, meanRef));
    EXPECT_TRUE(closeReduced("layerNorm rstd", rstd, rstdRef));

    // Backward from the CPU's saved statistics: dx alone, then the
    // parameter gradients alone (accumulated onto nonzero values, and with
    // either one null).
    Floats dy = randomFloats(rng, n), dx(n), dxRef(n);
    k.layerNormGradInput(kStream, dy.data(), x.data(), gamma.data(),
                         meanRef.data(), rstdRef.data(), dx.data(), s.rows,
                         s.cols);
    cpu::layerNormBackward(dy.data(), x.data(), gamma.data(), meanRef.data(),
                           rstdRef.data(), dxRef.data(), nullptr, nullptr,
                           s.rows, s.cols);
    EXPECT_TRUE(closeReduced("layerNormGradInput", dx, dxRef));

    Floats dgamma = randomFloats(rng, s.cols, 1.0f, 2.0f);
    Floats dbeta = randomFloats(rng, s.cols, -2.0f, -1.0f);
    Floats dgammaRef = dgamma, dbetaRef = dbeta;
    k.layerNormGradParams(kStream, dy.data(), x.data(), meanRef.data(),
                          rstdRef.data(), dgamma.data(), dbeta.data(), s.rows,
                          s.cols);
    cpu::layerNormBackward(dy.data(), x.data(), gamma.data(), meanRef.data(),
                           rstdRef.data(), nullptr, dgammaRef.data(),
                           dbetaRef.data(), s.rows, s.cols);
    EXPECT_TRUE(closeReduced("layerNormGradParams dgamma", dgamma, dgammaRef));
    EXPECT_TRUE(closeReduced("layerNormGradParams dbeta", dbeta, dbetaRef));

    Floats onlyBeta = dbeta, onlyGamma = dgamma;
    k.layerNormGradParams(kStream, dy.data(), x.data(), meanRef.data(),
                          rstdRef.data(), nullptr, onlyBeta.data(), s.rows,
                          s.cols);
    k.layerNormGradParams(kStream, dy.data(), x.data(), meanRef.data(),
                          rstdRef.data(), onlyGamma.data(), nullptr, s.rows,
                          s.cols);
    cpu::layerNormBackward(dy.data(), x.data(), gamma.data(), meanRef.data(),
                           rstdRef.data(), nullptr, dgammaRef.data(),
                           dbetaRef.data(), s.rows, s.cols);
    EXPECT_TRUE(
        closeReduced("layerNormGradParams dgamma", onlyGamma, dgammaRef));
    EXPECT_TRUE(closeReduced("layerNormGradParams dbeta", onlyBeta, dbetaRef));
  }
}

//===----------------------------------------------------------------------===//
// Embedding
//===----------------------------------------------------------------------===//

TEST(DeviceKernels, Embedding) {
  std::mt19937_64 rng(8);
  ImmediateKernels k;
  for (Shape s : kShapes) {
    // rows = positions, cols = width; a small vocabulary so that ids repeat.
    SCOPED_TRACE(shapeName("", s));
    const int32_t vocab = 5;
    Floats table = randomFloats(rng, vocab * s.cols);
    Ids ids = randomIds(rng, s.rows, vocab);
    if (s.rows >= 2)
      ids[1] = ids[0]; // at least one repeat
    Floats y(s.rows * s.cols), yRef(y.size());
    k.embedding(kStream, ids.data(), table.data(), y.data(), s.rows, s.cols);
    ASSERT_EQ(cpu::embeddingForward(ids.data(), table.data(), yRef.data(),
                                    s.rows, vocab, s.cols),
              -1);
    EXPECT_EQ(y, yRef);

    Floats dy = randomFloats(rng, s.rows * s.cols);
    Floats dtable = randomFloats(rng, table.size(), 1.0f, 2.0f);
    Floats dtableRef = dtable;
    k.embeddingGrad(kStream, ids.data(), dy.data(), dtable.data(), s.rows,
                    s.cols);
    cpu::embeddingBackward(ids.data(), dy.data(), dtableRef.data(), s.rows,
                           s.cols);
    // Deterministic and in the CPU's order: the same bits.
    EXPECT_EQ(dtable, dtableRef);
  }
}

/// A row kernel that hands each lane's view of the combined values back:
/// pass 0 sums the row, pass 1 takes its maximum.
struct LaneProbe {
  const float *x;
  float *sums, *maxima; ///< [row][lane]
  int64_t cols;

  using Value = float;
  static constexpr int kPasses = 2;
  static kernels::Combine combineOf(int pass) {
    return pass == 0 ? kernels::Combine::Sum : kernels::Combine::Max;
  }
  float partial(int pass, int64_t r, int lane, const float *) const {
    float acc = pass == 0 ? 0.0f : -INFINITY;
    for (int64_t j = lane; j < cols; j += kernels::kRowLanes)
      acc = pass == 0 ? acc + x[r * cols + j] : std::max(acc, x[r * cols + j]);
    return acc;
  }
  void finish(int64_t r, int lane, const float *done) const {
    sums[r * kernels::kRowLanes + lane] = done[0];
    maxima[r * kernels::kRowLanes + lane] = done[1];
  }
};

// Every lane of a row gets the same combined value (what lets the CUDA
// kernels use any lane's copy), equal to the row's sum and maximum; rows
// narrower than the lanes leave the idle lanes' identities out.
TEST(DeviceKernels, RowLanesAllSeeTheCombinedRow) {
  std::mt19937_64 rng(21);
  for (int64_t cols : {1, 3, 31, 32, 33, 100, 1000}) {
    SCOPED_TRACE("cols " + std::to_string(cols));
    const int64_t rows = 3;
    Floats x = randomFloats(rng, rows * cols, -50.0f, 50.0f);
    Floats sums(rows * kernels::kRowLanes), maxima(sums.size());
    LaneProbe probe{x.data(), sums.data(), maxima.data(), cols};
    for (int64_t r = 0; r < rows; ++r)
      kernels::runRowOnHost(probe, r);
    for (int64_t r = 0; r < rows; ++r) {
      double exact = 0.0;
      float maximum = -INFINITY;
      for (int64_t j = 0; j < cols; ++j) {
        exact += x[r * cols + j];
        maximum = std::max(maximum, x[r * cols + j]);
      }
      for (int lane = 0; lane < kernels::kRowLanes; ++lane) {
        EXPECT_EQ(sums[r * kernels::kRowLanes + lane],
                  sums[r * kernels::kRowLanes])
            << "row " << r << " lane " << lane;
        EXPECT_EQ(maxima[r * kernels::kRowLanes + lane], maximum)
            << "row " << r << " lane " << lane;
      }
      EXPECT_NEAR(sums[r * kernels::kRowLanes], exact,
                  1e-5 * 50.0 * double(cols));
    }
  }
}

//===----------------------------------------------------------------------===//
// Dropout: the CPU's mask bit for bit
//===----------------------------------------------------------------------===//

TEST(DeviceKernels, DropoutMatchesCpuMaskExactly) {
  std::mt19937_64 rng(9);
  ImmediateKernels k;
  for (Shape s : kShapes) {
    for (float rate :
         {0.0f, 1e-7f, 0.1f, 0.3f, 0.5f, 0.9f, 0.99999994f, 1.0f}) {
      SCOPED_TRACE(shapeName("", s) + " rate " + std::to_string(rate));
      int64_t n = s.rows * s.cols;
      const uint64_t seed = 0xC0FFEE, step = 7;
      const int64_t rowOffset = 12345;
      Floats x = randomFloats(rng, n), y(n), yRef(n);
      Mask mask(n, 7), maskRef(n, 9);
      k.dropout(kStream, x.data(), y.data(), mask.data(), s.rows, s.cols, rate,
                seed, step, rowOffset);
      cpu::dropoutForward(x.data(), yRef.data(), maskRef.data(), s.rows, s.cols,
                          rate, seed, step, rowOffset);
      EXPECT_EQ(mask, maskRef);
      EXPECT_EQ(y, yRef);

      Floats dy = randomFloats(rng, n), dx(n, 5.0f), dxRef(n);
      k.dropoutGrad(kStream, mask.data(), dy.data(), dx.data(), n, rate);
      cpu::dropoutBackward(maskRef.data(), dy.data(), dxRef.data(), n, rate);
      EXPECT_EQ(dx, dxRef);
    }
  }
}

// A different micro-batch split (rowOffset) draws the rows of the whole
// batch, here on the device path alone.
TEST(DeviceKernels, DropoutMicroBatchSplit) {
  std::mt19937_64 rng(10);
  ImmediateKernels k;
  const int64_t rows = 10, cols = 37;
  Floats x = randomFloats(rng, rows * cols), y(x.size()), part(x.size());
  Mask whole(x.size()), split(x.size());
  k.dropout(kStream, x.data(), y.data(), whole.data(), rows, cols, 0.3f, 11, 2,
            100);
  k.dropout(kStream, x.data(), part.data(), split.data(), 4, cols, 0.3f, 11, 2,
            100);
  k.dropout(kStream, x.data() + 4 * cols, part.data() + 4 * cols,
            split.data() + 4 * cols, rows - 4, cols, 0.3f, 11, 2, 104);
  EXPECT_EQ(split, whole);
  EXPECT_EQ(part, y);
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

TEST(DeviceKernels, SoftmaxCrossEntropy) {
  std::mt19937_64 rng(11);
  ImmediateKernels k;
  for (Shape s : kShapes) {
    SCOPED_TRACE(shapeName("", s));
    int64_t n = s.rows * s.cols;
    Floats logits = randomFloats(rng, n, -6.0f, 6.0f);
    Ids labels = randomIds(rng, s.rows, static_cast<int32_t>(s.cols));
    Floats probs(n), probsRef(n);
    float loss = -1.0f;
    k.softmaxCrossEntropy(kStream, logits.data(), labels.data(), probs.data(),
                          &loss, s.rows, s.cols);
    int64_t bad = 0;
    float lossRef = cpu::softmaxCrossEntropyForward(
        logits.data(), labels.data(), probsRef.data(), s.rows, s.cols, &bad);
    ASSERT_EQ(bad, -1);
    EXPECT_TRUE(closeReduced("softmaxCrossEntropy probs", probs, probsRef));
    EXPECT_TRUE(closeReduced("softmaxCrossEntropy loss", {loss}, {lossRef}));

    // dlogits overwrites; a micro-batch's scale.
    const float scale = 0.375f;
    Floats dlogits(n, 9.0f), dlogitsRef(n);
    k.softmaxCrossEntropyGrad(kStream, probsRef.data(), labels.data(), scale,
                              dlogits.data(), s.rows, s.cols);
    cpu::softmaxCrossEntropyBackward(probsRef.data(), labels.data(), scale,
                                     dlogitsRef.data(), s.rows, s.cols);
    EXPECT_TRUE(
        closeElementWise("softmaxCrossEntropyGrad", dlogits, dlogitsRef));
  }
}

// A label whose probability underflows to 0 (loss ~ 200): the mean falls
// back to the row's log-partition instead of -log(0) = inf.
TEST(DeviceKernels, SoftmaxCrossEntropyUnderflowingLabel) {
  ImmediateKernels k;
  const int64_t rows = 3, classes = 5;
  Floats logits = {100, -100, 0,  1, 2, //
                   0,   1,    2,  3, 4, //
                   -50, 50,   60, 0, 0};
  Ids labels = {1, 4, 0};
  Floats probs(rows * classes), probsRef(probs.size());
  float loss = 0.0f;
  k.softmaxCrossEntropy(kStream, logits.data(), labels.data(), probs.data(),
                        &loss, rows, classes);
  int64_t bad = 0;
  float lossRef = cpu::softmaxCrossEntropyForward(
      logits.data(), labels.data(), probsRef.data(), rows, classes, &bad);
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_GT(loss, 50.0f);
  EXPECT_TRUE(closeReduced("softmaxCrossEntropy loss", {loss}, {lossRef}));
}

TEST(DeviceKernels, Mse) {
  std::mt19937_64 rng(12);
  ImmediateKernels k;
  for (int64_t n : kSizes) {
    SCOPED_TRACE(n);
    Floats prediction = randomFloats(rng, n, -3.0f, 3.0f);
    Floats target = randomFloats(rng, n, -3.0f, 3.0f);
    float loss = -1.0f;
    k.mse(kStream, prediction.data(), target.data(), &loss, n);
    float lossRef = cpu::mseForward(prediction.data(), target.data(), n);
    EXPECT_TRUE(closeReduced("mse loss", {loss}, {lossRef}));

    const float scale = 0.25f;
    Floats grad(n, 9.0f), gradRef(n);
    k.mseGrad(kStream, prediction.data(), target.data(), scale, grad.data(), n);
    cpu::mseBackward(prediction.data(), target.data(), scale, gradRef.data(),
                     n);
    EXPECT_TRUE(closeElementWise("mseGrad", grad, gradRef));
  }
}

//===----------------------------------------------------------------------===//
// Optimizers: applyOptimizer over three steps
//===----------------------------------------------------------------------===//

TEST(DeviceKernels, OptimizerStepMatchesApplyOptimizer) {
  for (OptimizerKind kind :
       {OptimizerKind::Sgd, OptimizerKind::Momentum, OptimizerKind::RmsProp,
        OptimizerKind::Adam, OptimizerKind::AdamW}) {
    for (int64_t n : {int64_t(1), int64_t(1001)}) {
      SCOPED_TRACE(std::string(optimizerKindName(kind)) + " n " +
                   std::to_string(n));
      std::mt19937_64 rng(13);
      OptimizerConfig config;
      config.kind = kind;
      config.learningRate = 0.05f;
      // Clipping's factor and, where the rule takes one, weight decay.
      config.gradientScale = 0.75f;
      if (kind != OptimizerKind::Adam && kind != OptimizerKind::RmsProp)
        config.weightDecay = 0.02f;
      unsigned numSlots = optimizerSlots(kind);
      Floats params = randomFloats(rng, n), paramsRef = params;
      std::vector<Floats> slots(numSlots, Floats(n, 0.0f)), slotsRef = slots;
      std::vector<float *> slotPtrs, slotRefPtrs;
      for (unsigned i = 0; i < numSlots; ++i) {
        slotPtrs.push_back(slots[i].data());
        slotRefPtrs.push_back(slotsRef[i].data());
      }
      ImmediateKernels k;
      for (int64_t step = 1; step <= 3; ++step) {
        Floats grads = randomFloats(rng, n);
        const StepScalars scalars = stepScalarsOf(config, step);
        k.optimizerStep(kStream, config, params.data(), grads.data(),
                        slotPtrs.data(), n, &scalars);
        applyOptimizer(config, paramsRef.data(), grads.data(),
                       slotRefPtrs.data(), n, step);
        std::string name = std::string(optimizerKindName(kind));
        EXPECT_TRUE(closeElementWise(name + " params", params, paramsRef));
        for (unsigned i = 0; i < numSlots; ++i)
          EXPECT_TRUE(closeElementWise(name + " slot " + std::to_string(i),
                                       slots[i], slotsRef[i]));
      }
      EXPECT_EQ(k.launches, 3);
    }
  }
}

//===----------------------------------------------------------------------===//
// Empty calls
//===----------------------------------------------------------------------===//

// Nothing reaches forEach for empty inputs (null pointers are never
// touched), except the losses' means, which write 0 as the CPU returns.
TEST(DeviceKernels, EmptyCallsLaunchNothingButTheLossMeans) {
  ImmediateKernels k;
  k.relu(kStream, nullptr, nullptr, 0);
  k.geluGrad(kStream, nullptr, nullptr, nullptr, 0);
  k.add(kStream, nullptr, nullptr, nullptr, 0);
  k.addRowVector(kStream, nullptr, nullptr, 0, 5);
  k.addRowVector(kStream, nullptr, nullptr, 5, 0);
  k.columnSums(kStream, nullptr, nullptr, 0, 5);
  k.columnSums(kStream, nullptr, nullptr, 5, 0);
  k.softmax(kStream, nullptr, nullptr, 0, 5, 0);
  k.softmax(kStream, nullptr, nullptr, 5, 0, 0);
  k.softmaxGrad(kStream, nullptr, nullptr, nullptr, 0, 5);
  k.layerNorm(kStream, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0,
              5, 1e-5f);
  k.layerNormGradInput(kStream, nullptr, nullptr, nullptr, nullptr, nullptr,
                       nullptr, 0, 5);
  k.layerNormGradParams(kStream, nullptr, nullptr, nullptr, nullptr, nullptr,
                        nullptr, 0, 5);
  k.layerNormGradParams(kStream, nullptr, nullptr, nullptr, nullptr, nullptr,
                        nullptr, 5, 5); // both outputs null
  k.embedding(kStream, nullptr, nullptr, nullptr, 0, 5);
  k.embeddingGrad(kStream, nullptr, nullptr, nullptr, 5, 0);
  k.embeddingGrad(kStream, nullptr, nullptr, nullptr, 0, 5);
  k.dropout(kStream, nullptr, nullptr, nullptr, 0, 5, 0.5f, 1, 1, 0);
  k.dropoutGrad(kStream, nullptr, nullptr, nullptr, 0, 0.5f);
  k.softmaxCrossEntropyGrad(kStream, nullptr, nullptr, 1.0f, nullptr, 0, 5);
  k.mseGrad(kStream, nullptr, nullptr, 1.0f, nullptr, 0);
  OptimizerConfig adam;
  adam.kind = OptimizerKind::Adam;
  k.optimizerStep(kStream, adam, nullptr, nullptr, nullptr, 0, nullptr);
  EXPECT_EQ(k.launches, 0);

  float ce = -1.0f, mse = -1.0f;
  k.softmaxCrossEntropy(kStream, nullptr, nullptr, nullptr, &ce, 0, 5);
  k.mse(kStream, nullptr, nullptr, &mse, 0);
  EXPECT_EQ(k.launches, 2);
  EXPECT_EQ(ce, 0.0f);
  EXPECT_EQ(mse, 0.0f);
}
