//===- GatherGradientsTest.cpp - Gathers along any axis, end to end -------===//
//
// Small models over x [4, 3, 5], a trained parameter p, constant indices
// (a frozen parameter cast to i32) and per-example indices (an i32 input
// [4, 6]) that gather along an inner axis, along the batch-paired axis
// (`batched`) and along a table's rows: z = f(x, p), loss = mse(z, y). The
// indices repeat (their gradients add) and count from the end where
// negative. Each is compiled (gather_grad from gpipe-differentiate, the
// gather kernels the bundle generates), trained one step on two
// micro-batches, and its loss and p's gradient are compared with
//  - f64 central differences of the same function, evaluated here in double
//    with plain loops, on one stage and across two;
//  - PyTorch autograd (advanced indexing) on committed fixtures
//    (test/Integration/Inputs/gather-autograd.json,
//    scripts/pytorch/gather_fixtures.py).
// An index from the batch outside its axis is refused before the step runs;
// a computed one reads NaN, which the non-finite guard reports.
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

const Shape kX = {4, 3, 5};
const std::vector<int32_t> kIdx = {2, 0, 2, -1};
const std::vector<int32_t> kIds = {4, 0,  4, -2, 1, 4,  0, 0, 1, 2, 3, -5,
                                   3, 3,  3, 3,  3, 3, -1, 2, 1, 0, 4, 2};
const Shape kIdsShape = {4, 6};

/// Row-major strides of `shape`.
Shape stridesOf(const Shape &shape) {
  Shape strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    strides[d - 1] = strides[d] * shape[d];
  return strides;
}

/// `a` gathered along `axis` at `index(out coordinates)`, an index in
/// [-n, n) counting from the end where negative.
T gatherWith(const T &a, size_t axis, int64_t k,
             const std::function<int64_t(const Shape &)> &index) {
  T out{a.shape, {}};
  out.shape[axis] = k;
  Shape in = stridesOf(a.shape), at(out.shape.size());
  for (int64_t i = 0; i < count(out.shape); ++i) {
    for (size_t d = out.shape.size(), r = size_t(i); d-- > 0;) {
      at[d] = int64_t(r) % out.shape[d];
      r /= size_t(out.shape[d]);
    }
    int64_t j = index(at), n = a.shape[axis];
    int64_t flat = 0;
    for (size_t d = 0; d < at.size(); ++d)
      flat += (d == axis ? (j < 0 ? j + n : j) : at[d]) * in[d];
    out.v.push_back(a.v[flat]);
  }
  return out;
}

/// Constant indices `idx` along `axis`.
T gather(const T &a, size_t axis, const std::vector<int32_t> &idx) {
  return gatherWith(a, axis, int64_t(idx.size()),
                    [&](const Shape &at) { return idx[at[axis]]; });
}

/// Per-example indices kIds along `axis`.
T gatherBatched(const T &a, size_t axis) {
  return gatherWith(a, axis, kIdsShape[1], [&](const Shape &at) {
    return kIds[at[0] * kIdsShape[1] + at[axis]];
  });
}

/// a op b, b aligned at a's last dimensions (b's shape a suffix of a's).
T trailing(const T &a, const T &b, double (*op)(double, double)) {
  T out = a;
  for (size_t i = 0; i < a.v.size(); ++i)
    out.v[i] = op(a.v[i], b.v[i % b.v.size()]);
  return out;
}
double times(double a, double b) { return a * b; }
double plus(double a, double b) { return a + b; }

struct Case {
  std::string name;
  Shape p, z;
  /// How many of kIdx the frozen `idx` holds (0: none).
  size_t idxCount;
  /// MLIR lines over %x, %p, %i (the constant indices) and %ids; the last
  /// defines %z.
  std::string body;
  std::function<T(const T &x, const T &p)> f;
};

void PrintTo(const Case &c, std::ostream *os) { *os << c.name; }

