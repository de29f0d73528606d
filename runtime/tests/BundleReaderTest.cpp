//===- BundleReaderTest.cpp - Tests of the bundle reader and writer -------===//

#include "gpipe/runtime/BundleReader.h"
#include "gpipe/runtime/BundleChecksum.h"

#include "TestBundles.h"
#include "TestModels.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <functional>
#include <limits>
#include <ostream>
#include <string>
#include <unistd.h>

using namespace gpipe::runtime;
using Json = nlohmann::ordered_json;

namespace {

/// A 2-stage MLP (dense + relu | dense + cross-entropy), batch 4 in 2
/// micro-batches, with the 2-device GPipe programs.
const char *kValidBundleBody = R"json({
  "format": "gpipe-bundle",
  "version": 2,
  "model": "tiny_mlp",
  "batch": 4,
  "microbatch_rows": [2, 2],
  "remat": "full",
  "inputs": [
    {"name": "x", "shape": [4, 3], "type": "f32"},
    {"name": "labels", "shape": [4], "type": "i32"}
  ],
  "params": [
    {"name": "w1", "shape": [3, 5], "init": "glorot_uniform", "scale": 1.0, "stage": 0},
    {"name": "b1", "shape": [5], "init": "zeros", "scale": 1.0, "stage": 0},
    {"name": "w2", "shape": [5, 2], "init": "normal", "scale": 0.1, "stage": 1}
  ],
  "stages": [
    {
      "values": [
        {"shape": [4, 3], "type": "f32", "batched": true},
        {"shape": [3, 5], "type": "f32", "batched": false},
        {"shape": [5], "type": "f32", "batched": false},
        {"shape": [4, 5], "type": "f32", "batched": true},
        {"shape": [4, 5], "type": "f32", "batched": true},
        {"shape": [4, 5], "type": "f32", "batched": true},
        {"shape": [4, 5], "type": "f32", "batched": true},
        {"shape": [3, 5], "type": "f32", "batched": false},
        {"shape": [5], "type": "f32", "batched": false}
      ],
      "inputs": [{"value": 0, "input": "x"}],
      "outputs": [4],
      "loss": -1,
      "forward": [
        {"op": "param", "results": [1], "name": "w1"},
        {"op": "param", "operands": [], "results": [2], "name": "b1"},
        {"op": "dense", "operands": [0, 1, 2], "results": [3]},
        {"op": "relu", "operands": [3], "results": [4]}
      ],
      "recompute": [
        {"op": "param", "results": [1], "name": "w1"},
        {"op": "param", "results": [2], "name": "b1"},
        {"op": "dense", "operands": [0, 1, 2], "results": [3]},
        {"op": "relu", "operands": [3], "results": [4]}
      ],
      "backward": [
        {"op": "relu_grad", "operands": [5, 3], "results": [6]},
        {"op": "dense_grad", "operands": [6, 0, 1], "results": [-1, 7]},
        {"op": "bias_grad", "operands": [6], "results": [8]},
        {"op": "accumulate_grad", "operands": [7], "name": "w1"},
        {"op": "accumulate_grad", "operands": [8], "results": [], "name": "b1"}
      ],
      "output_grads": [5],
      "input_grads": []
    },
    {
      "values": [
        {"shape": [4, 5], "type": "f32", "batched": true},
        {"shape": [4], "type": "i32", "batched": true},
        {"shape": [5, 2], "type": "f32", "batched": false},
        {"shape": [4, 2], "type": "f32", "batched": true},
        {"shape": [], "type": "f32", "batched": false},
        {"shape": [4, 2], "type": "f32", "batched": true},
        {"shape": [4, 5], "type": "f32", "batched": true},
        {"shape": [5, 2], "type": "f32", "batched": false}
      ],
      "inputs": [{"value": 0, "channel": 0}, {"value": 1, "input": "labels"}],
      "outputs": [],
      "loss": 4,
      "forward": [
        {"op": "param", "results": [2], "name": "w2"},
        {"op": "dense", "operands": [0, 2], "results": [3]},
        {"op": "softmax_cross_entropy", "operands": [3, 1], "results": [4]}
      ],
      "recompute": [
        {"op": "param", "results": [2], "name": "w2"},
        {"op": "dense", "operands": [0, 2], "results": [3]},
        {"op": "softmax_cross_entropy", "operands": [3, 1], "results": [4]}
      ],
      "backward": [
        {"op": "softmax_cross_entropy_grad", "operands": [4, 1], "results": [5]},
        {"op": "dense_grad", "operands": [5, 0, 2], "results": [6, 7]},
        {"op": "accumulate_grad", "operands": [7], "name": "w2"}
      ],
      "output_grads": [],
      "input_grads": [6]
    }
  ],
  "programs": [
    [
      {"op": "load_input", "name": "x", "mb": 0},
      {"op": "forward", "stage": 0, "mb": 0},
      {"op": "send_activation", "peer": 1, "mb": 0, "channel": 0},
      {"op": "load_input", "name": "x", "mb": 1},
      {"op": "forward", "stage": 0, "mb": 1},
      {"op": "send_activation", "peer": 1, "mb": 1, "channel": 0},
      {"op": "recv_gradient", "peer": 1, "mb": 1, "channel": 0},
      {"op": "backward", "stage": 0, "mb": 1},
      {"op": "recv_gradient", "peer": 1, "mb": 0, "channel": 0},
      {"op": "backward", "stage": 0, "mb": 0},
      {"op": "optimizer_step"}
    ],
    [
      {"op": "recv_activation", "peer": 0, "mb": 0, "channel": 0},
      {"op": "load_input", "name": "labels", "mb": 0},
      {"op": "forward", "stage": 1, "mb": 0},
      {"op": "recv_activation", "peer": 0, "mb": 1, "channel": 0},
      {"op": "load_input", "name": "labels", "mb": 1},
      {"op": "forward", "stage": 1, "mb": 1},
      {"op": "backward", "stage": 1, "mb": 1},
      {"op": "send_gradient", "peer": 0, "mb": 1, "channel": 0},
      {"op": "backward", "stage": 1, "mb": 0},
      {"op": "send_gradient", "peer": 0, "mb": 0, "channel": 0},
      {"op": "optimizer_step"}
    ]
  ],
  "memory_plan": {
    "optimizer_slots": 2,
    "devices": [
      {"resident_bytes": 320, "peak_bytes": 400, "arena_bytes": 400,
       "buffers": [[32, 0, 0, 3, 0, 0, 0], [48, 32, 1, 2, 1, 0, 3]]},
      {"resident_bytes": 160, "peak_bytes": 208, "arena_bytes": 208,
       "buffers": [[48, 0, 0, 4, 0, 0, 0]]}
    ]
  }
})json";
/// The same, sealed with its checksum as gpipe-translate writes it.
const std::string kValidBundle = sealBundleText(kValidBundleBody);

