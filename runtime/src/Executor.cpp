//===- Executor.cpp - Runs a bundle's per-device GPipe programs -----------===//
//
// Each device thread owns, per micro-batch, a table of the stage's values
// (one slot per value id). What stays in that table between the forward and
// the backward of a micro-batch follows the bundle's remat policy; every
// buffer that enters or leaves a table is counted against the device's
// memory, as are the parameters, gradients, optimizer slots, received
// buffers and transient scratch.
//
// Determinism: a device accumulates the gradients of its own parameters, in
// the order of its instruction stream, with no atomics; kernels are
// deterministic; so the same bundle, seed and data give bit-identical
// parameters on every run.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/Executor.h"

#include "gpipe/runtime/CpuKernels.h"
#include "gpipe/runtime/Initializers.h"
#include "gpipe/runtime/Mailbox.h"
#include "gpipe/runtime/PlacementVerifier.h"
#include "gpipe/runtime/ProgramAnalysis.h"
#include "gpipe/runtime/ScheduleVerifier.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <set>
#include <thread>
#include <unordered_map>

using namespace gpipe::runtime;

//===----------------------------------------------------------------------===//
// Names and formatting
//===----------------------------------------------------------------------===//

static const char *typeName(ElementType type) {
  return type == ElementType::F32 ? "f32" : "i32";
}

static std::string shapeString(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

static int64_t product(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t dim : shape)
    n *= dim;
  return n;
}

//===----------------------------------------------------------------------===//
// Bundle validation
//===----------------------------------------------------------------------===//

namespace {

class StageValidator {
public:
  StageValidator(const Bundle &bundle, unsigned stage)
      : bundle(bundle), stage(stage), program(bundle.stages[stage]) {}

  std::string run();

private:
  const ValueSpec &spec(int id) const { return program.values[id]; }
  std::string where(const char *section, size_t index, const Op &op) const {
    return "stage " + std::to_string(stage) + ": " + section + " op " +
           std::to_string(index) + " (" + opKindName(op.kind) + ")";
  }
  std::string checkOp(const char *section, size_t index, const Op &op,
                      std::set<int> &defined, bool recompute);
  std::string checkShapes(const Op &op);
  const ParamSpec *findParam(const std::string &name) const {
    for (const ParamSpec &param : bundle.params)
      if (param.name == name)
        return &param;
    return nullptr;
  }

  const Bundle &bundle;
  unsigned stage;
  const StageProgram &program;
  /// The forward op defining each forward value.
  std::unordered_map<int, const Op *> producer;
};

} // namespace

std::string StageValidator::checkShapes(const Op &op) {
  auto ops = [&](size_t i) -> const ValueSpec & {
    return spec(op.operands[i]);
  };
  auto res = [&](size_t i) -> const ValueSpec * {
    return op.results[i] < 0 ? nullptr : &spec(op.results[i]);
  };
  auto expectType = [&](const ValueSpec &value, ElementType type,
                        const char *what) -> std::string {
    if (value.type != type)
      return std::string("expects ") + what + " of type " + typeName(type) +
             ", got " + typeName(value.type);
    return {};
  };
  auto expectShape = [&](const ValueSpec &value,
                         const std::vector<int64_t> &shape, bool batched,
                         const char *what) -> std::string {
    if (value.shape != shape)
      return std::string("expects ") + what + " of shape " +
             shapeString(shape) + ", got " + shapeString(value.shape);
    if (value.batched != batched)
      return std::string("expects ") + what + " to be " +
             (batched ? "batched" : "not batched");
    return {};
  };
  auto expectLike = [&](const ValueSpec &value, const ValueSpec &like,
                        const char *what) -> std::string {
    return expectShape(value, like.shape, like.batched, what);
  };
  auto lastDimRank = [&](const ValueSpec &value,
                         const char *what) -> std::string {
    if (value.shape.empty() || (value.batched && value.shape.size() < 2))
      return std::string("expects ") + what +
             " with a feature dimension after the batch, got shape " +
             shapeString(value.shape);
    return {};
  };
  auto withLast = [](std::vector<int64_t> shape, int64_t last) {
    shape.back() = last;
    return shape;
  };
  auto isScalarLoss = [&](const ValueSpec &value) -> std::string {
    if (value.batched || product(value.shape) != 1 || value.shape.size() > 1)
      return "expects a scalar loss (shape [] not batched), got shape " +
             shapeString(value.shape) + (value.batched ? " batched" : "");
    return expectType(value, ElementType::F32, "the loss");
  };
  // Every operand and result is f32 but the ids and labels checked below.
  auto f32Except = [&](std::vector<size_t> intOperands) -> std::string {
    for (size_t i = 0; i < op.operands.size(); ++i) {
      bool isInt = std::find(intOperands.begin(), intOperands.end(), i) !=
                   intOperands.end();
      if (ops(i).type != (isInt ? ElementType::I32 : ElementType::F32))
        return "expects operand " + std::to_string(i) + " of type " +
               (isInt ? "i32" : "f32") + ", got " + typeName(ops(i).type);
    }
    for (size_t i = 0; i < op.results.size(); ++i)
      if (res(i) && res(i)->type != ElementType::F32)
        return "expects result " + std::to_string(i) + " of type f32, got " +
               typeName(res(i)->type);
    return {};
  };

  std::string error;
#define CHECK(expr)                                                            \
  if (!(error = (expr)).empty())                                               \
    return error;

  switch (op.kind) {
  case OpKind::Param: {
    const ParamSpec *param = findParam(op.name);
    if (!param)
      return "names unknown parameter '" + op.name + "'";
    if (param->stage != stage)
      return "names parameter '" + op.name + "' of stage " +
             std::to_string(param->stage);
    CHECK(expectShape(*res(0), param->shape, false, "the result"));
    CHECK(f32Except({}));
    return {};
  }
  case OpKind::Dense: {
    CHECK(f32Except({}));
    const ValueSpec &x = ops(0), &w = ops(1), &y = *res(0);
    CHECK(lastDimRank(x, "an input"));
    if (w.shape.size() != 2 || w.batched)
      return "expects a weight of rank 2, got shape " + shapeString(w.shape);
    CHECK(expectShape(x, withLast(x.shape, w.shape[0]), x.batched, "an input"));
    if (op.operands.size() == 3)
      CHECK(expectShape(ops(2), {w.shape[1]}, false, "a bias"));
    CHECK(
        expectShape(y, withLast(x.shape, w.shape[1]), x.batched, "the result"));
    return {};
  }
  case OpKind::Relu:
  case OpKind::Gelu:
  case OpKind::Tanh:
    CHECK(f32Except({}));
    return expectLike(*res(0), ops(0), "the result");
  case OpKind::Softmax:
  case OpKind::Dropout:
    CHECK(f32Except({}));
    CHECK(lastDimRank(ops(0), "an input"));
    if (op.kind == OpKind::Dropout && !(op.rate >= 0.0f && op.rate < 1.0f))
      return "expects a rate in [0, 1), got " + std::to_string(op.rate);
    return expectLike(*res(0), ops(0), "the result");
  case OpKind::LayerNorm: {
    CHECK(f32Except({}));
    CHECK(lastDimRank(ops(0), "an input"));
    int64_t cols = ops(0).shape.back();
    CHECK(expectShape(ops(1), {cols}, false, "gamma"));
    CHECK(expectShape(ops(2), {cols}, false, "beta"));
    return expectLike(*res(0), ops(0), "the result");
  }
  case OpKind::Add:
  case OpKind::AddGrads:
    CHECK(f32Except({}));
    CHECK(expectLike(ops(1), ops(0), "operand 1"));
    return expectLike(*res(0), ops(0), "the result");
  case OpKind::Embedding: {
    CHECK(f32Except({0}));
    const ValueSpec &table = ops(1);
    if (table.shape.size() != 2 || table.batched)
      return "expects a table of rank 2, got shape " + shapeString(table.shape);
    std::vector<int64_t> shape = ops(0).shape;
    shape.push_back(table.shape[1]);
    return expectShape(*res(0), shape, ops(0).batched, "the result");
  }
  case OpKind::Attention:
  case OpKind::AttentionGrad: {
    bool grad = op.kind == OpKind::AttentionGrad;
    CHECK(f32Except({}));
    const ValueSpec &x = ops(grad ? 2 : 0);
    if (x.shape.size() != 3 || !x.batched)
      return "expects a batched input [batch, seq, width], got shape " +
             shapeString(x.shape);
    int64_t width = x.shape[2];
    if (op.heads < 1 || width % op.heads != 0)
      return "expects heads dividing the width " + std::to_string(width) +
             ", got " + std::to_string(op.heads);
    CHECK(expectShape(ops(grad ? 3 : 1), {width, 3 * width}, false, "wqkv"));
    CHECK(expectShape(ops(grad ? 4 : 2), {width, width}, false, "wo"));
    if (!grad)
      return expectLike(*res(0), x, "the result");
    CHECK(expectLike(ops(0), x, "dy"));
    if (res(0))
      CHECK(expectLike(*res(0), x, "dx"));
    CHECK(expectLike(*res(1), ops(3), "dwqkv"));
    return expectLike(*res(2), ops(4), "dwo");
  }
  case OpKind::SoftmaxCrossEntropy:
  case OpKind::SoftmaxCrossEntropyGrad: {
    bool grad = op.kind == OpKind::SoftmaxCrossEntropyGrad;
    CHECK(f32Except({1}));
    if (!grad) {
      CHECK(lastDimRank(ops(0), "logits"));
      std::vector<int64_t> labels(ops(0).shape.begin(), ops(0).shape.end() - 1);
      CHECK(expectShape(ops(1), labels, ops(0).batched, "labels"));
      return isScalarLoss(*res(0));
    }
    const ValueSpec &logits = spec(producer.at(op.operands[0])->operands[0]);
    CHECK(expectLike(ops(1), spec(producer.at(op.operands[0])->operands[1]),
                     "labels"));
    return expectLike(*res(0), logits, "the result");
  }
  case OpKind::MseLoss:
    CHECK(f32Except({}));
    CHECK(expectLike(ops(1), ops(0), "a target"));
    return isScalarLoss(*res(0));
  case OpKind::MseLossGrad:
    CHECK(f32Except({}));
    CHECK(expectLike(ops(1), ops(0), "a target"));
    return expectLike(*res(0), ops(0), "the result");
  case OpKind::DenseGrad: {
    CHECK(f32Except({}));
    const ValueSpec &dy = ops(0), &x = ops(1), &w = ops(2);
    CHECK(lastDimRank(x, "an input"));
    if (w.shape.size() != 2 || w.batched)
      return "expects a weight of rank 2, got shape " + shapeString(w.shape);
    CHECK(expectShape(x, withLast(x.shape, w.shape[0]), x.batched, "an input"));
    CHECK(expectShape(dy, withLast(x.shape, w.shape[1]), x.batched, "dy"));
    if (res(0))
      CHECK(expectLike(*res(0), x, "dx"));
    return expectLike(*res(1), w, "dw");
  }
  case OpKind::BiasGrad:
    CHECK(f32Except({}));
    CHECK(lastDimRank(ops(0), "dy"));
    return expectShape(*res(0), {ops(0).shape.back()}, false, "the result");
  case OpKind::ReluGrad:
  case OpKind::GeluGrad:
  case OpKind::TanhGrad:
  case OpKind::DropoutGrad:
  case OpKind::SoftmaxGrad:
    CHECK(f32Except({}));
    CHECK(expectLike(ops(1), ops(0), "operand 1"));
    return expectLike(*res(0), ops(0), "the result");
  case OpKind::LayerNormGrad: {
    CHECK(f32Except({}));
    const ValueSpec &x = ops(2);
    CHECK(lastDimRank(x, "an input"));
    CHECK(expectLike(ops(0), x, "dy"));
    CHECK(expectLike(ops(1), x, "the forward result"));
    CHECK(expectShape(ops(3), {x.shape.back()}, false, "gamma"));
    if (res(0))
      CHECK(expectLike(*res(0), x, "dx"));
    CHECK(expectLike(*res(1), ops(3), "dgamma"));
    return expectLike(*res(2), ops(3), "dbeta");
  }
  case OpKind::EmbeddingGrad: {
    CHECK(f32Except({1}));
    const ValueSpec &table = *res(0);
    if (table.shape.size() != 2 || table.batched)
      return "expects a table gradient of rank 2, got shape " +
             shapeString(table.shape);
    std::vector<int64_t> shape = ops(1).shape;
    shape.push_back(table.shape[1]);
    return expectShape(ops(0), shape, ops(1).batched, "dy");
  }
  case OpKind::AccumulateGrad: {
    const ParamSpec *param = findParam(op.name);
    if (!param)
      return "names unknown parameter '" + op.name + "'";
    if (param->stage != stage)
      return "names parameter '" + op.name + "' of stage " +
             std::to_string(param->stage);
    CHECK(f32Except({}));
    return expectShape(ops(0), param->shape, false, "a gradient");
  }
  case OpKind::Zeros:
    return f32Except({});
  }
#undef CHECK
  return "unknown op kind";
}

