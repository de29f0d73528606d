//===- BundleReaderSupport.h - Bundle reader test data -*- C++ -*- --------===//
//
// What the bundle reader tests share: a valid 2-stage bundle as text (with
// and without its checksum), field-by-field equality of bundles, and the
// valid bundle as JSON to edit and parse again.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_TESTS_BUNDLEREADERSUPPORT_H
#define GPIPE_RUNTIME_TESTS_BUNDLEREADERSUPPORT_H

#include "gpipe/runtime/bundle/BundleReader.h"
#include "gpipe/runtime/bundle/BundleChecksum.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

namespace gpipe::runtime::testing::bundlereader {

/// A 2-stage MLP (dense + relu | dense + cross-entropy), batch 4 in 2
/// micro-batches, with the 2-device GPipe programs.
inline const char *const kValidBundleBody = R"json({
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
inline const std::string kValidBundle = sealBundleText(kValidBundleBody);

//===----------------------------------------------------------------------===//
// Structural equality, field by field
//===----------------------------------------------------------------------===//

inline void expectEqual(const ValueSpec &a, const ValueSpec &b,
                 const std::string &at) {
  EXPECT_EQ(a.shape, b.shape) << at;
  EXPECT_EQ(a.type, b.type) << at;
  EXPECT_EQ(a.batched, b.batched) << at;
}

inline void expectEqual(const Op &a, const Op &b, const std::string &at) {
  EXPECT_EQ(a.kind, b.kind) << at;
  EXPECT_EQ(a.operands, b.operands) << at;
  EXPECT_EQ(a.results, b.results) << at;
  EXPECT_EQ(a.name, b.name) << at;
  EXPECT_EQ(a.epsilon, b.epsilon) << at;
  EXPECT_EQ(a.rate, b.rate) << at;
  EXPECT_EQ(a.seed, b.seed) << at;
  EXPECT_EQ(a.heads, b.heads) << at;
  EXPECT_EQ(a.causal, b.causal) << at;
  EXPECT_EQ(a.transposeA, b.transposeA) << at;
  EXPECT_EQ(a.transposeB, b.transposeB) << at;
  for (int axis = 0; axis < 2; ++axis) {
    EXPECT_EQ(a.window.window[axis], b.window.window[axis]) << at;
    EXPECT_EQ(a.window.stride[axis], b.window.stride[axis]) << at;
    EXPECT_EQ(a.window.padding[axis], b.window.padding[axis]) << at;
  }
  EXPECT_EQ(a.window.groups, b.window.groups) << at;
  EXPECT_EQ(a.kernel, b.kernel) << at;
  EXPECT_EQ(a.space, b.space) << at;
  EXPECT_EQ(a.spaceBatched, b.spaceBatched) << at;
}

inline void expectEqual(const std::vector<Op> &a, const std::vector<Op> &b,
                 const std::string &at) {
  ASSERT_EQ(a.size(), b.size()) << at;
  for (size_t i = 0; i < a.size(); ++i)
    expectEqual(a[i], b[i], at + "[" + std::to_string(i) + "]");
}

inline void expectEqual(const StageProgram &a, const StageProgram &b,
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

inline void expectEqual(const Instr &a, const Instr &b, const std::string &at) {
  EXPECT_EQ(a.kind, b.kind) << at;
  EXPECT_EQ(a.stage, b.stage) << at;
  EXPECT_EQ(a.microbatch, b.microbatch) << at;
  EXPECT_EQ(a.peer, b.peer) << at;
  EXPECT_EQ(a.channel, b.channel) << at;
  EXPECT_EQ(a.inputName, b.inputName) << at;
}

inline void expectEqual(const Bundle &a, const Bundle &b) {
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.batch, b.batch);
  EXPECT_EQ(a.microbatchRows, b.microbatchRows);
  EXPECT_EQ(a.remat, b.remat);
  EXPECT_EQ(a.weights, b.weights);
  EXPECT_EQ(a.precision, b.precision);
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
    EXPECT_EQ(a.params[i].frozen, b.params[i].frozen) << "param " << i;
    EXPECT_EQ(a.params[i].stage, b.params[i].stage) << "param " << i;
  }
  ASSERT_EQ(a.code.kernels.size(), b.code.kernels.size());
  for (size_t k = 0; k < a.code.kernels.size(); ++k) {
    EXPECT_EQ(a.code.kernels[k].symbol, b.code.kernels[k].symbol) << k;
    EXPECT_EQ(a.code.kernels[k].inputs, b.code.kernels[k].inputs) << k;
    EXPECT_EQ(a.code.kernels[k].ops, b.code.kernels[k].ops) << k;
    EXPECT_EQ(a.code.kernels[k].rank, b.code.kernels[k].rank) << k;
    EXPECT_EQ(a.code.kernels[k].inputDims, b.code.kernels[k].inputDims) << k;
    EXPECT_EQ(a.code.kernels[k].outputDims, b.code.kernels[k].outputDims) << k;
    EXPECT_EQ(a.code.kernels[k].extents, b.code.kernels[k].extents) << k;
    EXPECT_EQ(a.code.kernels[k].types, b.code.kernels[k].types) << k;
  }
  ASSERT_EQ(a.code.cpu.size(), b.code.cpu.size());
  for (size_t v = 0; v < a.code.cpu.size(); ++v) {
    EXPECT_EQ(a.code.cpu[v].isa, b.code.cpu[v].isa) << v;
    EXPECT_TRUE(a.code.cpu[v].bytes == b.code.cpu[v].bytes) << v;
  }
  ASSERT_EQ(a.code.cuda.has_value(), b.code.cuda.has_value());
  if (a.code.cuda) {
    EXPECT_EQ(a.code.cuda->arch, b.code.cuda->arch);
    EXPECT_TRUE(a.code.cuda->ptx == b.code.cuda->ptx);
  }
  ASSERT_EQ(a.stages.size(), b.stages.size());
  for (size_t s = 0; s < a.stages.size(); ++s)
    expectEqual(a.stages[s], b.stages[s], "stages[" + std::to_string(s) + "]");
  EXPECT_EQ(a.sendWindow, b.sendWindow);
  ASSERT_EQ(a.programs.size(), b.programs.size());
  for (size_t d = 0; d < a.programs.size(); ++d) {
    ASSERT_EQ(a.programs[d].size(), b.programs[d].size()) << "program " << d;
    for (size_t i = 0; i < a.programs[d].size(); ++i)
      expectEqual(a.programs[d][i], b.programs[d][i],
                  "programs[" + std::to_string(d) + "][" + std::to_string(i) +
                      "]");
  }
}