//===----------------------------------------------------------------------===//
// Structural equality, field by field
//===----------------------------------------------------------------------===//

void expectEqual(const ValueSpec &a, const ValueSpec &b,
                 const std::string &at) {
  EXPECT_EQ(a.shape, b.shape) << at;
  EXPECT_EQ(a.type, b.type) << at;
  EXPECT_EQ(a.batched, b.batched) << at;
}

void expectEqual(const Op &a, const Op &b, const std::string &at) {
  EXPECT_EQ(a.kind, b.kind) << at;
  EXPECT_EQ(a.operands, b.operands) << at;
  EXPECT_EQ(a.results, b.results) << at;
  EXPECT_EQ(a.name, b.name) << at;
  EXPECT_EQ(a.epsilon, b.epsilon) << at;
  EXPECT_EQ(a.rate, b.rate) << at;
  EXPECT_EQ(a.seed, b.seed) << at;
  EXPECT_EQ(a.heads, b.heads) << at;
  EXPECT_EQ(a.causal, b.causal) << at;
  for (int axis = 0; axis < 2; ++axis) {
    EXPECT_EQ(a.window.window[axis], b.window.window[axis]) << at;
    EXPECT_EQ(a.window.stride[axis], b.window.stride[axis]) << at;
    EXPECT_EQ(a.window.padding[axis], b.window.padding[axis]) << at;
  }
  EXPECT_EQ(a.window.groups, b.window.groups) << at;
}

void expectEqual(const std::vector<Op> &a, const std::vector<Op> &b,
                 const std::string &at) {
  ASSERT_EQ(a.size(), b.size()) << at;
  for (size_t i = 0; i < a.size(); ++i)
    expectEqual(a[i], b[i], at + "[" + std::to_string(i) + "]");
}