std::string StageValidator::checkOp(const char *section, size_t index,
                                    const Op &op, std::set<int> &defined,
                                    bool recompute) {
  const int numValues = static_cast<int>(program.values.size());
  const OpInfo &arity = opInfo(op.kind);
  auto fail = [&](const std::string &message) {
    return where(section, index, op) + ": " + message;
  };
  if (op.operands.size() < arity.minOperands ||
      op.operands.size() > arity.maxOperands) {
    std::string expected = std::to_string(arity.minOperands);
    if (arity.maxOperands != arity.minOperands)
      expected += " or " + std::to_string(arity.maxOperands);
    return fail("expects " + expected + " operand" +
                (arity.maxOperands == 1 ? "" : "s") + ", got " +
                std::to_string(op.operands.size()));
  }
  if (op.results.size() != arity.results)
    return fail("expects " + std::to_string(arity.results) + " result" +
                (arity.results == 1 ? "" : "s") + ", got " +
                std::to_string(op.results.size()));
  if (std::string(section) != "backward" && arity.has(GradientOp))
    return fail("is a gradient op, not allowed in the " + std::string(section) +
                " program");
  for (size_t i = 0; i < op.operands.size(); ++i) {
    int id = op.operands[i];
    if (id < 0 || id >= numValues)
      return fail("operand " + std::to_string(i) + " is value " +
                  std::to_string(id) + ", outside [0, " +
                  std::to_string(numValues) + ")");
    if (!defined.count(id))
      return fail("operand " + std::to_string(i) + " (value " +
                  std::to_string(id) + ") is not available there");
  }
  for (size_t i = 0; i < op.results.size(); ++i) {
    int id = op.results[i];
    if (id == -1 && i == 0 && arity.has(DropsFirstResult))
      continue;
    if (id < 0 || id >= numValues)
      return fail("result " + std::to_string(i) + " is value " +
                  std::to_string(id) + ", outside [0, " +
                  std::to_string(numValues) + ")");
  }
  OpKind producerKind = arity.producer;
  int savedOperand = arity.stateOperand;
  if (savedOperand >= 0) {
    auto it = producer.find(op.operands[savedOperand]);
    if (it == producer.end() || it->second->kind != producerKind)
      return fail("operand " + std::to_string(savedOperand) +
                  " must be the result of a " + opKindName(producerKind) + " op");
    const Op &forward = *it->second;
    if (op.kind == OpKind::DropoutGrad && forward.rate != op.rate)
      return fail("rate " + std::to_string(op.rate) +
                  " differs from the forward's " +
                  std::to_string(forward.rate));
    if (op.kind == OpKind::AttentionGrad &&
        (forward.heads != op.heads || forward.causal != op.causal))
      return fail("heads/causal differ from the forward's");
  }
  std::string error = checkShapes(op);
  if (!error.empty())
    return fail(error);
  for (int id : op.results) {
    if (id < 0)
      continue;
    if (recompute) {
      auto it = producer.find(id);
      if (it == producer.end() || it->second->kind != op.kind)
        return fail("redefines value " + std::to_string(id) +
                    ", which no forward " + opKindName(op.kind) + " op defines");
    } else if (producer.count(id) || defined.count(id)) {
      return fail("defines value " + std::to_string(id) + " again");
    }
    if (defined.count(id))
      return fail("defines value " + std::to_string(id) + " again");
    defined.insert(id);
    if (std::string(section) == "forward")
      producer[id] = &op;
  }
  return {};
}