/// The valid bundle as JSON, checksum included.
inline nlohmann::ordered_json validJson() {
  return nlohmann::ordered_json::parse(kValidBundle);
}

/// Parses `json` sealed afresh with its checksum, as "m.bundle.json".
inline StatusOr<Bundle> parseJson(const nlohmann::ordered_json &json) {
  nlohmann::ordered_json unsealed = json;
  if (unsealed.is_object())
    unsealed.erase("checksum");
  return parseBundle(sealBundleText(unsealed.dump()), "m.bundle.json");
}

/// `bundle`'s text after `edit`, read back: the reader's error ("" if none).
inline std::string editedReadError(
    const Bundle &bundle,
    const std::function<void(nlohmann::ordered_json &)> &edit) {
  nlohmann::ordered_json json = nlohmann::ordered_json::parse(writeBundle(bundle));
  edit(json);
  StatusOr<Bundle> read = parseJson(json);
  return read.ok() ? std::string() : read.status().message();
}

/// Whether `error` contains `part`, for EXPECT_PRED2's message.
inline bool mentions(const std::string &error, const std::string &part) {
  return error.find(part) != std::string::npos;
}

} // namespace gpipe::runtime::testing::bundlereader

#endif // GPIPE_RUNTIME_TESTS_BUNDLEREADERSUPPORT_H