void expectEqual(const StageProgram &a, const StageProgram &b,
                 const std::string &at) {
  ASSERT_EQ(a.values.size(), b.values.size()) << at;
  for (size_t v = 0; v < a.values.size(); ++v)
    expectEqual(a.values[v], b.values[v],
                at + ".values[" + std::to_string(v) + "]");
  ASSERT_EQ(a.inputs.size(), b.inputs.size()) << at;
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    std::string where = at + ".inputs[" + std::to_string(i) + "]";
    EXPECT_EQ(a.inputs[i].value, b.inputs[i].value) << where;
    EXPECT_EQ(a.inputs[i].fromChannel, b.inputs[i].fromChannel) << where;
    EXPECT_EQ(a.inputs[i].channel, b.inputs[i].channel) << where;
    EXPECT_EQ(a.inputs[i].inputName, b.inputs[i].inputName) << where;
  }
  EXPECT_EQ(a.outputs, b.outputs) << at;
  EXPECT_EQ(a.loss, b.loss) << at;
  expectEqual(a.forward, b.forward, at + ".forward");
  expectEqual(a.recompute, b.recompute, at + ".recompute");
  expectEqual(a.backward, b.backward, at + ".backward");
  EXPECT_EQ(a.weightsFrom, b.weightsFrom) << at << ".weights_from";
  EXPECT_EQ(a.outputGrads, b.outputGrads) << at;
  EXPECT_EQ(a.inputGrads, b.inputGrads) << at;
}

void expectEqual(const Instr &a, const Instr &b, const std::string &at) {
  EXPECT_EQ(a.kind, b.kind) << at;
  EXPECT_EQ(a.stage, b.stage) << at;
  EXPECT_EQ(a.microbatch, b.microbatch) << at;
  EXPECT_EQ(a.peer, b.peer) << at;
  EXPECT_EQ(a.channel, b.channel) << at;
  EXPECT_EQ(a.inputName, b.inputName) << at;
}

void expectEqual(const Bundle &a, const Bundle &b) {
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.batch, b.batch);
  EXPECT_EQ(a.microbatchRows, b.microbatchRows);
  EXPECT_EQ(a.remat, b.remat);
  EXPECT_EQ(a.weights, b.weights);
  ASSERT_EQ(a.inputs.size(), b.inputs.size());
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    EXPECT_EQ(a.inputs[i].name, b.inputs[i].name) << "input " << i;
    EXPECT_EQ(a.inputs[i].shape, b.inputs[i].shape) << "input " << i;
    EXPECT_EQ(a.inputs[i].type, b.inputs[i].type) << "input " << i;
  }
  ASSERT_EQ(a.params.size(), b.params.size());
  for (size_t i = 0; i < a.params.size(); ++i) {
    EXPECT_EQ(a.params[i].name, b.params[i].name) << "param " << i;
    EXPECT_EQ(a.params[i].shape, b.params[i].shape) << "param " << i;
    EXPECT_EQ(a.params[i].init, b.params[i].init) << "param " << i;
    EXPECT_EQ(a.params[i].scale, b.params[i].scale) << "param " << i;
    EXPECT_EQ(a.params[i].stage, b.params[i].stage) << "param " << i;
  }
  ASSERT_EQ(a.stages.size(), b.stages.size());
  for (size_t s = 0; s < a.stages.size(); ++s)
    expectEqual(a.stages[s], b.stages[s], "stages[" + std::to_string(s) + "]");
  ASSERT_EQ(a.programs.size(), b.programs.size());
  for (size_t d = 0; d < a.programs.size(); ++d) {
    ASSERT_EQ(a.programs[d].size(), b.programs[d].size()) << "program " << d;
    for (size_t i = 0; i < a.programs[d].size(); ++i)
      expectEqual(a.programs[d][i], b.programs[d][i],
                  "programs[" + std::to_string(d) + "][" + std::to_string(i) +
                      "]");
  }
}

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
  };
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
  s.forward.back().heads = 2;
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

Json validJson() { return Json::parse(kValidBundle); }

StatusOr<Bundle> parseJson(const Json &json) {
  Json unsealed = json;
  if (unsealed.is_object())
    unsealed.erase("checksum");
  return parseBundle(sealBundleText(unsealed.dump()), "m.bundle.json");
}

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
     "memory_plan, checksum"},
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
     "scale, stage"},
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
     "avg_pool2d, global_avg_pool, flatten, mse_loss, dense_grad, bias_grad, "
     "relu_grad, gelu_grad, gelu_erf_grad, tanh_grad, softmax_grad, "
     "layer_norm_grad, "
     "batch_norm_grad, embedding_grad, "
     "attention_grad, conv2d_grad, max_pool2d_grad, avg_pool2d_grad, "
     "global_avg_pool_grad, flatten_grad, dropout_grad, "
     "softmax_cross_entropy_grad, mse_loss_grad, add_grads, accumulate_grad, "
     "zeros"},
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
     "send_gradient, recv_gradient, optimizer_step"},
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

INSTANTIATE_TEST_SUITE_P(Validation, BundleReaderErrorTest,
                         ::testing::ValuesIn(kErrorCases),
                         [](const ::testing::TestParamInfo<ErrorCase> &info) {
                           return std::string(info.param.name);
                         });

} // namespace