std::string StageValidator::run() {
  const unsigned numStages = bundle.stages.size();
  const bool last = stage + 1 == numStages;
  const int numValues = static_cast<int>(program.values.size());
  std::string prefix = "stage " + std::to_string(stage) + ": ";
  auto inRange = [&](int id) { return id >= 0 && id < numValues; };

  for (int id = 0; id < numValues; ++id) {
    const ValueSpec &value = program.values[id];
    for (int64_t dim : value.shape)
      if (dim < 1)
        return prefix + "value " + std::to_string(id) + " has shape " +
               shapeString(value.shape) + "; every dimension must be >= 1";
    if (value.batched &&
        (value.shape.empty() || value.shape[0] != bundle.batch))
      return prefix + "batched value " + std::to_string(id) + " has shape " +
             shapeString(value.shape) + "; expected the batch " +
             std::to_string(bundle.batch) + " as dimension 0";
  }

  // Stage inputs.
  std::set<int> inputs;
  std::vector<int> channelValue;
  for (const StageInput &input : program.inputs) {
    if (!inRange(input.value))
      return prefix + "input value " + std::to_string(input.value) +
             " is outside [0, " + std::to_string(numValues) + ")";
    if (!inputs.insert(input.value).second)
      return prefix + "value " + std::to_string(input.value) +
             " is bound to two inputs";
    const ValueSpec &value = program.values[input.value];
    if (input.fromChannel) {
      if (stage == 0)
        return prefix + "stage 0 has no previous stage to receive channel " +
               std::to_string(input.channel) + " from";
      if (input.channel >= channelValue.size())
        channelValue.resize(input.channel + 1, -1);
      if (channelValue[input.channel] != -1)
        return prefix + "channel " + std::to_string(input.channel) +
               " is bound to two inputs";
      channelValue[input.channel] = input.value;
      continue;
    }
    auto it = std::find_if(bundle.inputs.begin(), bundle.inputs.end(),
                           [&](const ModelInputSpec &spec) {
                             return spec.name == input.inputName;
                           });
    if (it == bundle.inputs.end())
      return prefix + "input value " + std::to_string(input.value) +
             " reads unknown model input '" + input.inputName + "'";
    if (value.shape != it->shape || value.type != it->type || !value.batched)
      return prefix + "input value " + std::to_string(input.value) + " has " +
             typeName(value.type) + " shape " + shapeString(value.shape) +
             ", but model input '" + it->name + "' is batched " +
             typeName(it->type) + " " + shapeString(it->shape);
  }
  for (size_t c = 0; c < channelValue.size(); ++c)
    if (channelValue[c] == -1)
      return prefix + "channel " + std::to_string(c) + " has no input value";
  if (stage > 0) {
    const StageProgram &previous = bundle.stages[stage - 1];
    if (channelValue.size() != previous.outputs.size())
      return prefix + "receives " + std::to_string(channelValue.size()) +
             " channels, but stage " + std::to_string(stage - 1) + " sends " +
             std::to_string(previous.outputs.size());
    for (size_t c = 0; c < channelValue.size(); ++c) {
      int sent = previous.outputs[c];
      if (sent < 0 || sent >= static_cast<int>(previous.values.size()))
        continue; // reported by the previous stage
      const ValueSpec &a = previous.values[sent];
      const ValueSpec &b = program.values[channelValue[c]];
      if (a.shape != b.shape || a.type != b.type || a.batched != b.batched)
        return prefix + "channel " + std::to_string(c) + " receives " +
               typeName(b.type) + " " + shapeString(b.shape) + ", but stage " +
               std::to_string(stage - 1) + " sends " + typeName(a.type) + " " +
               shapeString(a.shape);
    }
  }
  for (int id : channelValue) {
    const ValueSpec &value = program.values[id];
    if (value.type != ElementType::F32 || !value.batched)
      return prefix + "channel value " + std::to_string(id) +
             " must be a batched f32 tensor";
  }

  // Forward.
  std::set<int> defined = inputs;
  for (size_t i = 0; i < program.forward.size(); ++i) {
    std::string error =
        checkOp("forward", i, program.forward[i], defined, false);
    if (!error.empty())
      return error;
  }
  const std::set<int> forwardDefined = defined;

  // Outputs and loss.
  if (last) {
    if (!program.outputs.empty() || !program.outputGrads.empty())
      return prefix + "the last stage has no outputs, got " +
             std::to_string(program.outputs.size());
    if (!inRange(program.loss) || !producer.count(program.loss) ||
        (producer[program.loss]->kind != OpKind::SoftmaxCrossEntropy &&
         producer[program.loss]->kind != OpKind::MseLoss))
      return prefix + "the last stage's loss (value " +
             std::to_string(program.loss) +
             ") must be the result of a forward loss op";
  } else {
    if (program.loss != -1)
      return prefix + "only the last stage has a loss, got value " +
             std::to_string(program.loss);
    if (program.outputs.empty())
      return prefix + "expects at least one output to stage " +
             std::to_string(stage + 1);
    for (size_t c = 0; c < program.outputs.size(); ++c)
      if (!forwardDefined.count(program.outputs[c]))
        return prefix + "output " + std::to_string(c) + " (value " +
               std::to_string(program.outputs[c]) +
               ") is not defined by the forward";
    if (program.outputGrads.size() != program.outputs.size())
      return prefix + "expects " + std::to_string(program.outputs.size()) +
             " output gradients, got " +
             std::to_string(program.outputGrads.size());
  }

  // Recompute.
  std::set<int> recomputed = inputs;
  for (size_t i = 0; i < program.recompute.size(); ++i) {
    std::string error =
        checkOp("recompute", i, program.recompute[i], recomputed, true);
    if (!error.empty())
      return error;
  }

  // Backward: under full and except-last remat it must also run on the
  // recomputed values alone.
  std::set<int> available =
      bundle.remat == RematPolicy::None ? forwardDefined : recomputed;
  for (size_t c = 0; c < program.outputGrads.size(); ++c) {
    int id = program.outputGrads[c];
    if (!inRange(id) || forwardDefined.count(id) || available.count(id))
      return prefix + "output gradient " + std::to_string(c) + " (value " +
             std::to_string(id) + ") must be a fresh value";
    const ValueSpec &grad = program.values[id];
    const ValueSpec &out = program.values[program.outputs[c]];
    if (grad.shape != out.shape || grad.type != ElementType::F32 ||
        !grad.batched)
      return prefix + "output gradient " + std::to_string(c) +
             " must be a batched f32 " + shapeString(out.shape) + ", got " +
             typeName(grad.type) + " " + shapeString(grad.shape);
    available.insert(id);
  }
  std::set<int> backwardDefined;
  for (size_t i = 0; i < program.backward.size(); ++i) {
    const Op &op = program.backward[i];
    for (int id : op.results)
      if (id >= 0 && (forwardDefined.count(id) || available.count(id)))
        return where("backward", i, op) + ": defines value " +
               std::to_string(id) + " again";
    std::string error = checkOp("backward", i, op, available, false);
    if (!error.empty())
      return error;
  }
  if (stage == 0) {
    if (!program.inputGrads.empty())
      return prefix + "stage 0 sends no input gradients, got " +
             std::to_string(program.inputGrads.size());
  } else {
    if (program.inputGrads.size() != channelValue.size())
      return prefix + "expects " + std::to_string(channelValue.size()) +
             " input gradients (one per channel), got " +
             std::to_string(program.inputGrads.size());
    for (size_t c = 0; c < channelValue.size(); ++c) {
      int id = program.inputGrads[c];
      if (!inRange(id) || !available.count(id) || forwardDefined.count(id))
        return prefix + "input gradient " + std::to_string(c) + " (value " +
               std::to_string(id) + ") is not a gradient the backward defines";
      const ValueSpec &grad = program.values[id];
      const ValueSpec &in = program.values[channelValue[c]];
      if (grad.shape != in.shape || grad.type != ElementType::F32 ||
          !grad.batched)
        return prefix + "input gradient " + std::to_string(c) +
               " must be a batched f32 " + shapeString(in.shape) + ", got " +
               typeName(grad.type) + " " + shapeString(grad.shape);
    }
  }
  return {};
}

static std::string validateProgram(const Bundle &bundle, unsigned device) {
  const std::vector<Instr> &program = bundle.programs[device];
  const StageProgram &stage = bundle.stages[device];
  const unsigned numStages = bundle.stages.size();
  const unsigned numMicrobatches = bundle.microbatchRows.size();
  size_t numChannels = 0;
  for (const StageInput &input : stage.inputs)
    numChannels += input.fromChannel;
  std::vector<int> forwards(numMicrobatches), backwards(numMicrobatches);
  unsigned optimizerSteps = 0;
  for (size_t i = 0; i < program.size(); ++i) {
    const Instr &instr = program[i];
    std::string prefix = "device " + std::to_string(device) + ": op #" +
                         std::to_string(i) + " (" +
                         describeInstruction(instr, device) + "): ";
    if (instr.kind == InstrKind::OptimizerStep) {
      if (++optimizerSteps > 1)
        return prefix + "expects exactly one optimizer step per device";
      if (i + 1 != program.size())
        return prefix + "the optimizer step must be the last instruction";
      continue;
    }
    if (instr.microbatch >= numMicrobatches)
      return prefix + "micro-batch " + std::to_string(instr.microbatch) +
             " is outside [0, " + std::to_string(numMicrobatches) + ")";
    auto expectPeer = [&](int peer) -> std::string {
      if (peer < 0 || peer >= static_cast<int>(numStages))
        return prefix + "device " + std::to_string(device) +
               " has no neighbour in that direction";
      if (instr.peer != static_cast<unsigned>(peer))
        return prefix + "expects peer device " + std::to_string(peer) +
               ", got " + std::to_string(instr.peer);
      return {};
    };
    auto expectChannel = [&](size_t count) -> std::string {
      if (instr.channel >= count)
        return prefix + "channel " + std::to_string(instr.channel) +
               " is outside [0, " + std::to_string(count) + ")";
      return {};
    };
    std::string error;
    switch (instr.kind) {
    case InstrKind::LoadInput: {
      bool found = false;
      for (const StageInput &input : stage.inputs)
        found |= !input.fromChannel && input.inputName == instr.inputName;
      if (!found)
        return prefix + "stage " + std::to_string(device) +
               " reads no model input '" + instr.inputName + "'";
      break;
    }
    case InstrKind::Forward:
    case InstrKind::Backward: {
      if (instr.stage != device)
        return prefix + "device " + std::to_string(device) + " runs stage " +
               std::to_string(device) + ", got stage " +
               std::to_string(instr.stage);
      bool forward = instr.kind == InstrKind::Forward;
      int &count = (forward ? forwards : backwards)[instr.microbatch];
      if (++count > 1)
        return prefix + "runs twice";
      if (!forward && forwards[instr.microbatch] == 0)
        return prefix + "comes before the forward of its micro-batch";
      break;
    }
    case InstrKind::SendActivation:
      if ((error = expectPeer(int(device) + 1)).empty())
        error = expectChannel(stage.outputs.size());
      break;
    case InstrKind::RecvActivation:
      if ((error = expectPeer(int(device) - 1)).empty())
        error = expectChannel(numChannels);
      break;
    case InstrKind::SendGradient:
      if ((error = expectPeer(int(device) - 1)).empty())
        error = expectChannel(stage.inputGrads.size());
      break;
    case InstrKind::RecvGradient:
      if ((error = expectPeer(int(device) + 1)).empty())
        error = expectChannel(stage.outputGrads.size());
      break;
    case InstrKind::OptimizerStep:
      break;
    }
    if (!error.empty())
      return error;
  }
  std::string prefix = "device " + std::to_string(device) + ": ";
  for (unsigned m = 0; m < numMicrobatches; ++m)
    if (forwards[m] != 1 || backwards[m] != 1)
      return prefix + "micro-batch " + std::to_string(m) +
             " needs one forward and one backward, got " +
             std::to_string(forwards[m]) + " and " +
             std::to_string(backwards[m]);
  if (optimizerSteps != 1)
    return prefix + "expects exactly one optimizer step, got none";
  return {};
}

