//===- BundleReaderRoundTripTest.cpp - Valid bundles read and written -----===//
//
// The bundle reader and writer on valid bundles: the example bundle reads
// into the fields it spells out, and every op kind, attribute, instruction
// kind, split backward, memory plan and placement survives writeBundle ->
// parseBundle; the writer's key order and shortest floats.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/verify/BundleValidation.h"
#include "gpipe/runtime/bundle/BundleChecksum.h"

#include "BundleReaderSupport.h"
#include "TestBundles.h"
#include "TestModels.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

using namespace gpipe::runtime;
using namespace gpipe::runtime::testing::bundlereader;
using Json = nlohmann::ordered_json;

namespace {

Op makeOp(OpKind kind, std::vector<int> operands, std::vector<int> results,
          std::string name = "") {
  Op op;
  op.kind = kind;
  op.operands = std::move(operands);
  op.results = std::move(results);
  op.name = std::move(name);
  return op;
}

Instr makeInstr(InstrKind kind, unsigned stage, unsigned mb, unsigned peer,
                unsigned channel, std::string inputName = "") {
  Instr instr;
  instr.kind = kind;
  instr.stage = stage;
  instr.microbatch = mb;
  instr.peer = peer;
  instr.channel = channel;
  instr.inputName = std::move(inputName);
  return instr;
}

//===----------------------------------------------------------------------===//
// Valid bundles
//===----------------------------------------------------------------------===//

// The example bundle reads into the Bundle fields it spells out.
TEST(BundleReaderTest, ParsesValidBundle) {
  StatusOr<Bundle> load = parseBundle(kValidBundle, "m.bundle.json");
  ASSERT_TRUE(load.ok()) << load.status().message();
  const Bundle &b = (*load);
  EXPECT_EQ(b.model, "tiny_mlp");
  EXPECT_EQ(b.batch, 4);
  EXPECT_EQ(b.microbatchRows, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(b.remat, RematPolicy::Full);

  ASSERT_EQ(b.inputs.size(), 2u);
  EXPECT_EQ(b.inputs[0].name, "x");
  EXPECT_EQ(b.inputs[0].shape, (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(b.inputs[0].type, ElementType::F32);
  EXPECT_EQ(b.inputs[1].name, "labels");
  EXPECT_EQ(b.inputs[1].type, ElementType::I32);

  ASSERT_EQ(b.params.size(), 3u);
  EXPECT_EQ(b.params[0].name, "w1");
  EXPECT_EQ(b.params[0].shape, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(b.params[0].init, InitKind::GlorotUniform);
  EXPECT_EQ(b.params[1].init, InitKind::Zeros);
  EXPECT_EQ(b.params[2].init, InitKind::Normal);
  EXPECT_DOUBLE_EQ(b.params[2].scale, 0.1);
  EXPECT_EQ(b.params[2].stage, 1u);

  ASSERT_EQ(b.stages.size(), 2u);
  const StageProgram &s0 = b.stages[0];
  ASSERT_EQ(s0.values.size(), 9u);
  EXPECT_EQ(s0.values[1].shape, (std::vector<int64_t>{3, 5}));
  EXPECT_FALSE(s0.values[1].batched);
  EXPECT_TRUE(s0.values[3].batched);
  ASSERT_EQ(s0.inputs.size(), 1u);
  EXPECT_FALSE(s0.inputs[0].fromChannel);
  EXPECT_EQ(s0.inputs[0].inputName, "x");
  EXPECT_EQ(s0.inputs[0].value, 0);
  EXPECT_EQ(s0.outputs, (std::vector<int>{4}));
  EXPECT_EQ(s0.loss, -1);
  ASSERT_EQ(s0.forward.size(), 4u);
  EXPECT_EQ(s0.forward[0].kind, OpKind::Param);
  EXPECT_EQ(s0.forward[0].name, "w1");
  EXPECT_TRUE(s0.forward[0].operands.empty());
  EXPECT_EQ(s0.forward[0].results, (std::vector<int>{1}));
  EXPECT_EQ(s0.forward[2].kind, OpKind::Dense);
  EXPECT_EQ(s0.forward[2].operands, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(s0.forward[3].kind, OpKind::Relu);
  EXPECT_EQ(s0.recompute.size(), 4u);
  ASSERT_EQ(s0.backward.size(), 5u);
  EXPECT_EQ(s0.backward[0].kind, OpKind::ReluGrad);
  EXPECT_EQ(s0.backward[1].kind, OpKind::DenseGrad);
  EXPECT_EQ(s0.backward[1].results, (std::vector<int>{-1, 7}));
  EXPECT_EQ(s0.backward[2].kind, OpKind::BiasGrad);
  EXPECT_EQ(s0.backward[4].kind, OpKind::AccumulateGrad);
  EXPECT_EQ(s0.backward[4].name, "b1");
  EXPECT_TRUE(s0.backward[4].results.empty());
  EXPECT_EQ(s0.outputGrads, (std::vector<int>{5}));
  EXPECT_TRUE(s0.inputGrads.empty());

  const StageProgram &s1 = b.stages[1];
  ASSERT_EQ(s1.inputs.size(), 2u);
  EXPECT_TRUE(s1.inputs[0].fromChannel);
  EXPECT_EQ(s1.inputs[0].channel, 0u);
  EXPECT_EQ(s1.inputs[1].inputName, "labels");
  EXPECT_EQ(s1.values[1].type, ElementType::I32);
  EXPECT_TRUE(s1.values[4].shape.empty());
  EXPECT_TRUE(s1.outputs.empty());
  EXPECT_EQ(s1.loss, 4);
  EXPECT_EQ(s1.forward[2].kind, OpKind::SoftmaxCrossEntropy);
  EXPECT_EQ(s1.backward[0].kind, OpKind::SoftmaxCrossEntropyGrad);
  EXPECT_EQ(s1.backward[1].results, (std::vector<int>{6, 7}));
  EXPECT_EQ(s1.inputGrads, (std::vector<int>{6}));

  ASSERT_EQ(b.programs.size(), 2u);
  ASSERT_EQ(b.programs[0].size(), 11u);
  EXPECT_EQ(b.programs[0][0].kind, InstrKind::LoadInput);
  EXPECT_EQ(b.programs[0][0].inputName, "x");
  EXPECT_EQ(b.programs[0][3].microbatch, 1u);
  EXPECT_EQ(b.programs[0][2].kind, InstrKind::SendActivation);
  EXPECT_EQ(b.programs[0][2].peer, 1u);
  EXPECT_EQ(b.programs[0][6].kind, InstrKind::RecvGradient);
  EXPECT_EQ(b.programs[0][7].kind, InstrKind::Backward);
  EXPECT_EQ(b.programs[0][7].microbatch, 1u);
  EXPECT_EQ(b.programs[0][10].kind, InstrKind::OptimizerStep);
  EXPECT_EQ(b.programs[1][0].kind, InstrKind::RecvActivation);
  EXPECT_EQ(b.programs[1][0].peer, 0u);
  EXPECT_EQ(b.programs[1][2].kind, InstrKind::Forward);
  EXPECT_EQ(b.programs[1][2].stage, 1u);
  EXPECT_EQ(b.programs[1][7].kind, InstrKind::SendGradient);
}

// writeBundle -> parseBundle gives back the parsed bundle, and writing it
// again gives the same text.
TEST(BundleReaderTest, RoundTripsValidBundle) {
  StatusOr<Bundle> first = parseBundle(kValidBundle, "m.bundle.json");
  ASSERT_TRUE(first.ok()) << first.status().message();
  std::string text = writeBundle((*first));
  StatusOr<Bundle> second = parseBundle(text, "written.json");
  ASSERT_TRUE(second.ok()) << second.status().message() << "\n" << text;
  expectEqual((*first), (*second));
  EXPECT_EQ(writeBundle((*second)), text);
}

// A frozen parameter (a constant of the model) stays frozen through writing
// and reading; the key is written only when set.
TEST(BundleReaderTest, RoundTripsFrozenParameters) {
  StatusOr<Bundle> first = parseBundle(kValidBundle, "m.bundle.json");
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_FALSE(first->params[1].frozen);
  first->params[1].frozen = true;
  std::string text = writeBundle(*first);
  EXPECT_EQ(text.find("\"frozen\""), text.rfind("\"frozen\""));
  StatusOr<Bundle> second = parseBundle(text, "written.json");
  ASSERT_TRUE(second.ok()) << second.status().message();
  expectEqual(*first, *second);
  EXPECT_TRUE(second->params[1].frozen);
}

// A zero-bubble bundle's split backwards (weights_from) and its
// backward_weights instructions survive writing and reading; a split past
// the backward's end is refused.
// Devices that run several stages: loads and transfers name theirs, and
// without interleaving they do not (the device's one stage).
TEST(BundleReaderTest, RoundTripsInterleavedStages) {
  namespace rt = gpipe::runtime::testing;
  Bundle first =
      rt::buildBundle(rt::mlpGraph(10), {0, 1, 2, 3}, 2, RematPolicy::Full,
                      gpipe::schedule::ScheduleKind::Interleaved, 2);
  ASSERT_EQ(first.numDevices(), 2u);
  std::string text = writeBundle(first);
  StatusOr<Bundle> second = parseBundle(text, "interleaved.json");
  ASSERT_TRUE(second.ok()) << second.status().message();
  expectEqual(first, *second);
  Json json = Json::parse(text);
  EXPECT_EQ(json["programs"][1][0],
            Json::parse(R"({"op": "recv_activation", "stage": 1, "peer": 0,)"
                        R"( "mb": 0, "channel": 0})"));
  // A transfer that does not say which of its device's stages it serves.
  json["programs"][1][0].erase("stage");
  json.erase("checksum");
  EXPECT_EQ(parseBundle(sealBundleText(json.dump()), "interleaved.json")
                .status()
                .message(),
            "'interleaved.json': programs[1][0]: missing key 'stage'");
  Bundle plain =
      rt::buildBundle(rt::mlpGraph(10), rt::mlpSplit(2), 2, RematPolicy::Full);
  EXPECT_EQ(Json::parse(writeBundle(plain))["programs"][1][0],
            Json::parse(R"({"op": "recv_activation", "peer": 0, "mb": 0,)"
                        R"( "channel": 0})"));
}

// A send window and the waits the compiler placed survive the round trip,
// under interleaving too (each wait names its stage); a bundle without one
// writes no send_window.
TEST(BundleReaderTest, RoundTripsSendWindowsAndWaits) {
  namespace rt = gpipe::runtime::testing;
  for (unsigned window : {1u, 3u}) {
    Bundle first =
        rt::buildBundle(rt::mlpGraph(10), {0, 1, 2, 3}, 4, RematPolicy::Full,
                        gpipe::schedule::ScheduleKind::Interleaved, 2, window);
    std::string text = writeBundle(first);
    StatusOr<Bundle> second = parseBundle(text, "window.json");
    ASSERT_TRUE(second.ok()) << second.status().message();
    expectEqual(first, *second);
    EXPECT_EQ(second->sendWindow, window);
    Json json = Json::parse(text);
    EXPECT_EQ(json["send_window"], window);
    size_t waits = 0;
    for (const Json &program : json["programs"])
      for (const Json &instr : program)
        waits += instr["op"].get<std::string>().rfind("wait_send_", 0) == 0;
    // Each device sends 4 micro-batches' activations and gradients over 3
    // boundaries in all: one wait per send.
    EXPECT_EQ(waits, 2u * 4u * 3u);
    EXPECT_EQ(validateBundle(*second), "");
  }
  Bundle plain =
      rt::buildBundle(rt::mlpGraph(10), rt::mlpSplit(2), 2, RematPolicy::Full);
  EXPECT_FALSE(Json::parse(writeBundle(plain)).contains("send_window"));
}

// The compiler's precision survives the round trip, and a bundle without
// one still has none.
TEST(BundleReaderTest, RoundTripsPrecision) {
  namespace rt = gpipe::runtime::testing;
  Bundle bundle =
      rt::buildBundle(rt::mlpGraph(10), rt::mlpSplit(2), 2, RematPolicy::Full);
  EXPECT_FALSE(Json::parse(writeBundle(bundle)).contains("precision"));
  for (Precision precision :
       {Precision::F32, Precision::TF32, Precision::BF16}) {
    bundle.precision = precision;
    std::string text = writeBundle(bundle);
    EXPECT_EQ(Json::parse(text)["precision"], precisionName(precision));
    StatusOr<Bundle> read = parseBundle(text, "precision.json");
    ASSERT_TRUE(read.ok()) << read.status().message();
    expectEqual(bundle, *read);
  }
}

// conv2d's stride, padding and groups and the pools' windows, forward and
// backward, survive the round trip.
TEST(BundleReaderTest, RoundTripsImageOps) {
  namespace rt = gpipe::runtime::testing;
  Bundle first = rt::buildBundle(rt::convGraph(10), rt::convSplit(2), 2,
                                 RematPolicy::Full);
  std::string text = writeBundle(first);
  StatusOr<Bundle> second = parseBundle(text, "conv.json");
  ASSERT_TRUE(second.ok()) << second.status().message();
  expectEqual(first, *second);
  EXPECT_EQ(writeBundle(*second), text);
}

TEST(BundleReaderTest, RoundTripsSplitBackwards) {
  namespace rt = gpipe::runtime::testing;
  Bundle first =
      rt::buildBundle(rt::mlpGraph(10), rt::mlpSplit(2), 2, RematPolicy::Full,
                      gpipe::schedule::ScheduleKind::ZeroBubbleH1);
  ASSERT_NE(first.stages[1].weightsFrom, StageProgram::kNotSplit);
  std::string text = writeBundle(first);
  StatusOr<Bundle> second = parseBundle(text, "zb.json");
  ASSERT_TRUE(second.ok()) << second.status().message();
  expectEqual(first, *second);
  EXPECT_EQ(writeBundle(*second), text);
  Json json = Json::parse(text);
  json["stages"][1]["weights_from"] = 99;
  json.erase("checksum");
  EXPECT_EQ(
      parseBundle(sealBundleText(json.dump()), "zb.json").status().message(),
      "'zb.json': stages[1]: weights_from 99 out of range: the backward "
      "has " +
          std::to_string(first.stages[1].backward.size()) + " ops");
}

// A memory plan survives writeBundle -> parseBundle.
TEST(BundleReaderTest, RoundTripsMemoryPlan) {
  StatusOr<Bundle> first = parseBundle(kValidBundle, "m.bundle.json");
  ASSERT_TRUE(first.ok()) << first.status().message();
  ASSERT_EQ((*first).memoryPlan.devices.size(), 2u);
  EXPECT_EQ((*first).memoryPlan.devices[0].buffers.size(), 2u);
  EXPECT_EQ((*first).memoryPlan.devices[0].buffers[1].value, 3);
  (*first).memoryPlan.optimizerSlots = 1;
  (*first).memoryPlan.devices = {{100, 150, 160}, {200, 260, 300}};
  StatusOr<Bundle> second = parseBundle(writeBundle((*first)), "written.json");
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_EQ((*second).memoryPlan.optimizerSlots, 1u);
  ASSERT_EQ((*second).memoryPlan.devices.size(), 2u);
  EXPECT_EQ((*second).memoryPlan.devices[1].residentBytes, 200);
  EXPECT_EQ((*second).memoryPlan.devices[1].peakBytes, 260);
  EXPECT_EQ((*second).memoryPlan.devices[1].arenaBytes, 300);
}

// The compiler's placement survives writing and reading; a buffer outside
// the arena, unaligned, with its end before its start, or naming an
// instruction, micro-batch or value its device does not have is refused, by
// position.
TEST(BundleReaderTest, PlacementRoundTripsAndIsRangeChecked) {
  StatusOr<Bundle> first = parseBundle(kValidBundle, "m.bundle.json");
  ASSERT_TRUE(first.ok()) << first.status().message();
  (*first).memoryPlan.devices = {{100, 150, 160}, {200, 260, 300}};
  (*first).memoryPlan.devices[1].buffers = {{48, 0, 0, 5, 0, 0, 0},
                                            {48, 48, 3, 9, 2, 0, 3}};
  StatusOr<Bundle> second = parseBundle(writeBundle(*first), "w.json");
  ASSERT_TRUE(second.ok()) << second.status().message();
  ASSERT_EQ((*second).memoryPlan.devices[1].buffers.size(), 2u);
  EXPECT_EQ((*second).memoryPlan.devices[1].buffers[1].offset, 48);
  EXPECT_EQ((*second).memoryPlan.devices[1].buffers[1].end, 9);
  EXPECT_EQ((*second).memoryPlan.devices[1].buffers[1].instr, 2);
  EXPECT_EQ((*second).memoryPlan.devices[1].buffers[1].value, 3);

  (*first).memoryPlan.devices[1].buffers[1].offset = 64; // 64 + 48 > 100
  EXPECT_EQ(parseBundle(writeBundle(*first), "w.json").status().message(),
            "'w.json': memory_plan.devices[1].buffers[1]: expected a buffer "
            "inside the arena's 100 bytes after the resident block, found 48 "
            "bytes at 64");
  (*first).memoryPlan.devices[1].buffers[1] = {16, 0, 7, 6, 2, 0, 3};
  EXPECT_EQ(parseBundle(writeBundle(*first), "w.json").status().message(),
            "'w.json': memory_plan.devices[1].buffers[1]: expected 0 <= start "
            "<= end, found 7 and 6");
  (*first).memoryPlan.devices[1].buffers[1] = {12, 4, 3, 9, 2, 0, 3};
  EXPECT_EQ(parseBundle(writeBundle(*first), "w.json").status().message(),
            "'w.json': memory_plan.devices[1].buffers[1]: expected an offset "
            "and size that are multiples of 16 bytes, found 12 bytes at 4");
  (*first).memoryPlan.devices[1].buffers[1] = {16, 0, 3, 9, 11, 0, 3};
  EXPECT_EQ(parseBundle(writeBundle(*first), "w.json").status().message(),
            "'w.json': memory_plan.devices[1].buffers[1][4]: expected an "
            "instruction of the device's program (0 to 10), found 11");
  (*first).memoryPlan.devices[1].buffers[1] = {16, 0, 3, 9, 2, 1, 3};
  EXPECT_EQ(parseBundle(writeBundle(*first), "w.json").status().message(),
            "'w.json': memory_plan.devices[1].buffers[1][5]: expected -1 or "
            "the micro-batch of instruction 2, found 1");
  (*first).memoryPlan.devices[1].buffers[1] = {16, 0, 3, 9, 2, 0, 8};
  EXPECT_EQ(parseBundle(writeBundle(*first), "w.json").status().message(),
            "'w.json': memory_plan.devices[1].buffers[1][6]: expected -1 or a "
            "value id of the device's stage (0 to 7), found 8");
}

/// A memory plan with no buffers for each of `b`'s devices: enough for the
/// reader, which requires one (the executor would refuse it).
void addEmptyPlan(Bundle &b) {
  b.memoryPlan.devices.assign(b.programs.size(), PlannedDeviceMemory());
}

// Every op kind, attribute, instruction kind, init, element type and remat
// policy survives writeBundle -> parseBundle.
TEST(BundleReaderTest, RoundTripsEveryKind) {
  Bundle b;
  b.model = "every \"kind\"";
  b.batch = 6;
  b.microbatchRows = {1, 2, 3};
  b.remat = RematPolicy::ExceptLast;
  b.inputs = {{"ids", {6, 4}, ElementType::I32}, {"y", {6}, ElementType::F32}};
  const InitKind inits[] = {InitKind::Zeros,         InitKind::Ones,
                            InitKind::Normal,        InitKind::Uniform,
                            InitKind::GlorotUniform, InitKind::Pretrained};
  b.weights = "pretrained/every kind.safetensors";
  for (unsigned i = 0; i < 6; ++i)
    b.params.push_back({"p" + std::to_string(i),
                        {2, int64_t(i) + 1},
                        inits[i],
                        0.125 * (i + 1),
                        i % 2});
  b.stages.resize(2);
  StageProgram &s = b.stages[0];
  for (int v = 0; v < 12; ++v)
    s.values.push_back(
        {{6, v + 1}, v % 3 ? ElementType::F32 : ElementType::I32, v % 2 == 0});
  s.values.push_back({{}, ElementType::F32, false});
  s.inputs = {{0, false, 0, "ids"}, {1, false, 0, "y"}};
  s.outputs = {3, 4};
  s.forward = {
      makeOp(OpKind::Param, {}, {2}, "p0"),
      makeOp(OpKind::Dense, {0, 1}, {3}),
      makeOp(OpKind::Dense, {0, 1, 2}, {3}),
      makeOp(OpKind::Relu, {3}, {4}),
      makeOp(OpKind::Gelu, {3}, {4}),
      makeOp(OpKind::Tanh, {3}, {4}),
      makeOp(OpKind::Softmax, {3}, {4}),
      makeOp(OpKind::LayerNorm, {3, 1, 2}, {5}),
      makeOp(OpKind::Add, {3, 4}, {5}),
      makeOp(OpKind::Embedding, {0, 2}, {5}),
      makeOp(OpKind::Attention, {3, 1, 2}, {6}),
      makeOp(OpKind::Dropout, {3}, {7}),
      makeOp(OpKind::SoftmaxCrossEntropy, {3, 0}, {12}),
      makeOp(OpKind::MseLoss, {3, 1}, {12}),
      makeOp(OpKind::GeluErf, {3}, {4}),
      makeOp(OpKind::Attention, {3, 1, 2, 1, 2}, {6}),
      makeOp(OpKind::Kernel, {3, 4}, {5}),
      makeOp(OpKind::Matmul, {3, 4}, {5}),
      makeOp(OpKind::Matmul, {3, 4}, {5}),
      makeOp(OpKind::Matmul, {3, 4}, {5}),
  };
  s.forward[18].transposeA = true; // [17] has neither
  s.forward[19].transposeA = s.forward[19].transposeB = true;
  s.forward[16].kernel = 1;
  s.forward[16].space = {6, 9};
  s.forward[16].spaceBatched = true;
  // A reduction to a scalar (no output dimension) and a broadcast.
  b.code.kernels = {
      {"gpipe_kernel_0_a", 1, "reduce_sum(in0)->out", 1, {{0}}, {}},
      {"gpipe_kernel_1_b", 2, "add(in0,in1)->out", 2, {{0, 1}, {1}}, {0, 1}}};
  b.code.cpu = {{"x86-64-v3", std::string("\x7f"
                                          "ELF\0\1\2\xff",
                                          8)},
                {"x86-64", "any bytes"}};
  s.forward[7].epsilon = 1e-6f;
  s.forward[10].heads = 4;
  s.forward[10].causal = true;
  s.forward[11].rate = 0.1f;
  s.forward[11].seed = std::numeric_limits<uint64_t>::max();
  s.recompute = {s.forward[0], s.forward[7], s.forward[11]};
  s.backward = {
      makeOp(OpKind::DenseGrad, {8, 0, 1}, {-1, 9}),
      makeOp(OpKind::BiasGrad, {8}, {9}),
      makeOp(OpKind::ReluGrad, {8, 3}, {9}),
      makeOp(OpKind::GeluGrad, {8, 3}, {9}),
      makeOp(OpKind::TanhGrad, {8, 4}, {9}),
      makeOp(OpKind::SoftmaxGrad, {8, 4}, {9}),
      makeOp(OpKind::LayerNormGrad, {8, 5, 3, 1}, {9, 10, 11}),
      makeOp(OpKind::EmbeddingGrad, {8, 0}, {9}),
      makeOp(OpKind::AttentionGrad, {8, 6, 3, 1, 2}, {-1, 10, 11}),
      makeOp(OpKind::DropoutGrad, {8, 7}, {9}),
      makeOp(OpKind::SoftmaxCrossEntropyGrad, {12, 0}, {9}),
      makeOp(OpKind::MseLossGrad, {3, 1}, {9}),
      makeOp(OpKind::AddGrads, {9, 10}, {11}),
      makeOp(OpKind::AccumulateGrad, {9}, {}, "p2"),
      makeOp(OpKind::Zeros, {}, {10}),
      makeOp(OpKind::GeluErfGrad, {8, 3}, {9}),
      makeOp(OpKind::AttentionGrad, {8, 6, 3, 1, 2, 1, 2}, {-1, 10, 11, 9, 10}),
  };
  s.forward[15].heads = 2;
  s.backward.back().heads = 2;
  s.backward[6].epsilon = 0.001f;
  s.backward[8].heads = 2;
  s.backward[9].rate = 0.5f;
  s.backward[9].seed = 42;
  s.outputGrads = {8, 9};
  StageProgram &t = b.stages[1];
  t.values = {{{6, 3}, ElementType::F32, true},
              {{6, 3}, ElementType::F32, true},
              {{}, ElementType::F32, false}};
  t.inputs = {{1, true, 1, ""}, {0, true, 0, ""}};
  t.loss = 2;
  t.inputGrads = {0, 1};
  b.programs = {
      {makeInstr(InstrKind::LoadInput, 0, 2, 0, 0, "ids"),
       makeInstr(InstrKind::Forward, 0, 1, 0, 0),
       makeInstr(InstrKind::SendActivation, 0, 2, 1, 1),
       makeInstr(InstrKind::RecvGradient, 0, 0, 1, 1),
       makeInstr(InstrKind::Backward, 0, 1, 0, 0),
       makeInstr(InstrKind::OptimizerStep, 0, 0, 0, 0)},
      {makeInstr(InstrKind::RecvActivation, 1, 1, 0, 1),
       makeInstr(InstrKind::Forward, 1, 1, 0, 0),
       makeInstr(InstrKind::SendGradient, 1, 1, 0, 0),
       makeInstr(InstrKind::OptimizerStep, 0, 0, 0, 0)},
  };

  addEmptyPlan(b);
  std::string text = writeBundle(b);
  StatusOr<Bundle> load = parseBundle(text, "written.json");
  ASSERT_TRUE(load.ok()) << load.status().message() << "\n" << text;
  expectEqual(b, (*load));
}

// The writer follows the documented key order and puts short objects (an op,
// an instruction) on one line.
TEST(BundleReaderTest, WriterLayout) {
  StatusOr<Bundle> load = parseBundle(kValidBundle, "m.bundle.json");
  ASSERT_TRUE(load.ok()) << load.status().message();
  std::string text = writeBundle((*load));
  EXPECT_EQ(
      text.rfind("{\n  \"format\": \"gpipe-bundle\",\n  \"version\": 2,\n"
                 "  \"model\": \"tiny_mlp\",\n  \"batch\": 4,\n"
                 "  \"microbatch_rows\": [2, 2],\n  \"remat\": \"full\",\n",
                 0),
      0u)
      << text;
  EXPECT_NE(text.find("\n        {\"op\": \"dense\", \"operands\": [0, 1, 2], "
                      "\"results\": [3]},\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\n        {\"op\": \"param\", \"results\": [1], "
                      "\"name\": \"w1\"},\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\n      {\"op\": \"send_activation\", \"peer\": 1, "
                      "\"mb\": 0, \"channel\": 0},\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("{\"name\": \"w2\", \"shape\": [5, 2], \"init\": "
                      "\"normal\", \"scale\": 0.1, \"stage\": 1}"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.back(), '\n');
}

// Floats are written with the fewest digits that read back as the float.
TEST(BundleReaderTest, WritesShortestFloats) {
  Bundle b;
  b.model = "m";
  b.batch = 1;
  b.microbatchRows = {1};
  b.params = {{"g", {1}, InitKind::Ones, 1.0, 0}};
  b.stages.resize(1);
  b.stages[0].values = {{{1}, ElementType::F32, true},
                        {{1}, ElementType::F32, false}};
  b.stages[0].forward = {makeOp(OpKind::Param, {}, {1}, "g"),
                         makeOp(OpKind::LayerNorm, {0, 1, 1}, {0}),
                         makeOp(OpKind::Dropout, {0}, {0})};
  b.stages[0].forward[1].epsilon = 1e-5f;
  b.stages[0].forward[2].rate = 0.3f;
  b.programs.resize(1);
  addEmptyPlan(b);
  std::string text = writeBundle(b);
  EXPECT_NE(text.find("\"epsilon\": 1e-05}"), std::string::npos) << text;
  EXPECT_NE(text.find("\"rate\": 0.3, \"seed\": 0}"), std::string::npos)
      << text;
  StatusOr<Bundle> load = parseBundle(text, "floats.json");
  ASSERT_TRUE(load.ok()) << load.status().message();
  EXPECT_EQ((*load).stages[0].forward[1].epsilon, 1e-5f);
  EXPECT_EQ((*load).stages[0].forward[2].rate, 0.3f);
}

} // namespace
