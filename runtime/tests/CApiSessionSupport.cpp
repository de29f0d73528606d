//===- CApiSessionSupport.cpp - A small model for the C API's tests -------===//

#include "CApiSessionSupport.h"

#include "gpipe/runtime/bundle/BundleReader.h"

#include "TestBundles.h"

#include <cmath>
#include <limits>

namespace gpipe::runtime::testing::capi {

ModelGraph dropoutMlpGraph() {
  ModelGraph g(kBatch);
  int x = g.input("x", {kBatch, kFeatures});
  int labels = g.input("labels", {kBatch}, ElementType::I32);
  int w1 = g.param("l1.w", {kFeatures, 16}, InitKind::GlorotUniform);
  int b1 = g.param("l1.b", {16}, InitKind::Uniform, 0.1);
  int h = g.dropout(g.unary(OpKind::Relu, g.dense(x, w1, b1)), 0.2f, 11);
  g.nextLayer();
  int w2 = g.param("l2.w", {16, 16}, InitKind::GlorotUniform);
  int b2 = g.param("l2.b", {16}, InitKind::Uniform, 0.1);
  h = g.unary(OpKind::Tanh, g.dense(h, w2, b2));
  g.nextLayer();
  int w3 = g.param("l3.w", {16, kClasses}, InitKind::GlorotUniform);
  int b3 = g.param("l3.b", {kClasses}, InitKind::Uniform, 0.1);
  g.softmaxCrossEntropy(g.dense(h, w3, b3), labels);
  return g;
}

const std::string &dropoutMlpJson() {
  static const std::string json = writeBundle(
      buildBundle(dropoutMlpGraph(), {0, 1, 2}, 4, RematPolicy::Full));
  return json;
}

Data makeData(int64_t rows, uint64_t seed) {
  uint64_t state = seed * 2862933555777941757ull + 1;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return uint32_t(state >> 33);
  };
  Data data;
  data.x.resize(rows * kFeatures);
  for (float &v : data.x)
    v = float(next() % 2000001) / 1000000.0f - 1.0f;
  data.labels.resize(rows);
  for (int32_t &v : data.labels)
    v = int32_t(next() % kClasses);
  return data;
}

gpipe_session_t *createSession(const gpipe_session_options_t *options) {
  const std::string &json = dropoutMlpJson();
  gpipe_session_t *session = nullptr;
  if (gpipe_session_create_from_json(json.data(), json.size(), "mlp", options,
                                     &session) != GPIPE_OK)
    return nullptr;
  return session;
}

double trainStep(gpipe_session_t *session, uint64_t seed) {
  Data data = makeData(kBatch, seed);
  std::vector<gpipe_input_t> inputs = data.inputs();
  double loss = 0;
  if (gpipe_session_train_step(session, inputs.data(), inputs.size(), &loss) !=
      GPIPE_OK)
    return std::numeric_limits<double>::quiet_NaN();
  return loss;
}

std::vector<std::vector<float>> parameters(const gpipe_session_t *session) {
  gpipe_session_info_t info;
  std::vector<std::vector<float>> result;
  if (gpipe_session_query_info(session, &info) != GPIPE_OK)
    return result;
  for (size_t i = 0; i < info.parameter_count; ++i) {
    gpipe_tensor_info_t param;
    gpipe_session_parameter_info(session, i, &param);
    std::vector<float> values(param.element_count);
    gpipe_session_get_parameter(session, param.name, values.size(),
                                values.data());
    result.push_back(std::move(values));
  }
  return result;
}

} // namespace gpipe::runtime::testing::capi