std::string gpipe::runtime::validateBundle(const Bundle &bundle) {
  if (bundle.batch < 1)
    return "expects a batch of at least 1 row, got " +
           std::to_string(bundle.batch);
  if (bundle.microbatchRows.empty())
    return "expects at least 1 micro-batch, got 0";
  int64_t total = 0;
  for (size_t m = 0; m < bundle.microbatchRows.size(); ++m) {
    if (bundle.microbatchRows[m] < 1)
      return "micro-batch " + std::to_string(m) + " has " +
             std::to_string(bundle.microbatchRows[m]) +
             " rows; expected at least 1";
    total += bundle.microbatchRows[m];
  }
  if (total != bundle.batch)
    return "micro-batch rows sum to " + std::to_string(total) +
           ", expected the batch " + std::to_string(bundle.batch);
  if (bundle.stages.empty())
    return "expects at least one stage, got 0";
  if (bundle.programs.size() != bundle.stages.size())
    return "expects one program per stage (" +
           std::to_string(bundle.stages.size()) + "), got " +
           std::to_string(bundle.programs.size());
  std::set<std::string> names;
  for (const ModelInputSpec &input : bundle.inputs) {
    if (!names.insert(input.name).second)
      return "model input '" + input.name + "' is declared twice";
    if (input.shape.empty() || input.shape[0] != bundle.batch)
      return "model input '" + input.name + "' has shape " +
             shapeString(input.shape) + "; expected the batch " +
             std::to_string(bundle.batch) + " as dimension 0";
    for (int64_t dim : input.shape)
      if (dim < 1)
        return "model input '" + input.name + "' has shape " +
               shapeString(input.shape) + "; every dimension must be >= 1";
  }
  names.clear();
  for (const ParamSpec &param : bundle.params) {
    if (param.name.empty())
      return "a parameter has an empty name";
    if (!names.insert(param.name).second)
      return "parameter '" + param.name + "' is declared twice";
    if (param.stage >= bundle.stages.size())
      return "parameter '" + param.name + "' is on stage " +
             std::to_string(param.stage) + ", outside [0, " +
             std::to_string(bundle.stages.size()) + ")";
    for (int64_t dim : param.shape)
      if (dim < 1)
        return "parameter '" + param.name + "' has shape " +
               shapeString(param.shape) + "; every dimension must be >= 1";
  }
  for (unsigned s = 0; s < bundle.stages.size(); ++s) {
    std::string error = StageValidator(bundle, s).run();
    if (!error.empty())
      return error;
  }
  for (unsigned d = 0; d < bundle.programs.size(); ++d) {
    std::string error = validateProgram(bundle, d);
    if (!error.empty())
      return error;
  }
  for (unsigned d = 0; d < bundle.memoryPlan.devices.size(); ++d) {
    std::string error = verifyPlacement(bundle.memoryPlan.devices[d], d);
    if (!error.empty())
      return error;
  }
  return verifySchedule(bundle);
}

//===----------------------------------------------------------------------===//
// Tensors and memory accounting
//===----------------------------------------------------------------------===//

namespace {

/// A value of one micro-batch, with the state its op saves for the backward.
struct Tensor {
  std::vector<int64_t> shape;
  ElementType type = ElementType::F32;
  std::vector<float> f;
  std::vector<int32_t> i;
  /// Param values: the parameter's storage (not owned, not counted).
  const float *view = nullptr;
  /// Layer norm: mean, rstd. Attention: qkv, probs, context. Softmax
  /// cross-entropy: probs.
  std::vector<float> saved[3];
  /// Dropout.
  std::vector<uint8_t> mask;

