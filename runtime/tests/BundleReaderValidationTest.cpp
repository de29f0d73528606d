//===- BundleReaderValidationTest.cpp - Bundles the reader refuses --------===//
//
// The bundle reader on what it must refuse or default: optional attributes,
// missing files and directories, malformed JSON and deep nesting, and one
// edit of the valid bundle per validation error, each with its exact message.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/bundle/BundleChecksum.h"
#include "gpipe/runtime/verify/BundleValidation.h"
#include "gpipe/runtime/verify/ScheduleVerifier.h"

#include "BundleReaderSupport.h"
#include "TestBundles.h"
#include "TestModels.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <ostream>
#include <string>
#include <unistd.h>
#include <vector>

using namespace gpipe::runtime;
using namespace gpipe::runtime::testing::bundlereader;
using Json = nlohmann::ordered_json;

namespace {

// Attributes missing from an op take Bundle.h's defaults; a negative seed is
// read as its 64-bit two's complement (writers with signed integers only).
TEST(BundleReaderTest, OptionalAttributes) {
  Json json = validJson();
  Json &ops = json["stages"][0]["forward"];
  ops.push_back(
      {{"op", "layer_norm"}, {"operands", {3, 2, 2}}, {"results", {4}}});
  ops.push_back(
      {{"op", "dropout"}, {"operands", {3}}, {"results", {4}}, {"seed", -1}});
  ops.push_back(
      {{"op", "attention"}, {"operands", {3, 1, 1}}, {"results", {4}}});
  json["params"][1].erase("scale");
  StatusOr<Bundle> load = parseJson(json);
  ASSERT_TRUE(load.ok()) << load.status().message();
  const std::vector<Op> &forward = (*load).stages[0].forward;
  EXPECT_EQ(forward[4].epsilon, 1e-5f);
  EXPECT_EQ(forward[5].rate, 0.0f);
  EXPECT_EQ(forward[5].seed, std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(forward[6].heads, 1);
  EXPECT_FALSE(forward[6].causal);
  EXPECT_EQ((*load).params[1].scale, 1.0);
}

//===----------------------------------------------------------------------===//
// Files and malformed text
//===----------------------------------------------------------------------===//

// A missing file gives "cannot open" with the system's reason.
TEST(BundleReaderTest, MissingFile) {
  StatusOr<Bundle> load = loadBundle("/nonexistent-gpipe-dir/m.bundle.json");
  EXPECT_FALSE(load.ok());
  EXPECT_EQ(load.status().code(), StatusCode::Io);
  EXPECT_EQ(load.status().message(),
            "cannot open '/nonexistent-gpipe-dir/m.bundle.json': "
            "No such file or directory");
}

// A directory is not a regular file: refused before it is read.
TEST(BundleReaderTest, DirectoryIsNotABundle) {
  StatusOr<Bundle> load = loadBundle("/");
  EXPECT_EQ(load.status().message(),
            "cannot read '/': expected a regular file, found a directory");
}

// loadBundle reads a written file and names it in errors.
TEST(BundleReaderTest, LoadsFile) {
  std::string path = ::testing::TempDir() + "gpipe_bundle_reader_" +
                     std::to_string(::getpid()) + ".json";
  StatusOr<Bundle> parsed = parseBundle(kValidBundle, "m.bundle.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  std::FILE *file = std::fopen(path.c_str(), "w");
  ASSERT_NE(file, nullptr);
  std::string text = writeBundle((*parsed));
  std::fwrite(text.data(), 1, text.size(), file);
  std::fclose(file);
  StatusOr<Bundle> load = loadBundle(path);
  ASSERT_TRUE(load.ok()) << load.status().message();
  expectEqual((*parsed), (*load));

  file = std::fopen(path.c_str(), "w");
  ASSERT_NE(file, nullptr);
  std::fputs("{\"format\": \"gpipe-bundle\", \"version\": 3}", file);
  std::fclose(file);
  EXPECT_EQ(loadBundle(path).status().message(),
            "'" + path +
                "': unsupported bundle version 3 (this runtime reads 2); use "
                "the runtime that came with the compiler that wrote it");
  std::remove(path.c_str());
}

// Malformed JSON reports the parser's position and reason.
TEST(BundleReaderTest, MalformedJson) {
  EXPECT_EQ(
      parseBundle("{\n  \"format\": ,\n}", "m.bundle.json").status().message(),
      "'m.bundle.json': malformed JSON: parse error at line 2, column 13: "
      "syntax error while parsing value - unexpected ','; expected '[', "
      "'{', or a literal");
  EXPECT_EQ(
      parseBundle("{\"format\": \"gpipe-bundle\"", "m.bundle.json")
          .status()
          .message(),
      "'m.bundle.json': malformed JSON: parse error at line 1, column 26: "
      "syntax error while parsing object - unexpected end of input; "
      "expected '}'");
  EXPECT_EQ(parseBundle("", "empty.json").status().message(),
            "'empty.json': malformed JSON: parse error at line 1, column 1: "
            "syntax error while parsing value - unexpected end of input; "
            "expected '[', '{', or a literal");
}

// Deep nesting is neither a crash nor a bundle.
TEST(BundleReaderTest, DeepNesting) {
  std::string text = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(parseBundle(text, "deep.json").status().message(),
            "'deep.json': expected a JSON object at the top level, found an "
            "array");
}

//===----------------------------------------------------------------------===//
// Validation errors: one edit of the valid bundle, one exact message
//===----------------------------------------------------------------------===//

struct ErrorCase {
  const char *name;
  std::function<void(Json &)> edit;
  const char *message; ///< after "'m.bundle.json': "
};

Json op(const char *name, std::vector<int> operands, std::vector<int> results) {
  return {{"op", name}, {"operands", operands}, {"results", results}};
}

/// Gives the bundle a send window: each program waits for all its sends,
/// oldest first, just before its optimizer step (so that no buffer's
/// defining instruction moves).
void waitAtTheEnd(Json &j, int window) {
  j["send_window"] = window;
  for (Json &program : j["programs"]) {
    Json waits = Json::array();
    for (const Json &instr : program) {
      std::string name = instr["op"];
      if (name.rfind("send_", 0) == 0)
        waits.push_back({{"op", "wait_" + name},
                         {"peer", instr["peer"]},
                         {"mb", instr["mb"]},
                         {"channel", instr["channel"]}});
    }
    Json step = program.back();
    program.erase(program.size() - 1);
    for (Json &wait : waits)
      program.push_back(std::move(wait));
    program.push_back(std::move(step));
  }
}

const ErrorCase kErrorCases[] = {
    // Format and version.
    {"NotAnObject", [](Json &j) { j = Json::array(); },
     "expected a JSON object at the top level, found an array"},
    {"MissingFormat", [](Json &j) { j.erase("format"); },
     "missing key 'format' (expected \"gpipe-bundle\")"},
    {"WrongFormat", [](Json &j) { j["format"] = "gpipe"; },
     "'format' must be \"gpipe-bundle\", found \"gpipe\""},
    {"FormatNotString", [](Json &j) { j["format"] = 1; },
     "'format' must be \"gpipe-bundle\", found 1"},
    {"MissingVersion", [](Json &j) { j.erase("version"); },
     "missing key 'version'"},
    {"VersionNotInteger", [](Json &j) { j["version"] = "1"; },
     "expected an integer 'version', found a string"},
    {"VersionOne", [](Json &j) { j["version"] = 1; },
     "unsupported bundle version 1 (this runtime reads 2); recompile it with "
     "gpipe-translate"},
    {"UnknownTopLevelKey", [](Json &j) { j["schedule"] = "gpipe"; },
     "unknown key 'schedule'; expected one of format, version, model, batch, "
     "microbatch_rows, remat, inputs, params, weights, stages, programs, "
     "send_window, precision, memory_plan, code, checksum"},
    {"PrecisionUnknown", [](Json &j) { j["precision"] = "fp16"; },
     "expected a 'precision' of f32, tf32 or bf16, found 'fp16'"},
    {"PrecisionNotString", [](Json &j) { j["precision"] = 16; },
     "expected a string 'precision', found a number"},
    // Top-level fields and counts.
    {"MissingBatch", [](Json &j) { j.erase("batch"); }, "missing key 'batch'"},
    {"ModelNotString", [](Json &j) { j["model"] = nullptr; },
     "expected a string 'model', found null"},
    {"NonPositiveBatch", [](Json &j) { j["batch"] = 0; },
     "expected a positive 'batch', found 0"},
    {"FractionalBatch", [](Json &j) { j["batch"] = 4.5; },
     "expected an integer 'batch', found the non-integer number 4.5"},
    {"HugeBatch", [](Json &j) { j["batch"] = uint64_t(1) << 63; },
     "expected an integer 'batch' that fits in 64 bits, found "
     "9223372036854775808"},
    {"EmptyMicrobatches", [](Json &j) { j["microbatch_rows"] = Json::array(); },
     "'microbatch_rows' is empty; expected at least one micro-batch"},
    {"NonPositiveMicrobatch",
     [](Json &j) {
       j["microbatch_rows"] = {4, 0};
     },
     "microbatch_rows[1]: expected a positive row count, found 0"},
    {"MicrobatchNotInteger",
     [](Json &j) {
       j["microbatch_rows"] = {2, "2"};
     },
     "microbatch_rows[1]: expected an integer, found a string"},
    {"MicrobatchSum",
     [](Json &j) {
       j["microbatch_rows"] = {2, 1};
     },
     "'microbatch_rows' sum to 3, expected the batch 4"},
    {"MicrobatchOverflow",
     [](Json &j) {
       j["microbatch_rows"] = {std::numeric_limits<int64_t>::max(), 1};
     },
     "'microbatch_rows' sum to more than 2^63, expected the batch 4"},
    {"UnknownRemat", [](Json &j) { j["remat"] = "partial"; },
     "unknown remat policy 'partial'; expected one of none, full, except-last, "
     "selective"},
    {"ProgramCount", [](Json &j) { j["programs"].push_back(Json::array()); },
     "expected one program per device, the devices running the stages "
     "round-robin (a number of programs that divides the stages): 2 stages, "
     "found 3 programs"},
    {"StagesNotArray", [](Json &j) { j["stages"] = Json::object(); },
     "expected an array 'stages', found an object"},
    // Model inputs.
    {"UnknownInputType", [](Json &j) { j["inputs"][1]["type"] = "i64"; },
     "inputs[1]: unknown element type 'i64'; expected one of f32, i32"},
    {"DuplicateInput", [](Json &j) { j["inputs"][1]["name"] = "x"; },
     "inputs[1]: model input 'x' is declared twice"},
    {"InputShapeNotIntegers",
     [](Json &j) {
       j["inputs"][0]["shape"] = {4, 3.5};
     },
     "inputs[0].shape[1]: expected an integer, found the non-integer number "
     "3.5"},
    {"InputNotObject", [](Json &j) { j["inputs"][0] = "x"; },
     "inputs[0]: expected an object, found a string"},
    // Parameters.
    {"UnknownInit", [](Json &j) { j["params"][0]["init"] = "xavier"; },
     "params[0]: unknown init 'xavier'; expected one of zeros, ones, normal, "
     "uniform, glorot_uniform, pretrained"},
    {"ParamStageOutOfRange", [](Json &j) { j["params"][2]["stage"] = 2; },
     "params[2]: stage 2 out of range: the bundle has 2 stages"},
    {"ParamStageNegative", [](Json &j) { j["params"][2]["stage"] = -1; },
     "params[2]: expected a non-negative integer 'stage', found -1"},
    {"DuplicateParam", [](Json &j) { j["params"][1]["name"] = "w1"; },
     "params[1]: parameter 'w1' is declared twice"},
    {"EmptyParamName", [](Json &j) { j["params"][1]["name"] = ""; },
     "params[1]: expected a non-empty 'name'"},
    {"ScaleNotNumber", [](Json &j) { j["params"][1]["scale"] = "1"; },
     "params[1]: expected a number 'scale', found a string"},
    {"UnknownParamKey", [](Json &j) { j["params"][1]["dtype"] = "f32"; },
     "params[1]: unknown key 'dtype'; expected one of name, shape, init, "
     "scale, stage, frozen, tied"},
    // A tied copy names an untied parameter before it, declared alike.
    {"TiedToLater", [](Json &j) { j["params"][1]["tied"] = "w2"; },
     "params[1]: parameter 'b1' is tied to 'w2', which is no untied "
     "parameter declared before it"},
    {"TiedToCopy",
     [](Json &j) {
       j["params"][1] = j["params"][0];
       j["params"][1]["name"] = "w1@b";
       j["params"][1]["tied"] = "w1";
       j["params"][2] = j["params"][0];
       j["params"][2]["name"] = "w1@c";
       j["params"][2]["tied"] = "w1@b";
     },
     "params[2]: parameter 'w1@c' is tied to 'w1@b', which is no untied "
     "parameter declared before it"},
    {"TiedOtherwise",
     [](Json &j) {
       j["params"][2]["tied"] = "w1";
     },
     "params[2]: parameter 'w2' is tied to 'w1' but declared otherwise "
     "(shape, init, scale or frozen)"},
    {"FrozenNotBool", [](Json &j) { j["params"][1]["frozen"] = 1; },
     "params[1]: expected a boolean 'frozen', found a number"},
    // Stage values.
    {"UnknownValueType",
     [](Json &j) { j["stages"][1]["values"][2]["type"] = "bf16"; },
     "stages[1].values[2]: unknown element type 'bf16'; expected one of f32, "
     "i32"},
    {"BatchedNotBool",
     [](Json &j) { j["stages"][0]["values"][0]["batched"] = 1; },
     "stages[0].values[0]: expected a boolean 'batched', found a number"},
    {"MissingStageKey", [](Json &j) { j["stages"][0].erase("recompute"); },
     "stages[0]: missing key 'recompute'"},
    // Stage inputs: model inputs and channels.
    {"UnknownModelInput",
     [](Json &j) { j["stages"][1]["inputs"][1]["input"] = "y"; },
     "stages[1].inputs[1]: unknown model input 'y'; expected one of 'labels', "
     "'x'"},
    {"InputAndChannel",
     [](Json &j) { j["stages"][1]["inputs"][1]["channel"] = 1; },
     "stages[1].inputs[1]: expected exactly one of 'input' (a model input) or "
     "'channel', found both"},
    {"NeitherInputNorChannel",
     [](Json &j) { j["stages"][1]["inputs"][0].erase("channel"); },
     "stages[1].inputs[0]: expected exactly one of 'input' (a model input) or "
     "'channel', found neither"},
    {"ChannelTwice",
     [](Json &j) {
       j["stages"][1]["inputs"][1] = {{"value", 1}, {"channel", 0}};
     },
     "stages[1].inputs[1]: channel 0 is bound twice"},
    {"ChannelGap", [](Json &j) { j["stages"][1]["inputs"][0]["channel"] = 1; },
     "stages[1].inputs: channels must be numbered from 0 consecutively: found "
     "channel 1 but no channel 0"},
    {"InputValueOutOfRange",
     [](Json &j) { j["stages"][1]["inputs"][0]["value"] = 8; },
     "stages[1].inputs[0]: value 8 out of range: stage 1 has 8 values"},
    // Outputs, loss and gradients.
    {"OutputOutOfRange", [](Json &j) { j["stages"][0]["outputs"] = {9}; },
     "stages[0].outputs[0]: value 9 out of range: stage 0 has 9 values"},
    {"LossOutOfRange", [](Json &j) { j["stages"][1]["loss"] = 8; },
     "stages[1]: loss value 8 out of range: stage 1 has 8 values (-1: no "
     "loss)"},
    {"InputGradOutOfRange",
     [](Json &j) { j["stages"][1]["input_grads"] = {-1}; },
     "stages[1].input_grads[0]: value -1 out of range: stage 1 has 8 values"},
    // Ops.
    {"OperandsNotArray",
     [](Json &j) { j["stages"][1]["backward"][1]["operands"] = 3; },
     "stages[1].backward[1]: expected an array 'operands', found a number"},
    {"OpNotObject", [](Json &j) { j["stages"][0]["forward"][3] = "relu"; },
     "stages[0].forward[3]: expected an object, found a string"},
    {"MissingOpName", [](Json &j) { j["stages"][0]["forward"][3].erase("op"); },
     "stages[0].forward[3]: missing key 'op'"},
    {"UnknownOp", [](Json &j) { j["stages"][1]["forward"][1]["op"] = "conv"; },
     "stages[1].forward[1]: unknown op 'conv'; expected one of param, dense, "
     "relu, gelu, gelu_erf, tanh, softmax, layer_norm, add, embedding, "
     "attention, "
     "batch_norm, dropout, softmax_cross_entropy, conv2d, max_pool2d, "
     "avg_pool2d, global_avg_pool, flatten, mse_loss, matmul, dense_grad, "
     "bias_grad, "
     "relu_grad, gelu_grad, gelu_erf_grad, tanh_grad, softmax_grad, "
     "layer_norm_grad, "
     "batch_norm_grad, embedding_grad, "
     "attention_grad, conv2d_grad, max_pool2d_grad, avg_pool2d_grad, "
     "global_avg_pool_grad, flatten_grad, dropout_grad, "
     "softmax_cross_entropy_grad, mse_loss_grad, add_grads, accumulate_grad, "
     "zeros, kernel"},
    {"OperandOutOfRange",
     [](Json &j) {
       j["stages"][1]["forward"][1]["operands"] = {0, 8};
     },
     "stages[1].forward[1]: operand 8 out of range: stage 1 has 8 values"},
    {"NegativeOperand",
     [](Json &j) {
       j["stages"][0]["backward"][0]["operands"] = {5, -1};
     },
     "stages[0].backward[0]: operand -1 out of range: stage 0 has 9 values"},
    {"ResultOutOfRange",
     [](Json &j) { j["stages"][1]["recompute"][2]["results"] = {12}; },
     "stages[1].recompute[2]: result 12 out of range: stage 1 has 8 values"},
    {"DroppedResultOnlyFirst",
     [](Json &j) {
       j["stages"][1]["backward"][1]["results"] = {6, -1};
     },
     "stages[1].backward[1]: result 1 is -1: only a dense or layer-norm "
     "gradient before a split backward's weights_from may leave its "
     "parameter gradients to a later op"},
    {"DroppedResultNotAllowed",
     [](Json &j) { j["stages"][0]["backward"][0]["results"] = {-1}; },
     "stages[0].backward[0]: result -1 out of range: stage 0 has 9 values"},
    {"DenseOperandCount",
     [](Json &j) {
       j["stages"][0]["forward"][2]["operands"] = {0, 1, 2, 3};
     },
     "stages[0].forward[2]: op 'dense' expects 2 or 3 operands, found 4"},
    {"ReluResultCount",
     [](Json &j) {
       j["stages"][0]["forward"][3]["results"] = {4, 5};
     },
     "stages[0].forward[3]: op 'relu' expects 1 result, found 2"},
    {"LayerNormGradCounts",
     [](Json &j) {
       j["stages"][0]["backward"].push_back(
           op("layer_norm_grad", {5, 4, 3, 2}, {6, 7}));
     },
     "stages[0].backward[5]: op 'layer_norm_grad' expects 3 results, found 2"},
    {"LayerNormGradOperands",
     [](Json &j) {
       j["stages"][0]["backward"].push_back(
           op("layer_norm_grad", {5, 4, 3}, {6, 7, 8}));
     },
     "stages[0].backward[5]: op 'layer_norm_grad' expects 4 operands, found "
     "3"},
    {"ZerosOperands",
     [](Json &j) {
       j["stages"][0]["backward"].push_back(op("zeros", {5}, {6}));
     },
     "stages[0].backward[5]: op 'zeros' expects 0 operands, found 1"},
    {"ZerosResults",
     [](Json &j) { j["stages"][0]["backward"].push_back(op("zeros", {}, {})); },
     "stages[0].backward[5]: op 'zeros' expects 1 result, found 0"},
    {"AccumulateGradResults",
     [](Json &j) { j["stages"][0]["backward"][3]["results"] = {7}; },
     "stages[0].backward[3]: op 'accumulate_grad' expects 0 results, found 1"},
    {"AccumulateGradOperands",
     [](Json &j) { j["stages"][0]["backward"][3].erase("operands"); },
     "stages[0].backward[3]: op 'accumulate_grad' expects 1 operand, found 0"},
    {"AccumulateGradName",
     [](Json &j) { j["stages"][0]["backward"][3].erase("name"); },
     "stages[0].backward[3]: missing key 'name'"},
    {"UnknownParamName",
     [](Json &j) { j["stages"][0]["forward"][0]["name"] = "w9"; },
     "stages[0].forward[0]: unknown parameter 'w9'"},
    {"AttributeOfOtherOp",
     [](Json &j) { j["stages"][0]["forward"][2]["epsilon"] = 1e-5; },
     "stages[0].forward[2]: unknown key 'epsilon' for op 'dense'; expected one "
     "of op, operands, results, fuse"},
    {"UnknownFusion",
     [](Json &j) { j["stages"][0]["forward"][2]["fuse"] = "dense_softmax"; },
     "stages[0].forward[2]: unknown fusion 'dense_softmax'; expected "
     "dense_activation or add_layer_norm"},
    {"HeadsNotInteger",
     [](Json &j) {
       Json attention = op("attention", {3, 1, 1}, {4});
       attention["heads"] = "4";
       j["stages"][0]["forward"].push_back(attention);
     },
     "stages[0].forward[4]: expected an integer 'heads', found a string"},
    {"CausalNotBool",
     [](Json &j) {
       Json attention = op("attention", {3, 1, 1}, {4});
       attention["causal"] = 1;
       j["stages"][0]["forward"].push_back(attention);
     },
     "stages[0].forward[4]: expected a boolean 'causal', found a number"},
    {"RateNotNumber",
     [](Json &j) {
       Json dropout = op("dropout", {3}, {4});
       dropout["rate"] = "0.1";
       j["stages"][0]["forward"].push_back(dropout);
     },
     "stages[0].forward[4]: expected a number 'rate', found a string"},
    {"SeedNotInteger",
     [](Json &j) {
       Json dropout = op("dropout", {3}, {4});
       dropout["seed"] = 1.5;
       j["stages"][0]["forward"].push_back(dropout);
     },
     "stages[0].forward[4]: expected an integer 'seed', found the non-integer "
     "number 1.5"},
    {"EpsilonTooLarge",
     [](Json &j) {
       Json norm = op("layer_norm", {3, 2, 2}, {4});
       norm["epsilon"] = 1e300;
       j["stages"][0]["forward"].push_back(norm);
     },
     "stages[0].forward[4]: expected a 32-bit float 'epsilon', found 1e+300"},
    // Instructions.
    {"UnknownInstruction", [](Json &j) { j["programs"][0][1]["op"] = "fwd"; },
     "programs[0][1]: unknown instruction 'fwd'; expected one of load_input, "
     "forward, backward, backward_weights, send_activation, recv_activation, "
     "send_gradient, recv_gradient, wait_send_activation, wait_send_gradient, "
     "optimizer_step"},
    // Send windows: each send waited for, at most the window in flight.
    {"SendWindowZero", [](Json &j) { j["send_window"] = 0; },
     "expected a 'send_window' of at least 1 (or none, for sends that "
     "complete as they are issued), found 0"},
    {"SendWindowNotInteger", [](Json &j) { j["send_window"] = "2"; },
     "expected an integer 'send_window', found a string"},
    {"InstrStageOutOfRange", [](Json &j) { j["programs"][1][2]["stage"] = 2; },
     "programs[1][2]: stage 2 out of range: the bundle has 2 stages"},
    {"InstrMicrobatchOutOfRange",
     [](Json &j) { j["programs"][0][4]["mb"] = 2; },
     "programs[0][4]: micro-batch 2 out of range: the bundle has 2 "
     "micro-batches"},
    {"InstrMicrobatchNegative", [](Json &j) { j["programs"][0][4]["mb"] = -1; },
     "programs[0][4]: expected a non-negative integer 'mb', found -1"},
    {"InstrMissingMicrobatch", [](Json &j) { j["programs"][0][4].erase("mb"); },
     "programs[0][4]: missing key 'mb'"},
    {"InstrPeerOutOfRange", [](Json &j) { j["programs"][0][2]["peer"] = 2; },
     "programs[0][2]: peer 2 out of range: the bundle has 2 devices"},
    {"InstrChannelTooLarge",
     [](Json &j) { j["programs"][0][2]["channel"] = int64_t(1) << 40; },
     "programs[0][2]: 'channel' is too large: 1099511627776 (at most "
     "4294967295)"},
    // The memory plan, which the runtime needs: it places nothing itself.
    {"MemoryPlanMissing", [](Json &j) { j.erase("memory_plan"); },
     "missing key 'memory_plan'"},
    {"PlacementMissing",
     [](Json &j) { j["memory_plan"]["devices"][1].erase("buffers"); },
     "memory_plan.devices[1]: missing key 'buffers'"},
    {"PlacementEntryTooShort",
     [](Json &j) {
       j["memory_plan"]["devices"][0]["buffers"][1] = {48, 32, 1, 2};
     },
     "memory_plan.devices[0].buffers[1]: expected [bytes, offset, start, end, "
     "instr, microbatch, value], found an array"},
    {"MemoryPlanNotObject", [](Json &j) { j["memory_plan"] = 1; },
     "memory_plan: expected an object, found a number"},
    {"MemoryPlanDeviceCount",
     [](Json &j) {
       j["memory_plan"] = {{"optimizer_slots", 2}, {"devices", Json::array()}};
     },
     "memory_plan.devices: expected one entry per device (2 devices), found 0"},
    {"MemoryPlanPeakBelowResident",
     [](Json &j) {
       Json device = {{"resident_bytes", 8},
                      {"peak_bytes", 4},
                      {"arena_bytes", 8},
                      {"buffers", Json::array()}};
       j["memory_plan"] = {{"optimizer_slots", 2},
                           {"devices", Json::array({device, device})}};
     },
     "memory_plan.devices[0]: expected 0 <= resident_bytes <= peak_bytes <= "
     "arena_bytes, found 8, 4, 8"},
    {"MemoryPlanUnknownKey",
     [](Json &j) {
       j["memory_plan"] = {{"slots", 2}};
     },
     "memory_plan: unknown key 'slots'; expected one of optimizer_slots, "
     "devices"},
    {"LoadUnknownInput", [](Json &j) { j["programs"][1][1]["name"] = "label"; },
     "programs[1][1]: unknown model input 'label'; expected one of 'labels', "
     "'x'"},
    {"InstrUnknownKey", [](Json &j) { j["programs"][0][10]["mb"] = 0; },
     "programs[0][10]: unknown key 'mb' for instruction 'optimizer_step'; "
     "expected one of op"},
    {"InstrFieldOfOtherKind",
     [](Json &j) { j["programs"][0][1]["channel"] = 0; },
     "programs[0][1]: unknown key 'channel' for instruction 'forward'; "
     "expected one of op, stage, mb"},
    {"ProgramNotArray", [](Json &j) { j["programs"][1] = Json::object(); },
     "programs[1]: expected an array of instructions, found an object"},
};

/// Bundles that read well, refused by validateBundle (the executors' check
/// at creation): the programs' waits against the send window.
const ErrorCase kScheduleErrorCases[] = {
    {"WaitWithoutWindow",
     [](Json &j) {
       waitAtTheEnd(j, 2);
       j.erase("send_window");
     },
     "device 0: op #10 (wait for the activation sent to device 1, "
     "micro-batch 0, channel 0): waits for a send, but the bundle's sends "
     "complete as they are issued (it has no send_window)"},
    {"WaitDeleted",
     [](Json &j) {
       waitAtTheEnd(j, 2);
       j["programs"][0].erase(10);
     },
     "device 0: op #2 (send activation to device 1, micro-batch 0, channel "
     "0): is never waited for: under the bundle's send window of 2 each send "
     "needs a wait_send after it, before the optimizer step, up to which its "
     "buffer is kept"},
    {"SendsPastTheWindow", [](Json &j) { waitAtTheEnd(j, 1); },
     "device 0: op #5 (send activation to device 1, micro-batch 1, channel "
     "0): puts 2 sends to device 1 in flight, more than the bundle's send "
     "window of 1"},
    {"WaitAfterTheStep",
     [](Json &j) {
       waitAtTheEnd(j, 2);
       Json &program = j["programs"][1];
       std::swap(program[11], program[12]);
     },
     "device 1: op #11 (optimizer step): the optimizer step must be the last "
     "instruction"},
    {"WaitTwice",
     [](Json &j) {
       waitAtTheEnd(j, 2);
       Json &program = j["programs"][0];
       program.insert(program.begin() + 11, program[10]);
     },
     "device 0: op #11 (wait for the activation sent to device 1, micro-batch "
     "0, channel 0): has no send before it that it has not already waited "
     "for"},
        {"WaitPeerWrong",
     [](Json &j) {
       waitAtTheEnd(j, 2);
       j["programs"][0][10]["peer"] = 0;
     },
     "device 0: op #10 (wait for the activation sent to device 0, micro-batch "
     "0, channel 0): expects peer device 1, got 0"},
};

void PrintTo(const ErrorCase &errorCase, std::ostream *os) {
  *os << errorCase.name;
}

class BundleReaderErrorTest : public ::testing::TestWithParam<ErrorCase> {};

// The edited bundle is rejected with exactly the expected message.
TEST_P(BundleReaderErrorTest, ExactMessage) {
  Json json = validJson();
  GetParam().edit(json);
  StatusOr<Bundle> load = parseJson(json);
  EXPECT_EQ(load.status().message(),
            std::string("'m.bundle.json': ") + GetParam().message);
}

class BundleValidationErrorTest : public ::testing::TestWithParam<ErrorCase> {
};

// The edited bundle reads, and validateBundle refuses it with exactly the
// expected message.
TEST_P(BundleValidationErrorTest, ExactMessage) {
  Json json = validJson();
  GetParam().edit(json);
  StatusOr<Bundle> load = parseJson(json);
  ASSERT_TRUE(load.ok()) << load.status().message();
  EXPECT_EQ(validateBundle(*load), GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(SendWindow, BundleValidationErrorTest,
                         ::testing::ValuesIn(kScheduleErrorCases),
                         [](const ::testing::TestParamInfo<ErrorCase> &info) {
                           return std::string(info.param.name);
                         });

INSTANTIATE_TEST_SUITE_P(Validation, BundleReaderErrorTest,
                         ::testing::ValuesIn(kErrorCases),
                         [](const ::testing::TestParamInfo<ErrorCase> &info) {
                           return std::string(info.param.name);
                         });

/// The valid bundle's 2-device programs, with device 1 forwarding
/// micro-batch 1 before micro-batch 0.
Bundle withDevice1ForwardingBackwards() {
  StatusOr<Bundle> read = parseJson(validJson());
  EXPECT_TRUE(read.ok()) << read.status().message();
  Bundle bundle = std::move(*read);
  std::vector<Instr> &device1 = bundle.programs[1];
  std::rotate(device1.begin(), device1.begin() + 3, device1.begin() + 6);
  return bundle;
}

Instr waitFor(const Instr &send) {
  Instr wait = send;
  wait.kind = send.kind == InstrKind::SendActivation
                  ? InstrKind::WaitSendActivation
                  : InstrKind::WaitSendGradient;
  return wait;
}

// The valid bundle with each program waiting for its sends at the end, under
// a window that holds them all, reads, validates and writes back the same.
TEST(ScheduleVerifierTest, WaitsUnderTheirWindowValidate) {
  Json json = validJson();
  waitAtTheEnd(json, 2);
  StatusOr<Bundle> load = parseJson(json);
  ASSERT_TRUE(load.ok()) << load.status().message();
  EXPECT_EQ(load->sendWindow, 2u);
  EXPECT_EQ(load->programs[0][10].kind, InstrKind::WaitSendActivation);
  EXPECT_EQ(load->programs[1][11].kind, InstrKind::WaitSendGradient);
  EXPECT_EQ(validateBundle(*load), "");
}

// Sends that never block run device 1's order; sends that hold their sender
// until received (NCCL's) do not: device 0 sends micro-batch 0 first.
TEST(ScheduleVerifierTest, RendezvousSendsWaitForTheirReceive) {
  Bundle bundle = withDevice1ForwardingBackwards();
  EXPECT_EQ(verifySchedule(bundle), "");
  EXPECT_EQ(verifySchedule(bundle, nullptr, /*rendezvous=*/true),
            "the schedule cannot go on: device 0 waits at op #2 (send "
            "activation to device 1, micro-batch 0, channel 0); device 1 "
            "waits at op #0 (recv activation from device 0, micro-batch 1, "
            "channel 0)");
  StatusOr<Bundle> valid = parseJson(validJson());
  ASSERT_TRUE(valid.ok());
  EXPECT_EQ(verifySchedule(*valid, nullptr, /*rendezvous=*/true), "");
}

// Under a send window of 1, device 0 waits for micro-batch 0's activation
// to be taken before it sends micro-batch 1's, which device 1 wants first.
TEST(ScheduleVerifierTest, AWaitForAReceiveThatCannotComeDeadlocks) {
  Bundle bundle = withDevice1ForwardingBackwards();
  bundle.sendWindow = 1;
  std::vector<Instr> &device0 = bundle.programs[0];
  // L0 F0 S0 L1 F1 [wait S0] S1 ... [wait S1] step.
  Instr send0 = device0[2], send1 = device0[5];
  device0.insert(device0.begin() + 5, waitFor(send0));
  device0.insert(device0.end() - 1, waitFor(send1));
  // Device 1's gradient sends, each awaited at once.
  std::vector<Instr> &device1 = bundle.programs[1];
  for (size_t i = 0; i < device1.size(); ++i)
    if (device1[i].kind == InstrKind::SendGradient) {
      Instr wait = waitFor(device1[i]);
      device1.insert(device1.begin() + i + 1, wait);
      ++i;
    }
  EXPECT_EQ(verifySchedule(bundle),
            "the schedule cannot go on: device 0 waits at op #5 (wait for the "
            "activation sent to device 1, micro-batch 0, channel 0); device 1 "
            "waits at op #0 (recv activation from device 0, micro-batch 1, "
            "channel 0)");
  // With a window of 2, the wait comes after both sends.
  bundle.sendWindow = 2;
  std::rotate(device0.begin() + 5, device0.begin() + 6, device0.end() - 1);
  EXPECT_EQ(verifySchedule(bundle), "");
}

} // namespace
