//===- CApiConformanceTest.cpp - Every C API function, careless callers ---===//
//
// The C API as a careless application calls it: NULL pointers, wrong sizes
// and types, enums outside their enumerators, extreme numbers, and calls in
// the wrong order. One table: each case names the function it calls, the
// status and the exact message (gpipe_last_error(); for a call that takes a
// non-const session, gpipe_session_last_error() too) it must get, and the
// session's whole observable state (parameters, gradients, optimizer state,
// steps, learning rate, gradient norm) must be what it was. A last test
// reads gpipe_runtime.h with the parts it includes (gpipe/runtime/capi/*.h)
// and checks that the table covers every function they declare.
// scripts/sanitize.sh runs this under ASan, UBSan and TSan.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/gpipe_runtime.h"

#include "CApiConformanceSupport.h"
#include "CApiSessionSupport.h"
#include "TempDir.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <regex>
#include <set>
#include <string>
#include <vector>

using namespace gpipe::runtime::testing::capi;
using namespace gpipe::runtime::testing::conformance;
using gpipe::runtime::testing::TempDir;

namespace {

constexpr int64_t kMaxSteps = GPIPE_MAX_STEPS_DONE;

/// What a session shows through its const calls.
struct Observed {
  std::vector<std::vector<float>> tensors;
  int64_t steps = -1;
  float learningRate = -1;
  gpipe_status_t normStatus = GPIPE_OK;
  double norm = 0;
  bool operator==(const Observed &o) const {
    if (tensors.size() != o.tensors.size())
      return false;
    for (size_t t = 0; t < tensors.size(); ++t)
      if (!bitwiseEqual(tensors[t], o.tensors[t]))
        return false;
    return steps == o.steps && learningRate == o.learningRate &&
           normStatus == o.normStatus &&
           std::memcmp(&norm, &o.norm, sizeof norm) == 0;
  }
};

Observed observe(const gpipe_session_t *session) {
  Observed o;
  gpipe_session_info_t info;
  uint32_t slots = 0;
  if (gpipe_session_query_info(session, &info) != GPIPE_OK ||
      gpipe_session_optimizer_slot_count(session, &slots) != GPIPE_OK)
    return o;
  for (size_t p = 0; p < info.parameter_count; ++p) {
    gpipe_tensor_info_t param;
    gpipe_session_parameter_info(session, p, &param);
    std::vector<float> values(param.element_count);
    gpipe_session_get_parameter(session, param.name, values.size(),
                                values.data());
    o.tensors.push_back(values);
    gpipe_session_get_gradient(session, param.name, values.size(),
                               values.data());
    o.tensors.push_back(values);
    for (uint32_t slot = 0; slot < slots; ++slot) {
      gpipe_session_get_optimizer_state(session, param.name, slot,
                                        values.size(), values.data());
      o.tensors.push_back(values);
    }
  }
  gpipe_session_steps_done(session, &o.steps);
  gpipe_session_get_learning_rate(session, &o.learningRate);
  o.normStatus = gpipe_session_gradient_norm(session, &o.norm);
  return o;
}

/// The functions without a status, each checked by a test of its own below.
const char *const kUnstatused[] = {"gpipe_runtime_version",
                                   "gpipe_runtime_api_version",
                                   "gpipe_status_string",
                                   "gpipe_last_error",
                                   "gpipe_session_options_init",
                                   "gpipe_image_training_options_init",
                                   "gpipe_text_training_options_init",
                                   "gpipe_session_destroy",
                                   "gpipe_session_last_error"};

std::string expand(std::string message, const World &w) {
  const std::string key = "{dir}";
  for (size_t at; (at = message.find(key)) != std::string::npos;)
    message.replace(at, key.size(), w.dir.path);
  return message;
}

TEST(CApiConformance, EveryCaseGetsItsStatusAndMessageAndChangesNothing) {
  World w;
  ASSERT_NE(w.trained, nullptr) << gpipe_last_error();
  ASSERT_NE(w.fresh, nullptr) << gpipe_last_error();
  const Observed trained = observe(w.trained), fresh = observe(w.fresh);
  ASSERT_FALSE(trained.tensors.empty());
  ASSERT_EQ(trained.steps, 1);
  for (const Case &c : cases()) {
    SCOPED_TRACE(std::string(c.function) + ", " + c.what);
    gpipe_session_t *session = c.fresh ? w.fresh : w.trained;
    const std::string sessionErrorBefore = gpipe_session_last_error(session);
    gpipe_status_t status = c.call(w);
    const std::string message = expand(c.message, w);
    EXPECT_EQ(gpipe_status_string(status), gpipe_status_string(c.status));
    EXPECT_EQ(gpipe_last_error(), message);
    EXPECT_EQ(gpipe_session_last_error(session),
              c.recordsOnSession ? message : sessionErrorBefore)
        << (c.recordsOnSession ? "a non-const call records its error"
                               : "a const call leaves the session's error");
    EXPECT_TRUE(observe(w.trained) == trained) << "the trained session changed";
    EXPECT_TRUE(observe(w.fresh) == fresh) << "the fresh session changed";
  }
}

TEST(CApiConformance, FunctionsWithoutAStatus) {
  EXPECT_STREQ(gpipe_runtime_version(), GPIPE_EXPECTED_VERSION);
  EXPECT_EQ(gpipe_runtime_api_version(), GPIPE_RUNTIME_API_VERSION);
  // Any int32 is a value of gpipe_status_t (its _ENUM_MIN/_MAX sentinels).
  for (int32_t value : {-1, 13, 1000, std::numeric_limits<int32_t>::min(),
                        std::numeric_limits<int32_t>::max()})
    EXPECT_STREQ(gpipe_status_string(rawEnum<gpipe_status_t>(value)),
                 "GPIPE_ERROR_UNKNOWN")
        << value;
  EXPECT_STREQ(gpipe_status_string(GPIPE_ERROR_NON_FINITE),
               "GPIPE_ERROR_NON_FINITE");
  // The _init functions and destroy take NULL; the last errors never are.
  gpipe_session_options_init(nullptr);
  gpipe_image_training_options_init(nullptr);
  gpipe_text_training_options_init(nullptr);
  gpipe_session_destroy(nullptr);
  EXPECT_STREQ(gpipe_session_last_error(nullptr), "");
  gpipe_session_t *session = nullptr;
  EXPECT_EQ(gpipe_session_create_from_file(nullptr, nullptr, &session),
            GPIPE_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(gpipe_last_error(),
               "gpipe_session_create_from_file: bundle_path is null");
  uint32_t slots;
  session = createSession(nullptr);
  ASSERT_NE(session, nullptr);
  EXPECT_EQ(gpipe_session_optimizer_slot_count(session, &slots), GPIPE_OK);
  EXPECT_STREQ(gpipe_last_error(), "") << "a success clears the thread's error";
  EXPECT_STREQ(gpipe_session_last_error(session), "");
  gpipe_session_destroy(session);
}

/// Calls in an order the session does not allow: steps past the count's
/// limit. The count may reach GPIPE_MAX_STEPS_DONE; a step then is refused
/// before it runs, and the session stays as it was.
TEST(CApiConformance, TheStepCountStopsAtItsLimit) {
  gpipe_session_t *session = createSession(nullptr);
  ASSERT_NE(session, nullptr) << gpipe_last_error();
  ASSERT_EQ(gpipe_session_set_steps_done(session, kMaxSteps), GPIPE_OK);
  const Observed before = observe(session);
  ASSERT_TRUE(std::isnan(trainStep(session, 1)));
  EXPECT_STREQ(gpipe_last_error(),
               "gpipe_session_train_step: the session has done "
               "9223372036854775806 steps, the most it counts "
               "(GPIPE_MAX_STEPS_DONE)");
  EXPECT_TRUE(observe(session) == before);
  // One below the limit, a step runs and reaches it.
  ASSERT_EQ(gpipe_session_set_steps_done(session, kMaxSteps - 1), GPIPE_OK);
  ASSERT_FALSE(std::isnan(trainStep(session, 1))) << gpipe_last_error();
  int64_t steps = 0;
  ASSERT_EQ(gpipe_session_steps_done(session, &steps), GPIPE_OK);
  EXPECT_EQ(steps, kMaxSteps);
  gpipe_session_destroy(session);
}

/// The guard also stops an evaluation whose loss is not finite, though
/// every input is: inputs near FLT_MAX overflow the forward. Without the
/// guard the same evaluation reports the non-finite loss.
TEST(CApiConformance, EvaluateGuardsItsLoss) {
  Data data = makeData(kBatch, 5);
  for (float &v : data.x)
    v = v < 0 ? -3e38f : 3e38f;
  std::vector<gpipe_input_t> inputs = data.inputs();
  gpipe_session_t *guarded = createSession(nullptr);
  ASSERT_NE(guarded, nullptr) << gpipe_last_error();
  const Observed before = observe(guarded);
  double loss = 0;
  EXPECT_EQ(gpipe_session_evaluate(guarded, kBatch, inputs.data(),
                                   inputs.size(), 0, nullptr, &loss),
            GPIPE_ERROR_NON_FINITE);
  EXPECT_STREQ(gpipe_last_error(),
               "gpipe_session_evaluate: evaluate: the loss of rows 0 to 3 "
               "is nan (the non-finite guard is on)");
  EXPECT_TRUE(observe(guarded) == before);
  gpipe_session_destroy(guarded);

  gpipe_session_options_t options = defaultOptions();
  options.check_finite = 0;
  gpipe_session_t *unguarded = createSession(&options);
  ASSERT_NE(unguarded, nullptr) << gpipe_last_error();
  ASSERT_EQ(gpipe_session_evaluate(unguarded, kBatch, inputs.data(),
                                   inputs.size(), 0, nullptr, &loss),
            GPIPE_OK)
      << gpipe_last_error();
  EXPECT_FALSE(std::isfinite(loss));
  gpipe_session_destroy(unguarded);
}

/// Appends the text of the header at `path` to `text`, and that of each
/// runtime header it includes ("gpipe/runtime/...", found under
/// GPIPE_RUNTIME_INCLUDE_DIR) where it includes it; `read` holds the paths
/// read, each read once.
void readHeader(const std::string &path, std::set<std::string> &read,
                std::string &text) {
  if (!read.insert(path).second)
    return;
  std::ifstream header(path);
  ASSERT_TRUE(header) << path;
  static const std::regex include(
      R"re(^\s*#\s*include\s*"(gpipe/runtime/[^"]+)")re");
  std::string line;
  while (std::getline(header, line)) {
    text += line;
    text += '\n';
    std::smatch match;
    if (std::regex_search(line, match, include))
      readHeader(std::string(GPIPE_RUNTIME_INCLUDE_DIR) + "/" + match[1].str(),
                 read, text);
  }
}

/// The table covers every function gpipe_runtime.h declares, in itself or
/// in the parts it includes, and it includes every part.
TEST(CApiConformance, CoversEveryPublicFunction) {
  std::set<std::string> read;
  std::string source;
  readHeader(GPIPE_RUNTIME_HEADER, read, source);
  if (::testing::Test::HasFatalFailure())
    return;
  const std::string parts =
      std::string(GPIPE_RUNTIME_INCLUDE_DIR) + "/gpipe/runtime/capi";
  size_t partCount = 0;
  for (const auto &entry : std::filesystem::directory_iterator(parts)) {
    if (entry.path().extension() != ".h")
      continue;
    ++partCount;
    EXPECT_TRUE(read.count(parts + "/" + entry.path().filename().string()))
        << entry.path() << " is not included by " << GPIPE_RUNTIME_HEADER;
  }
  EXPECT_GE(partCount, 1u) << parts;
  std::set<std::string> declared;
  std::regex declaration(R"(GPIPE_API[^;(]*?\b(gpipe_\w+)\s*\()");
  for (std::sregex_iterator it(source.begin(), source.end(), declaration), end;
       it != end; ++it)
    declared.insert((*it)[1]);
  ASSERT_GE(declared.size(), 37u);
  std::set<std::string> covered(std::begin(kUnstatused), std::end(kUnstatused));
  for (const Case &c : cases())
    covered.insert(c.function);
  for (const std::string &function : declared)
    EXPECT_TRUE(covered.count(function)) << function << " has no case";
}

} // namespace