  int64_t numElements() const { return product(shape); }
  const float *data() const { return view ? view : f.data(); }
  int64_t bytes() const {
    int64_t n = int64_t(f.size() + i.size()) * 4 + int64_t(mask.size());
    for (const auto &buffer : saved)
      n += int64_t(buffer.size()) * 4;
    return n;
  }
};

/// The bytes a device holds, and their high-water mark.
struct MemoryCounter {
  int64_t current = 0;
  int64_t peak = 0;
  void add(int64_t bytes) {
    current += bytes;
    peak = std::max(peak, current);
  }
  void sub(int64_t bytes) { current -= bytes; }
};

/// The values of one stage for one micro-batch; every put/take is counted.
class ValueStore {
public:
  void reset(size_t numValues, MemoryCounter *counter) {
    clear();
    slots.clear();
    slots.resize(numValues);
    memory = counter;
  }
  Tensor *get(int id) const {
    return id >= 0 && size_t(id) < slots.size() ? slots[id].get() : nullptr;
  }
  void put(int id, std::unique_ptr<Tensor> tensor) {
    erase(id);
    memory->add(tensor->bytes());
    slots[id] = std::move(tensor);
  }
  std::unique_ptr<Tensor> take(int id) {
    std::unique_ptr<Tensor> tensor = std::move(slots[id]);
    if (tensor)
      memory->sub(tensor->bytes());
    return tensor;
  }
  void erase(int id) { take(id); }
  void clear() {
    for (size_t id = 0; id < slots.size(); ++id)
      erase(int(id));
  }
  /// Frees every value for which `keep(id)` is false.
  template <typename Keep> void retainOnly(Keep keep) {
    for (size_t id = 0; id < slots.size(); ++id)
      if (slots[id] && !keep(int(id)))
        erase(int(id));
  }

private:
  std::vector<std::unique_ptr<Tensor>> slots;
  MemoryCounter *memory = nullptr;
};

struct Parameter {
  ParamSpec spec;
  unsigned device = 0;
  std::vector<float> value;
  std::vector<float> grad;
  std::vector<std::vector<float>> slots;
};

/// Everything an op needs beyond its operands.
struct OpEnv {
  const StageProgram &program;
  ValueStore &values;
  const std::unordered_map<std::string, Parameter *> &params;
  MemoryCounter &memory;
  int64_t rows;      ///< batch rows of this micro-batch
  int64_t rowOffset; ///< of its first row in the batch
  uint64_t step;     ///< dropout's step number
  bool training;     ///< false: dropout is the identity
  float lossScale;   ///< rows / N
  /// Backward only: per op, per result, the parameter whose gradient that
  /// result accumulates into directly (null: a value of its own); and the
  /// AccumulateGrad ops made redundant by it.
  const std::vector<std::vector<Parameter *>> *fusedInto = nullptr;
  const std::vector<char> *skip = nullptr;
  /// Per op of the list being run: the values to free after it (their last
  /// use, and nothing later on this device needs them).
  const std::vector<std::vector<int>> *freeAfter = nullptr;
};

/// Sizes the state `op` saves with its result for the backward, so that the
/// result's bytes are counted before its kernel runs.
void allocateSavedState(const Op &op, const std::vector<const Tensor *> &in,
                        Tensor &result) {
  if (in.empty())
    return;
  SavedState state =
      savedStateOf(op.kind, in[0]->shape.data(), in[0]->shape.size(), op.heads);
  if (op.kind == OpKind::Dropout) {
    result.mask.assign(state.bytes[0], 0);
    return;
  }
  for (unsigned k = 0; k < state.count; ++k)
    result.saved[k].assign(state.bytes[k] / int64_t(sizeof(float)), 0.0f);
}

std::unique_ptr<Tensor> allocate(const ValueSpec &spec, int64_t rows) {
  auto tensor = std::make_unique<Tensor>();
  tensor->shape = spec.shape;
  if (spec.batched)
    tensor->shape[0] = rows;
  tensor->type = spec.type;
  if (spec.type == ElementType::F32)
    tensor->f.assign(product(tensor->shape), 0.0f);
  else
    tensor->i.assign(product(tensor->shape), 0);
  return tensor;
}

/// Runs op `index` of a stage program; returns "" or what went wrong.
std::string runOp(OpEnv &env, const Op &op, size_t index) {
  std::vector<const Tensor *> in(op.operands.size());
  for (size_t k = 0; k < op.operands.size(); ++k) {
    in[k] = env.values.get(op.operands[k]);
    if (!in[k])
      return "operand " + std::to_string(k) + " (value " +
             std::to_string(op.operands[k]) +
             ") is not available (never defined, received or loaded, or "
             "already freed)";
  }
  // Results (with their saved state) are allocated and counted before the
  // kernel runs, as a static arena would hold them.
  std::vector<Tensor *> out(op.results.size(), nullptr);
  std::vector<float *> direct(op.results.size(), nullptr);
  for (size_t k = 0; k < op.results.size(); ++k) {
    Parameter *target = env.fusedInto ? (*env.fusedInto)[index][k] : nullptr;
    std::unique_ptr<Tensor> result;
    if (target) {
      direct[k] = target->grad.data(); // kernels accumulate into it
    } else if (op.kind == OpKind::Param) {
      result = std::make_unique<Tensor>(); // a view, set below
      result->shape = env.program.values[op.results[k]].shape;
    } else if (op.results[k] >= 0) {
      result = allocate(env.program.values[op.results[k]], env.rows);
      if (k == 0)
        allocateSavedState(op, in, *result);
    }
    if (result) {
      out[k] = result.get();
      env.values.put(op.results[k], std::move(result));
    }
  }
  auto y = [&](size_t k) -> float * {
    return direct[k] ? direct[k] : out[k] ? out[k]->f.data() : nullptr;
  };
  auto rowsOf = [](const Tensor *t) {
    return t->shape.empty() ? 1 : t->numElements() / t->shape.back();
  };
  auto colsOf = [](const Tensor *t) {
    return t->shape.empty() ? 1 : t->shape.back();
  };

  switch (op.kind) {
  case OpKind::Param: {
    auto it = env.params.find(op.name);
    if (it == env.params.end())
      return "unknown parameter '" + op.name + "'";
    out[0]->view = it->second->value.data();
    break;
  }
  case OpKind::Dense: {
    int64_t inDim = in[1]->shape[0], outDim = in[1]->shape[1];
    cpu::denseForward(in[0]->data(), in[1]->data(),
                      in.size() == 3 ? in[2]->data() : nullptr, y(0),
                      in[0]->numElements() / inDim, inDim, outDim);
    break;
  }
  case OpKind::Relu:
    cpu::reluForward(in[0]->data(), y(0), in[0]->numElements());
    break;
  case OpKind::Gelu:
    cpu::geluForward(in[0]->data(), y(0), in[0]->numElements());
    break;
  case OpKind::Tanh:
    cpu::tanhForward(in[0]->data(), y(0), in[0]->numElements());
    break;
  case OpKind::Softmax:
    cpu::softmaxForward(in[0]->data(), y(0), rowsOf(in[0]), colsOf(in[0]));
    break;
  case OpKind::LayerNorm: {
    int64_t rows = rowsOf(in[0]);
    cpu::layerNormForward(in[0]->data(), in[1]->data(), in[2]->data(), y(0),
                          out[0]->saved[0].data(), out[0]->saved[1].data(),
                          rows, colsOf(in[0]), op.epsilon);
    break;
  }
  case OpKind::Add:
  case OpKind::AddGrads:
    cpu::addForward(in[0]->data(), in[1]->data(), y(0), in[0]->numElements());
    break;
  case OpKind::Embedding: {
    int64_t vocab = in[1]->shape[0], width = in[1]->shape[1];
    int64_t bad = cpu::embeddingForward(in[0]->i.data(), in[1]->data(), y(0),
                                        in[0]->numElements(), vocab, width);
    if (bad >= 0)
      return "embedding id " + std::to_string(in[0]->i[bad]) + " outside [0, " +
             std::to_string(vocab) + ") at position " + std::to_string(bad) +
             " of the micro-batch";
    break;
  }
  case OpKind::Attention: {
    int64_t b = in[0]->shape[0], s = in[0]->shape[1], d = in[0]->shape[2];
    Tensor &t = *out[0];
    cpu::attentionForward(in[0]->data(), in[1]->data(), in[2]->data(), y(0),
                          t.saved[0].data(), t.saved[1].data(),
                          t.saved[2].data(), b, s, d, op.heads, op.causal);
    break;
  }
  case OpKind::Dropout: {
    int64_t rows = rowsOf(in[0]);
    // The kernel's rows are all dimensions but the last: scale the batch
    // row offset by the rows of one example.
    int64_t perExample = env.program.values[op.operands[0]].batched &&
                                 !in[0]->shape.empty() && in[0]->shape[0] > 0
                             ? rows / in[0]->shape[0]
                             : 0;
    cpu::dropoutForward(in[0]->data(), y(0), out[0]->mask.data(), rows,
                        colsOf(in[0]), env.training ? op.rate : 0.0f, op.seed,
                        env.step, env.rowOffset * perExample);
    break;
  }
  case OpKind::SoftmaxCrossEntropy: {
    int64_t classes = colsOf(in[0]), rows = rowsOf(in[0]);
    int64_t bad = -1;
    float loss = cpu::softmaxCrossEntropyForward(in[0]->data(), in[1]->i.data(),
                                                 out[0]->saved[0].data(), rows,
                                                 classes, &bad);
    if (bad >= 0)
      return "label " + std::to_string(in[1]->i[bad]) + " outside [0, " +
             std::to_string(classes) + ") at position " + std::to_string(bad) +
             " of the micro-batch";
    out[0]->f[0] = loss;
    break;
  }
  case OpKind::MseLoss:
    out[0]->f[0] =
        cpu::mseForward(in[0]->data(), in[1]->data(), in[0]->numElements());
    break;
  case OpKind::DenseGrad: {
    int64_t inDim = in[2]->shape[0], outDim = in[2]->shape[1];
    cpu::denseBackward(in[0]->data(), in[1]->data(), in[2]->data(), y(0), y(1),
                       nullptr, in[1]->numElements() / inDim, inDim, outDim);
    break;
  }
  case OpKind::BiasGrad: {
    int64_t rows = rowsOf(in[0]), cols = colsOf(in[0]);
    std::vector<double> sums(cols, 0.0);
    const float *dy = in[0]->data();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        sums[c] += dy[r * cols + c];
    for (int64_t c = 0; c < cols; ++c) // accumulates, like the kernels
      y(0)[c] += static_cast<float>(sums[c]);
    break;
  }
  case OpKind::ReluGrad:
    cpu::reluBackward(in[1]->data(), in[0]->data(), y(0), in[0]->numElements());
    break;
  case OpKind::GeluGrad:
    cpu::geluBackward(in[1]->data(), in[0]->data(), y(0), in[0]->numElements());
    break;
  case OpKind::TanhGrad:
    cpu::tanhBackward(in[1]->data(), in[0]->data(), y(0), in[0]->numElements());
    break;
  case OpKind::SoftmaxGrad:
    cpu::softmaxBackward(in[1]->data(), in[0]->data(), y(0), rowsOf(in[0]),
                         colsOf(in[0]));
    break;
  case OpKind::LayerNormGrad: {
    int64_t rows = rowsOf(in[2]);
    const Tensor &forward = *in[1];
    if (int64_t(forward.saved[0].size()) != rows ||
        int64_t(forward.saved[1].size()) != rows)
      return "the forward layer norm's saved statistics are missing";
    cpu::layerNormBackward(in[0]->data(), in[2]->data(), in[3]->data(),
                           forward.saved[0].data(), forward.saved[1].data(),
                           y(0), y(1), y(2), rows, colsOf(in[2]));
    break;
  }
  case OpKind::EmbeddingGrad:
    cpu::embeddingBackward(in[1]->i.data(), in[0]->data(), y(0),
                           in[1]->numElements(),
                           env.program.values[op.results[0]].shape[1]);
    break;
  case OpKind::AttentionGrad: {
    const Tensor &forward = *in[1];
    int64_t b = in[2]->shape[0], s = in[2]->shape[1], d = in[2]->shape[2];
    if (int64_t(forward.saved[0].size()) != b * s * 3 * d ||
        int64_t(forward.saved[1].size()) != b * op.heads * s * s ||
        int64_t(forward.saved[2].size()) != b * s * d)
      return "the forward attention's saved state is missing";
    int64_t scratchBytes = 4 * b * s * d * int64_t(sizeof(float));
    std::vector<float> scratch(4 * b * s * d);
    env.memory.add(scratchBytes);
    cpu::attentionBackward(in[0]->data(), in[2]->data(), in[3]->data(),
                           in[4]->data(), forward.saved[0].data(),
                           forward.saved[1].data(), forward.saved[2].data(),
                           y(0), y(1), y(2), scratch.data(), b, s, d, op.heads,
                           op.causal);
    env.memory.sub(scratchBytes);
    break;
  }
  case OpKind::DropoutGrad: {
    const Tensor &forward = *in[1];
    if (int64_t(forward.mask.size()) != in[0]->numElements())
      return "the forward dropout's mask is missing";
    cpu::dropoutBackward(forward.mask.data(), in[0]->data(), y(0),
                         in[0]->numElements(), op.rate);
    break;
  }
  case OpKind::SoftmaxCrossEntropyGrad: {
    const Tensor &forward = *in[0];
    int64_t rows = in[1]->numElements(),
            classes = env.program.values[op.results[0]].shape.back();
    if (int64_t(forward.saved[0].size()) != rows * classes)
      return "the forward cross-entropy's saved softmax is missing";
    cpu::softmaxCrossEntropyBackward(forward.saved[0].data(), in[1]->i.data(),
                                     env.lossScale, y(0), rows, classes);
    break;
  }
  case OpKind::MseLossGrad:
    cpu::mseBackward(in[0]->data(), in[1]->data(), env.lossScale, y(0),
                     in[0]->numElements());
    break;
  case OpKind::AccumulateGrad: {
    auto it = env.params.find(op.name);
    if (it == env.params.end())
      return "unknown parameter '" + op.name + "'";
    std::vector<float> &grad = it->second->grad;
    const float *g = in[0]->data();
    for (size_t k = 0; k < grad.size(); ++k)
      grad[k] += g[k];
    break;
  }
  case OpKind::Zeros:
    break; // allocated zeroed
  }
  return {};
}

/// Runs a list of ops; an error names the op.
std::string runOps(OpEnv &env, const std::vector<Op> &ops,
                   const char *section) {
  for (size_t k = 0; k < ops.size(); ++k) {
    if (env.skip && (*env.skip)[k])
      continue;
    std::string error = runOp(env, ops[k], k);
    if (!error.empty())
      return error + ", in " + section + " op " + std::to_string(k) + " (" +
             opKindName(ops[k].kind) + ")";
    if (env.freeAfter)
      for (int id : (*env.freeAfter)[k])
        env.values.erase(id);
  }
  return {};
}

} // namespace

