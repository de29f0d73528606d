//===- OnnxTestCase.h - One of ONNX's own tests, run by gpipe ---*- C++ -*-===//
//
// gpipe-onnx-conformance's test case, all but the compile (MLIR, the tool's):
// a test directory (model.onnx, test_data_set_0/input_N.pb, output_0.pb)
// made into a model gpipe's importer takes, with the graph inputs that sit
// where gpipe wants a parameter (Gemm's B and C, Conv's W and B, ...) bound
// to the test's tensors as initializers and only the first output kept; and
// the compiled bundle's forward pass on the test's inputs, compared with
// output_0.pb at the ONNX backend tests' tolerance
// (|got - want| <= 1e-7 + 1e-3 |want|).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_IMPORT_ONNXTESTCASE_H
#define GPIPE_IMPORT_ONNXTESTCASE_H

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gpipe::onnx_conformance {

/// A test's tensor: floats, or int32 and int64 read as int32.
struct TestTensor {
  std::vector<int64_t> dims;
  std::vector<float> f32;
  std::vector<int32_t> i32;
  bool isFloat = true;
};

enum class Outcome { Passed, Failed, Skipped };
struct Verdict {
  Outcome outcome = Outcome::Passed;
  std::string why;
};

/// The bytes of the file at `path` ("" when it cannot be read).
std::string readFile(const std::string &path);

/// A test prepared for the importer: the inputs the test feeds, the batch
/// rows, and whether the graph computes its own loss (then compared).
struct PreparedTest {
  std::map<std::string, TestTensor> given;
  int64_t rows = -1;
  bool lossOutput = false;
  /// The imported output is held channels-last (OnnxImport's).
  bool outputChannelsLast = false;
};

/// Reads the inputs of the test in `dir`, binds those at constant positions
/// into `model` as initializers and keeps its first output; Passed when
/// `test` is ready, else why the test fails or is skipped.
Verdict prepareTest(const std::string &dir, onnx::ModelProto &model,
                    PreparedTest &test);

/// The test's output_0.pb as a float tensor; Skipped if it is not one.
Verdict readExpected(const std::string &dir, TestTensor &want);

/// Runs the forward pass of the compiled bundle `json` (K stages) on the
/// test's inputs; "" or how its output differs from `want`.
std::string runForward(const std::string &json, unsigned k,
                       const PreparedTest &test, const TestTensor &want);

} // namespace gpipe::onnx_conformance

#endif // GPIPE_IMPORT_ONNXTESTCASE_H