std::vector<Case> cases() {
  const std::string x = "tensor<4x3x5xf32>", p35 = "tensor<3x5xf32>";
  return {
      {"rows_constant", {3, 5}, {4, 4, 5}, 4,
       "%a = gpipe.mul %x, %p : " + x + ", " + p35 + " -> " + x + "\n"
       "%z = gpipe.gather %a[%i] axis 1 : " + x +
           ", tensor<4xi32> -> tensor<4x4x5xf32>",
       [](const T &x, const T &p) { return gather(trailing(x, p, times), 1, kIdx); }},
      {"columns_batched", {3, 5}, {4, 3, 6}, 0,
       "%a = gpipe.mul %x, %p : " + x + ", " + p35 + " -> " + x + "\n"
       "%z = gpipe.gather %a[%ids] axis 2 batched : " + x +
           ", tensor<4x6xi32> -> tensor<4x3x6xf32>",
       [](const T &x, const T &p) { return gatherBatched(trailing(x, p, times), 2); }},
      {"table_rows", {6, 5}, {4, 3, 5}, 3,
       "%r = gpipe.gather %p[%i] axis 0 : tensor<6x5xf32>, tensor<3xi32> -> " + p35 + "\n"
       "%z = gpipe.add %x, %r : " + x + ", " + p35 + " -> " + x,
       [](const T &x, const T &p) {
         return trailing(x, gather(p, 0, {kIdx.begin(), kIdx.begin() + 3}), plus);
       }},
      {"gather_twice", {3, 5}, {4, 4, 6}, 4,
       "%a = gpipe.mul %x, %p : " + x + ", " + p35 + " -> " + x + "\n"
       "%r = gpipe.gather %a[%i] axis 1 : " + x + ", tensor<4xi32> -> tensor<4x4x5xf32>\n"
       "%t = gpipe.tanh %r : tensor<4x4x5xf32>\n"
       "%z = gpipe.gather %t[%ids] axis 2 batched : tensor<4x4x5xf32>, "
       "tensor<4x6xi32> -> tensor<4x4x6xf32>",
       [](const T &x, const T &p) {
         T r = gather(trailing(x, p, times), 1, kIdx);
         for (double &v : r.v)
           v = std::tanh(v);
         return gatherBatched(r, 2);
       }},
      // A 1-D table: a kernel over a unit dimension in front.
      {"vector_table", {6}, {4, 3, 5}, 3,
       "%r = gpipe.gather %p[%i] axis 0 : tensor<6xf32>, tensor<3xi32> -> "
       "tensor<3xf32>\n"
       "%c = gpipe.reshape %r : tensor<3xf32> -> tensor<3x1xf32>\n"
       "%z = gpipe.mul %x, %c : " + x + ", tensor<3x1xf32> -> " + x,
       [](const T &x, const T &p) {
         T r = gather(p, 0, {kIdx.begin(), kIdx.begin() + 3});
         T out = x;
         for (size_t n = 0; n < out.v.size(); ++n)
           out.v[n] *= r.v[(n / 5) % 3];
         return out;
       }},
  };
}

std::string tensorType(const Shape &shape, const char *element = "f32") {
  std::string text = "tensor<";
  for (int64_t d : shape)
    text += std::to_string(d) + "x";
  return text + element + ">";
}

bool usesIds(const Case &c) {
  return c.body.find("%ids") != std::string::npos;
}