std::string gpipe::runtime::checkBatch(const Bundle &bundle, const Batch &batch,
                                      int64_t rows) {
  for (const ModelInputSpec &spec : bundle.inputs) {
    std::vector<int64_t> shape = spec.shape;
    shape[0] = rows;
    auto it = batch.find(spec.name);
    if (it == batch.end())
      return "missing model input '" + spec.name + "' (expected " +
             typeName(spec.type) + " " + shapeString(shape) + ")";
    const HostTensor &tensor = it->second;
    if (tensor.type != spec.type)
      return "model input '" + spec.name + "': expected " +
             typeName(spec.type) + " elements, got " + typeName(tensor.type);
    if (tensor.shape != shape)
      return "model input '" + spec.name + "': expected shape " +
             shapeString(shape) + ", got " + shapeString(tensor.shape);
    size_t size =
        spec.type == ElementType::F32 ? tensor.f32.size() : tensor.i32.size();
    if (int64_t(size) != product(shape))
      return "model input '" + spec.name + "': shape " + shapeString(shape) +
             " needs " + std::to_string(product(shape)) + " elements, got " +
             std::to_string(size);
  }
  for (const auto &[name, tensor] : batch) {
    bool known = std::any_of(
        bundle.inputs.begin(), bundle.inputs.end(),
        [&](const ModelInputSpec &spec) { return spec.name == name; });
    if (!known) {
      std::string names;
      for (const ModelInputSpec &spec : bundle.inputs)
        names += (names.empty() ? "'" : ", '") + spec.name + "'";
      return "unexpected model input '" + name + "' (the model reads " + names +
             ")";
    }
  }
  return {};
}

namespace {

/// Copies rows [rowOffset, rowOffset + rows) of a batch tensor.
std::unique_ptr<Tensor> sliceRows(const HostTensor &host, int64_t rowOffset,
                                  int64_t rows) {
  auto tensor = std::make_unique<Tensor>();
  tensor->type = host.type;
  tensor->shape = host.shape;
  tensor->shape[0] = rows;
  int64_t perRow = product(host.shape) / host.shape[0];
  if (host.type == ElementType::F32)
    tensor->f.assign(host.f32.begin() + rowOffset * perRow,
                     host.f32.begin() + (rowOffset + rows) * perRow);
  else
    tensor->i.assign(host.i32.begin() + rowOffset * perRow,
                     host.i32.begin() + (rowOffset + rows) * perRow);
  return tensor;
}

HostTensor toHost(const Tensor &tensor) {
  HostTensor host;
  host.type = tensor.type;
  host.shape = tensor.shape;
  if (tensor.type == ElementType::F32)
    host.f32.assign(tensor.data(), tensor.data() + tensor.numElements());
  else
    host.i32 = tensor.i;
  return host;
}

} // namespace

//===----------------------------------------------------------------------===//
// HostTensor
//===----------------------------------------------------------------------===//

HostTensor HostTensor::floats(std::vector<int64_t> shape,
                              std::vector<float> data) {
  HostTensor tensor;
  tensor.type = ElementType::F32;
  tensor.shape = std::move(shape);
  tensor.f32 = std::move(data);
  return tensor;
}

HostTensor HostTensor::ints(std::vector<int64_t> shape,
                            std::vector<int32_t> data) {
  HostTensor tensor;
  tensor.type = ElementType::I32;
  tensor.shape = std::move(shape);
  tensor.i32 = std::move(data);
  return tensor;
}

int64_t HostTensor::numElements() const { return product(shape); }

//===----------------------------------------------------------------------===//
// The executor
//===----------------------------------------------------------------------===//

namespace {

/// One micro-batch on one device during a step.
struct MicrobatchState {
  ValueStore values;
  bool forwardDone = false;
  bool backwardDone = false;
  /// The forward values were kept for the backward (no recompute).
  bool kept = false;
  std::vector<char> activationSent;
  std::vector<char> gradientSent;
  double loss = 0.0;
};

struct DeviceState {
  std::vector<Parameter *> params;
  MemoryCounter memory;
  int64_t resident = 0;
  /// The micro-batch forwarded last (kept under except-last remat).
  unsigned lastForward = 0;
  std::vector<MicrobatchState> microbatches;
};

/// What the device threads of one step share.
struct StepShared {
  explicit StepShared(std::chrono::milliseconds timeout, unsigned numDevices)
      : mailbox(timeout), numDevices(numDevices),
        progress(new std::atomic<size_t>[numDevices]) {
    for (unsigned d = 0; d < numDevices; ++d)
      progress[d] = 0;
  }

  Mailbox mailbox;
  unsigned numDevices;
  /// The instruction each device is at (its program size once done): tells
  /// a timed-out receive whether its peer may still send.
  std::unique_ptr<std::atomic<size_t>[]> progress;
  std::atomic<bool> aborted{false};
  std::mutex mutex;
  std::condition_variable barrierReached;
  unsigned atBarrier = 0;
  std::string firstError;
  std::chrono::steady_clock::time_point start;

  /// Records a root-cause error (the first one wins) and stops every device.
  void fail(const std::string &error) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!firstError.empty())
        return;
      firstError = error;
      aborted = true;
    }
    barrierReached.notify_all();
    mailbox.abort(error);
  }
};

} // namespace

struct PipelineExecutor::Impl {
  Bundle bundle;
  ExecutorConfig config;
  std::vector<std::unique_ptr<Parameter>> params;
  std::unordered_map<std::string, Parameter *> paramByName;
  std::vector<DeviceState> devices;
  /// Per stage: see OpEnv::fusedInto and OpEnv::skip.
  std::vector<std::vector<std::vector<Parameter *>>> fusedInto;
  std::vector<std::vector<char>> skipBackward;
  std::vector<StageLiveness> liveness;
  std::vector<int64_t> rowOffsets;
  int64_t steps = 0;
  Timeline timeline{0};
  std::vector<int64_t> peaks;

  bool keepsAll(unsigned device, unsigned microbatch) const {
    return keepsForwardValues(bundle.remat, microbatch,
                              devices[device].lastForward);
  }

  std::string runInstr(unsigned device, size_t index, const Instr &instr,
                       const Batch &batch, StepShared &shared);
  void runDevice(unsigned device, const Batch &batch, StepShared &shared);
  std::string send(unsigned device, const Instr &instr, StepShared &shared);

  /// Whether the sender of `key` still has its send ahead of it.
  bool peerStillSends(const MessageKey &key, const StepShared &shared) const {
    InstrKind kind = key.direction == Direction::Activation
                         ? InstrKind::SendActivation
                         : InstrKind::SendGradient;
    const std::vector<Instr> &program = bundle.programs[key.from];
    for (size_t i = shared.progress[key.from]; i < program.size(); ++i) {
      const Instr &instr = program[i];
      if (instr.kind == kind && instr.peer == key.to &&
          instr.microbatch == key.microbatch && instr.channel == key.channel)
        return true;
    }
    return false;
  }
};

std::string PipelineExecutor::Impl::send(unsigned device, const Instr &instr,
                                         StepShared &shared) {
  const StageProgram &program = bundle.stages[device];
  DeviceState &state = devices[device];
  MicrobatchState &mb = state.microbatches[instr.microbatch];
  bool activation = instr.kind == InstrKind::SendActivation;
  const std::vector<int> &ids =
      activation ? program.outputs : program.inputGrads;
  std::vector<char> &sent = activation ? mb.activationSent : mb.gradientSent;
  if (sent[instr.channel])
    return "channel " + std::to_string(instr.channel) + " was already sent";
  if (activation ? !mb.forwardDone : !mb.backwardDone)
    return std::string("the ") + (activation ? "forward" : "backward") +
           " of micro-batch " + std::to_string(instr.microbatch) +
           " has not run yet";
  int id = ids[instr.channel];
  Tensor *tensor = mb.values.get(id);
  if (!tensor)
    return "value " + std::to_string(id) + " is no longer available";
  // Hand the buffer over when nothing on this device needs it any more.
  bool needed = activation && liveness[device].neededAfterForward(id, mb.kept);
  for (size_t c = 0; c < ids.size() && !needed; ++c)
    needed = c != instr.channel && ids[c] == id && !sent[c];
  std::vector<float> payload;
  int64_t copyBytes = 0;
  if (needed) {
    payload.assign(tensor->data(), tensor->data() + tensor->numElements());
    copyBytes = int64_t(payload.size()) * 4;
    state.memory.add(copyBytes); // until the mailbox takes it
  } else {
    std::unique_ptr<Tensor> owned = mb.values.take(id);
    payload = std::move(owned->f);
  }
  sent[instr.channel] = 1;
  MessageKey key{activation ? Direction::Activation : Direction::Gradient,
                 device, instr.peer, instr.microbatch, instr.channel};
  std::string error = shared.mailbox.send(key, std::move(payload));
  state.memory.sub(copyBytes);
  if (!error.empty() && shared.aborted)
    return {}; // another device failed first
  return error;
}

std::string PipelineExecutor::Impl::runInstr(unsigned device, size_t index,
                                             const Instr &instr,
                                             const Batch &batch,
                                             StepShared &shared) {
  const StageProgram &program = bundle.stages[device];
  DeviceState &state = devices[device];
  const unsigned m = instr.microbatch;
  const int64_t rows =
      instr.kind == InstrKind::OptimizerStep ? 0 : bundle.microbatchRows[m];
  MicrobatchState *mb =
      instr.kind == InstrKind::OptimizerStep ? nullptr : &state.microbatches[m];
  auto makeEnv = [&](float lossScale) {
    return OpEnv{program,  mb->values,    paramByName,         state.memory,
                 rows,     rowOffsets[m], uint64_t(steps + 1), true,
                 lossScale};
  };

  switch (instr.kind) {
  case InstrKind::LoadInput: {
    const HostTensor &host = batch.at(instr.inputName);
    for (const StageInput &input : program.inputs)
      if (!input.fromChannel && input.inputName == instr.inputName)
        mb->values.put(input.value, sliceRows(host, rowOffsets[m], rows));
    return {};
  }
  case InstrKind::RecvActivation:
  case InstrKind::RecvGradient: {
    bool activation = instr.kind == InstrKind::RecvActivation;
    int id = -1;
    if (activation) {
      for (const StageInput &input : program.inputs)
        if (input.fromChannel && input.channel == instr.channel)
          id = input.value;
    } else {
      id = program.outputGrads[instr.channel];
    }
    MessageKey key{activation ? Direction::Activation : Direction::Gradient,
                   instr.peer, device, m, instr.channel};
    RecvResult result = shared.mailbox.recv(key, index);
    if (!result.ok() && !shared.aborted && peerStillSends(key, shared)) {
      // The peer has this send ahead of it, so it is blocked or slow and this
      // wait is a consequence: give the device that is stuck for good one
      // more period to report the root cause first.
      result = shared.mailbox.recv(key, index);
      if (!result.ok() && !shared.aborted) {
        size_t at = shared.progress[instr.peer];
        const std::vector<Instr> &peerProgram = bundle.programs[instr.peer];
        return "device " + std::to_string(device) + " timed out after " +
               std::to_string(2 * config.recvTimeout.count()) + " ms at op #" +
               std::to_string(index) + " (" + describeInstruction(instr, device) +
               "): device " + std::to_string(instr.peer) +
               " has not sent it yet; it is at " +
               (at < peerProgram.size()
                    ? "op #" + std::to_string(at) + " (" +
                          describeInstruction(peerProgram[at], instr.peer) + ")"
                    : std::string("the end of its program"));
      }
    }
    if (!result.ok())
      return shared.aborted ? std::string() : result.error;
    auto tensor = std::make_unique<Tensor>();
    tensor->shape = program.values[id].shape;
    tensor->shape[0] = rows;
    if (int64_t(result.payload.size()) != product(tensor->shape))
      return "received " + std::to_string(result.payload.size()) +
             " floats, expected " + std::to_string(product(tensor->shape)) +
             " (shape " + shapeString(tensor->shape) + ")";
    tensor->f = std::move(result.payload);
    mb->values.put(id, std::move(tensor));
    return {};
  }
  case InstrKind::SendActivation:
  case InstrKind::SendGradient:
    return send(device, instr, shared);
  case InstrKind::Forward: {
    for (const StageInput &input : program.inputs)
      if (!mb->values.get(input.value))
        return input.fromChannel ? "channel " + std::to_string(input.channel) +
                                       " was not received before the forward"
                                 : "model input '" + input.inputName +
                                       "' was not loaded before the forward";
    mb->kept = keepsAll(device, m);
    const StageLiveness &live = liveness[device];
    OpEnv env = makeEnv(1.0f);
    env.freeAfter = &live.forwardFree[mb->kept];
    std::string error = runOps(env, program.forward, "forward");
    if (!error.empty())
      return error;
    if (program.loss >= 0)
      mb->loss = mb->values.get(program.loss)->f[0];
    mb->forwardDone = true;
    // Keep what the backward needs (the stash: stage inputs, when it
    // recomputes) and the outputs until they are sent.
    std::vector<char> keep(program.values.size(), 0);
    for (size_t id = 0; id < keep.size(); ++id)
      keep[id] = live.neededAfterForward(int(id), mb->kept);
    for (int id : program.outputs)
      keep[id] = 1;
    mb->values.retainOnly([&](int id) { return keep[id] != 0; });
    return {};
  }
  case InstrKind::Backward: {
    for (size_t c = 0; c < program.outputGrads.size(); ++c)
      if (!mb->values.get(program.outputGrads[c]))
        return "the gradient of channel " + std::to_string(c) +
               " was not received before the backward";
    const StageLiveness &live = liveness[device];
    OpEnv env = makeEnv(float(double(rows) / double(bundle.batch)));
    if (!mb->kept) {
      env.freeAfter = &live.recomputeFree;
      std::string error = runOps(env, program.recompute, "recompute");
      if (!error.empty())
        return error;
    }
    env.fusedInto = &fusedInto[device];
    env.skip = &skipBackward[device];
    env.freeAfter = &live.backwardFree[mb->kept];
    std::string error = runOps(env, program.backward, "backward");
    if (!error.empty())
      return error;
    mb->backwardDone = true;
    std::vector<char> keep(program.values.size(), 0);
    for (int id : program.inputGrads)
      keep[id] = 1;
    mb->values.retainOnly([&](int id) { return keep[id] != 0; });
    return {};
  }
  case InstrKind::OptimizerStep:
    break;
  }
  return {};
}

void PipelineExecutor::Impl::runDevice(unsigned device, const Batch &batch,
                                       StepShared &shared) {
  using Clock = std::chrono::steady_clock;
  const std::vector<Instr> &program = bundle.programs[device];
  DeviceState &state = devices[device];
  auto micros = [&](Clock::time_point t) {
    return std::chrono::duration<double, std::micro>(t - shared.start).count();
  };
  for (size_t i = 0; i < program.size(); ++i) {
    if (shared.aborted)
      return;
    shared.progress[device] = i;
    const Instr &instr = program[i];
    if (instr.kind == InstrKind::OptimizerStep) {
      // All devices update together or none does: a failed step leaves the
      // parameters as they were. No timeout is needed: every other device
      // either gets here or fails (its receives time out), which aborts.
      std::unique_lock<std::mutex> lock(shared.mutex);
      ++shared.atBarrier;
      shared.barrierReached.notify_all();
      shared.barrierReached.wait(lock, [&] {
        return shared.aborted || shared.atBarrier == shared.numDevices;
      });
      if (shared.aborted)
        return;
    }
    Clock::time_point begin = Clock::now();
    std::string error;
    if (instr.kind == InstrKind::OptimizerStep) {
      for (Parameter *param : state.params) {
        std::vector<float *> slots;
        for (auto &slot : param->slots)
          slots.push_back(slot.data());
        applyOptimizer(config.optimizer, param->value.data(),
                       param->grad.data(), slots.data(),
                       int64_t(param->value.size()), steps + 1);
      }
    } else {
      try {
        error = runInstr(device, i, instr, batch, shared);
      } catch (const std::bad_alloc &) {
        error = "out of memory";
      } catch (const std::exception &e) {
        error = e.what();
      }
    }
    if (config.recordTimeline) {
      Clock::time_point end = Clock::now();
      bool compute = instr.kind == InstrKind::Forward ||
                     instr.kind == InstrKind::Backward ||
                     instr.kind == InstrKind::OptimizerStep;
      timeline.record(
          device,
          {instructionName(instr.kind), compute,
           instr.kind == InstrKind::OptimizerStep ? -1
                                                  : int64_t(instr.microbatch),
           micros(begin),
           std::chrono::duration<double, std::micro>(end - begin).count()});
    }
    if (!error.empty()) {
      bool fromMailbox = (instr.kind == InstrKind::RecvActivation ||
                          instr.kind == InstrKind::RecvGradient) &&
                         error.rfind("device ", 0) == 0;
      shared.fail(fromMailbox
                      ? error
                      : "device " + std::to_string(device) + ": op #" +
                            std::to_string(i) + " (" +
                            describeInstruction(instr, device) + "): " + error);
      return;
    }
  }
  shared.progress[device] = program.size();
}