std::string model(const Case &c) {
  std::string z = tensorType(c.z), text;
  text += "gpipe.model @m batch 4 {\n";
  text += "  %x = gpipe.input \"x\" : tensor<4x3x5xf32>\n";
  if (usesIds(c))
    text += "  %ids = gpipe.input \"ids\" : tensor<4x6xi32>\n";
  text += "  %y = gpipe.input \"y\" : " + z + "\n";
  text += "  %out = gpipe.layer \"op\" -> " + z + " {\n";
  text += "    %p = gpipe.param \"p\" normal scale 0.5 : " + tensorType(c.p) + "\n";
  if (c.idxCount) {
    Shape shape = {int64_t(c.idxCount)};
    text += "    %f = gpipe.param \"idx\" zeros frozen : " + tensorType(shape) +
            "\n    %i = gpipe.cast %f : " + tensorType(shape) + " -> " +
            tensorType(shape, "i32") + "\n";
  }
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

double loss(const Case &c, const T &x, const T &p, const T &y) {
  T z = c.f(x, p);
  double sum = 0;
  for (size_t i = 0; i < z.v.size(); ++i)
    sum += (z.v[i] - y.v[i]) * (z.v[i] - y.v[i]);
  return sum / double(z.v.size());
}

struct Trained {
  double loss = 0;
  std::vector<float> p, grad;
  std::string error;
};

/// One training step of `c` on K stages and two micro-batches, with p's
/// given values (or its initializer's) and per-example indices `ids`.
Trained trainOneStep(const Case &c, unsigned k, const std::vector<float> &x,
                     const std::vector<float> &y, const std::vector<float> &p,
                     const std::vector<int32_t> &ids = kIds,
                     bool checkFinite = false,
                     const std::vector<int32_t> &idx = kIdx) {
  Trained out;
  gpipe::testing::Compiled compiled =
      compile(model(c), k, /*m=*/2, gpipe::RematPolicy::Full);
  EXPECT_TRUE(compiled.error.empty()) << compiled.error;
  if (!compiled.error.empty())
    return out;
  rt::ExecutorConfig config;
  config.seed = 3;
  config.optimizer.checkFinite = checkFinite;
  auto executor =
      gpipe::testing::makeExecutor(std::move(compiled.bundle), config);
  EXPECT_TRUE(executor);
  if (!executor)
    return out;
  if (!p.empty()) {
    EXPECT_EQ(executor->setParameter("p", p), "");
  }
  if (c.idxCount) {
    EXPECT_EQ(executor->setParameter(
                  "idx", std::vector<float>(idx.begin(),
                                            idx.begin() + c.idxCount)),
              "");
  }
  out.p = *executor->parameter("p");
  rt::Batch batch;
  batch["x"] = rt::HostTensor::floats(kX, x);
  if (usesIds(c))
    batch["ids"] = rt::HostTensor::ints(kIdsShape, ids);
  batch["y"] = rt::HostTensor::floats(c.z, y);
  rt::StepResult step = executor->trainStep(batch);
  out.error = step.error;
  out.loss = step.loss;
  if (step.ok())
    out.grad = *executor->gradient("p");
  return out;
}

std::vector<float> randomValues(const Shape &shape, std::mt19937 &rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> values(count(shape));
  for (float &v : values)
    v = u(rng);
  return values;
}

void checkCentralDifferences(const Case &c, unsigned k) {
  std::mt19937 rng(5);
  std::vector<float> x = randomValues(kX, rng), y = randomValues(c.z, rng);
  Trained trained = trainOneStep(c, k, x, y, {});
  ASSERT_EQ(trained.error, "");
  T tx = fromFloats(kX, x), ty = fromFloats(c.z, y);
  T p = fromFloats(c.p, trained.p);
  double expected = loss(c, tx, p, ty);
  EXPECT_NEAR(trained.loss, expected, 1e-5 * std::max(1.0, std::fabs(expected)));
  std::vector<double> numeric(p.v.size());
  for (size_t i = 0; i < numeric.size(); ++i) {
    const double h = 1e-6;
    T up = p, down = p;
    up.v[i] += h;
    down.v[i] -= h;
    numeric[i] = (loss(c, tx, up, ty) - loss(c, tx, down, ty)) / (2 * h);
  }
  EXPECT_TRUE(gpipe::testing::allClose(trained.grad, numeric, 2e-4, 2e-5))
      << c.name << ": gradient of p";
}

class GatherGradients : public ::testing::TestWithParam<Case> {};

TEST_P(GatherGradients, MatchCentralDifferencesOnOneStage) {
  checkCentralDifferences(GetParam(), 1);
}

TEST_P(GatherGradients, MatchCentralDifferencesAcrossTwoStages) {
  checkCentralDifferences(GetParam(), 2);
}

TEST_P(GatherGradients, MatchPyTorchAutogradOnCommittedFixtures) {
  const Case &c = GetParam();
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(GPIPE_INTEGRATION_FIXTURES_DIR
                                  "/gather-autograd.json");
  ASSERT_TRUE(file) << "no fixture file";
  llvm::Expected<llvm::json::Value> parsed =
      llvm::json::parse((*file)->getBuffer());
  ASSERT_TRUE(bool(parsed)) << llvm::toString(parsed.takeError());
  const llvm::json::Object *root = parsed->getAsObject();
  // The fixtures' indices are this test's.
  std::vector<double> idx = doublesOf(root->get("idx")), ids;
  for (const llvm::json::Value &row : *root->getArray("ids"))
    for (double v : doublesOf(&row))
      ids.push_back(v);
  ASSERT_EQ(idx, std::vector<double>(kIdx.begin(), kIdx.end()));
  ASSERT_EQ(ids, std::vector<double>(kIds.begin(), kIds.end()));
  const llvm::json::Object *fixture = root->getObject("cases")->getObject(c.name);
  ASSERT_TRUE(fixture) << "no fixture for " << c.name;
  auto floats = [&](const char *key) { return floatsOf(fixture->get(key)); };
  Trained trained = trainOneStep(c, 1, floats("x"), floats("y"), floats("p"));
  ASSERT_EQ(trained.error, "");
  double expected = *fixture->getNumber("loss");
  EXPECT_NEAR(trained.loss, expected, 2e-6 * std::max(1.0, std::fabs(expected)));
  EXPECT_TRUE(gpipe::testing::allClose(trained.grad,
                                       doublesOf(fixture->get("grad_p")), 1e-5,
                                       1e-6))
      << c.name << ": gradient of p";
}

INSTANTIATE_TEST_SUITE_P(
    Cases, GatherGradients, ::testing::ValuesIn(cases()),
    [](const ::testing::TestParamInfo<Case> &info) { return info.param.name; });

// Indices from the batch are checked before anything runs, as embedding
// ids are: one past either end of the axis (5 positions) is refused with
// the op and the place. Indices computed in the model (a frozen parameter
// cast) are not the batch's: one out of range reads NaN rather than memory
// past the tensor, and the non-finite guard says so.
TEST(GatherOutOfRange, IndicesFromTheBatchAreRefusedComputedOnesReadNaN) {
  std::mt19937 rng(5);
  std::vector<float> x = randomValues(kX, rng);
  const Case batched = cases()[1]; // columns_batched
  std::vector<float> y = randomValues(batched.z, rng);
  for (int32_t bad : {5, -6}) {
    std::vector<int32_t> ids = kIds;
    ids[7] = bad;
    Trained refused = trainOneStep(batched, 2, x, y, {}, ids);
    EXPECT_NE(refused.error.find("gather index " + std::to_string(bad) +
                                 " outside [-5, 5) at position 7 of the "
                                 "micro-batch, in forward op"),
              std::string::npos)
        << refused.error;
  }
  const Case constant = cases()[0]; // rows_constant: 3 positions
  std::vector<float> yc = randomValues(constant.z, rng);
  std::vector<int32_t> idx = kIdx;
  idx[2] = 3;
  Trained unguarded =
      trainOneStep(constant, 1, x, yc, {}, kIds, /*checkFinite=*/false, idx);
  EXPECT_EQ(unguarded.error, "");
  EXPECT_TRUE(std::isnan(unguarded.loss));
  Trained guarded =
      trainOneStep(constant, 2, x, yc, {}, kIds, /*checkFinite=*/true, idx);
  EXPECT_NE(guarded.error.find("is nan"), std::string::npos) << guarded.error;
}

} // namespace