PipelineExecutor::PipelineExecutor(std::unique_ptr<Impl> impl)
    : impl(std::move(impl)) {}

PipelineExecutor::~PipelineExecutor() = default;

std::unique_ptr<PipelineExecutor>
PipelineExecutor::create(Bundle bundle, const ExecutorConfig &config,
                         std::string &error) {
  error = validateBundle(bundle);
  if (!error.empty())
    return nullptr;
  if (config.recvTimeout.count() <= 0) {
    error = "expects a positive receive timeout, got " +
            std::to_string(config.recvTimeout.count()) + " ms";
    return nullptr;
  }
  static std::once_flag blasOnce;
  std::call_once(blasOnce, cpu::useSingleThreadedBlas);

  auto impl = std::make_unique<Impl>();
  impl->config = config;
  const unsigned numDevices = bundle.stages.size();
  impl->devices.resize(numDevices);
  const unsigned numSlots = optimizerSlots(config.optimizer.kind);
  for (const ParamSpec &spec : bundle.params) {
    auto param = std::make_unique<Parameter>();
    param->spec = spec;
    param->device = spec.stage;
    int64_t n = product(spec.shape);
    param->value.resize(n);
    initializeParameter(spec.init, spec.scale, spec.shape, config.seed,
                        spec.name, param->value.data());
    param->grad.assign(n, 0.0f);
    param->slots.assign(numSlots, std::vector<float>(n, 0.0f));
    impl->devices[spec.stage].resident += n * 4 * (2 + numSlots);
    impl->devices[spec.stage].params.push_back(param.get());
    impl->paramByName[spec.name] = param.get();
    impl->params.push_back(std::move(param));
  }
  for (unsigned s = 0; s < numDevices; ++s)
    for (const Instr &instr : bundle.programs[s])
      if (instr.kind == InstrKind::Forward)
        impl->devices[s].lastForward = instr.microbatch;
  impl->fusedInto.resize(numDevices);
  impl->skipBackward.resize(numDevices);
  for (unsigned s = 0; s < numDevices; ++s) {
    GradientFusion fusion = fuseGradientAccumulation(bundle.stages[s]);
    auto &fused = impl->fusedInto[s];
    fused.resize(fusion.accumulatesInto.size());
    for (size_t k = 0; k < fused.size(); ++k)
      for (const std::string &name : fusion.accumulatesInto[k])
        fused[k].push_back(name.empty() ? nullptr
                                        : impl->paramByName.at(name));
    impl->skipBackward[s] = std::move(fusion.skip);
  }
  for (unsigned s = 0; s < numDevices; ++s)
    impl->liveness.push_back(
        computeLiveness(bundle.stages[s], impl->skipBackward[s]));
  int64_t offset = 0;
  for (int64_t rows : bundle.microbatchRows) {
    impl->rowOffsets.push_back(offset);
    offset += rows;
  }
  impl->peaks.assign(numDevices, 0);
  for (unsigned d = 0; d < numDevices; ++d)
    impl->peaks[d] = impl->devices[d].resident;
  impl->timeline = Timeline(numDevices);
  impl->bundle = std::move(bundle);
  return std::unique_ptr<PipelineExecutor>(
      new PipelineExecutor(std::move(impl)));
}

StepResult PipelineExecutor::trainStep(const Batch &batch) {
  Impl &s = *impl;
  StepResult result;
  result.error = checkBatch(s.bundle, batch, s.bundle.batch);
  if (!result.error.empty())
    return result;
  const unsigned numDevices = s.devices.size();
  const unsigned numMicrobatches = s.bundle.microbatchRows.size();
  for (auto &param : s.params)
    std::fill(param->grad.begin(), param->grad.end(), 0.0f);
  for (unsigned d = 0; d < numDevices; ++d) {
    DeviceState &device = s.devices[d];
    const StageProgram &program = s.bundle.stages[d];
    device.memory.current = device.resident;
    device.memory.peak = device.resident;
    device.microbatches.clear();
    device.microbatches.resize(numMicrobatches);
    for (MicrobatchState &mb : device.microbatches) {
      mb.values.reset(program.values.size(), &device.memory);
      mb.activationSent.assign(program.outputs.size(), 0);
      mb.gradientSent.assign(program.inputGrads.size(), 0);
    }
  }
  s.timeline = Timeline(numDevices);
  StepShared shared(s.config.recvTimeout, numDevices);
  shared.start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  try {
    for (unsigned d = 0; d < numDevices; ++d)
      threads.emplace_back(
          [&s, &batch, &shared, d] { s.runDevice(d, batch, shared); });
  } catch (const std::exception &e) {
    shared.fail(std::string("could not start the device threads: ") + e.what());
  }
  for (std::thread &thread : threads)
    thread.join();

  for (unsigned d = 0; d < numDevices; ++d) {
    DeviceState &device = s.devices[d];
    s.peaks[d] = device.memory.peak;
    for (MicrobatchState &mb : device.microbatches)
      mb.values.clear();
    assert(device.memory.current == device.resident &&
           "every buffer a step allocates is freed and uncounted by its end");
  }
  if (!shared.firstError.empty()) {
    result.error = shared.firstError;
    return result;
  }
  ++s.steps;
  const DeviceState &last = s.devices.back();
  for (unsigned m = 0; m < numMicrobatches; ++m) {
    double loss = last.microbatches[m].loss;
    result.microbatchLosses.push_back(loss);
    result.loss +=
        double(s.bundle.microbatchRows[m]) / double(s.bundle.batch) * loss;
  }
  return result;
}

EvalResult PipelineExecutor::evaluate(const Batch &batch, int64_t rows) {
  Impl &s = *impl;
  EvalResult result;
  if (rows < 1) {
    result.error =
        "evaluate: expects at least 1 row, got " + std::to_string(rows);
    return result;
  }
  result.error = checkBatch(s.bundle, batch, rows);
  if (!result.error.empty()) {
    result.error = "evaluate: " + result.error;
    return result;
  }
  MemoryCounter memory; // evaluation is not a device's memory
  const unsigned numStages = s.bundle.stages.size();
  ValueStore previous, current;
  try {
    for (unsigned st = 0; st < numStages; ++st) {
      const StageProgram &program = s.bundle.stages[st];
      current.reset(program.values.size(), &memory);
      for (const StageInput &input : program.inputs) {
        if (input.fromChannel) {
          const Tensor *sent =
              previous.get(s.bundle.stages[st - 1].outputs[input.channel]);
          if (!sent) {
            result.error = "evaluate: stage " + std::to_string(st) +
                           ": channel " + std::to_string(input.channel) +
                           " has no value";
            return result;
          }
          auto copy = std::make_unique<Tensor>();
          copy->shape = sent->shape;
          copy->f.assign(sent->data(), sent->data() + sent->numElements());
          current.put(input.value, std::move(copy));
        } else {
          current.put(input.value,
                      sliceRows(batch.at(input.inputName), 0, rows));
        }
      }
      OpEnv env{program, current, s.paramByName, memory, rows,
                0,       0,       false,         1.0f};
      std::string error = runOps(env, program.forward, "forward");
      if (!error.empty()) {
        result.error = "evaluate: stage " + std::to_string(st) + ": " + error;
        return result;
      }
      std::swap(previous, current);
    }
    const StageProgram &last = s.bundle.stages.back();
    result.loss = previous.get(last.loss)->f[0];
    for (const Op &op : last.forward)
      if (!op.results.empty() && op.results[0] == last.loss) {
        result.prediction = toHost(*previous.get(op.operands[0]));
        result.target = toHost(*previous.get(op.operands[1]));
      }
  } catch (const std::bad_alloc &) {
    result.error = "evaluate: out of memory";
  }
  return result;
}

const std::vector<float> *
PipelineExecutor::parameter(const std::string &name) const {
  auto it = impl->paramByName.find(name);
  return it == impl->paramByName.end() ? nullptr : &it->second->value;
}

const std::vector<float> *
PipelineExecutor::gradient(const std::string &name) const {
  auto it = impl->paramByName.find(name);
  return it == impl->paramByName.end() ? nullptr : &it->second->grad;
}

std::string PipelineExecutor::setParameter(const std::string &name,
                                           const std::vector<float> &values) {
  auto it = impl->paramByName.find(name);
  if (it == impl->paramByName.end())
    return "unknown parameter '" + name + "'";
  if (values.size() != it->second->value.size())
    return "parameter '" + name + "' has " +
           std::to_string(it->second->value.size()) + " elements, got " +
           std::to_string(values.size());
  it->second->value = values;
  return {};
}

int64_t PipelineExecutor::stepsDone() const { return impl->steps; }

void PipelineExecutor::setLearningRate(float learningRate) {
  impl->config.optimizer.learningRate = learningRate;
}

unsigned PipelineExecutor::numDevices() const { return impl->devices.size(); }

const Bundle &PipelineExecutor::bundle() const { return impl->bundle; }

const Timeline &PipelineExecutor::timeline() const { return impl->timeline; }

const std::vector<int64_t> &PipelineExecutor::peakMemoryBytes() const {
  return impl->peaks;
}

std::vector<int64_t> PipelineExecutor::residentMemoryBytes() const {
  std::vector<int64_t> bytes;
  for (const DeviceState &device : impl->devices)
    bytes.push_back(device.resident);
  return bytes;
}
