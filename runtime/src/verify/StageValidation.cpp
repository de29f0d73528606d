//===- StageValidation.cpp - What one stage's programs must be ------------===//
//
// Every op's operand and result counts (the op table), element types and
// shapes, and definition order in the forward, recompute and backward
// programs of one stage, and its channels to the neighbouring stages.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/bundle/BackwardSplit.h"
#include "gpipe/runtime/verify/ProgramAnalysis.h"
#include "verify/ValidationText.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <unordered_map>

using namespace gpipe::runtime;
using namespace gpipe::runtime::detail;

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
  /// `kept`: values the op may read besides `defined` (a selective
  /// recompute reads the forward's kept values).
  std::string checkOp(const char *section, size_t index, const Op &op,
                      std::set<int> &defined, bool recompute,
                      const std::set<int> *kept = nullptr);
  /// `backward`: the op is in the backward program (not its recompute).
  std::string checkShapes(const Op &op, bool backward);
  /// The fusion op `index` of `ops` names with the next op, if any.
  std::string checkFusion(const char *section, const std::vector<Op> &ops,
                          size_t index) const;
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

std::string StageValidator::checkShapes(const Op &op, bool backward) {
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
  case OpKind::GeluErf:
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
  case OpKind::AttentionGrad:
    return checkAttentionShapes(op, program);
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
  case OpKind::Matmul:
    return checkMatmulShapes(op, program, backward);
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
    return res(1) ? expectLike(*res(1), w, "dw") : std::string();
  }
  case OpKind::BiasGrad:
    CHECK(f32Except({}));
    CHECK(lastDimRank(ops(0), "dy"));
    return expectShape(*res(0), {ops(0).shape.back()}, false, "the result");
  case OpKind::ReluGrad:
  case OpKind::GeluGrad:
  case OpKind::GeluErfGrad:
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
    if (res(1))
      CHECK(expectLike(*res(1), ops(3), "dgamma"));
    return res(2) ? expectLike(*res(2), ops(3), "dbeta") : std::string();
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
  case OpKind::Kernel:
    return checkKernelShapes(op, program, bundle);
  case OpKind::Conv2d:
  case OpKind::Conv2dGrad:
  case OpKind::MaxPool2d:
  case OpKind::MaxPool2dGrad:
  case OpKind::AvgPool2d:
  case OpKind::AvgPool2dGrad:
  case OpKind::GlobalAvgPool:
  case OpKind::GlobalAvgPoolGrad:
  case OpKind::Flatten:
  case OpKind::FlattenGrad:
  case OpKind::BatchNorm:
  case OpKind::BatchNormGrad:
    return checkImageOpShapes(op, program);
  }
#undef CHECK
  return "unknown op kind";
}

std::string StageValidator::checkFusion(const char *section,
                                        const std::vector<Op> &ops,
                                        size_t index) const {
  const Op &op = ops[index];
  if (op.fusion == FusionKind::None)
    return {};
  std::string at =
      where(section, index, op) + ": fusion '" + fusionName(op.fusion) + "' ";
  if (std::string_view(section) == "backward")
    return at + "in a backward; only forward and recompute ops fuse";
  if (index + 1 == ops.size())
    return at + "with the next op, but it is the last op";
  const Op &next = ops[index + 1];
  if (fusionOf(op.kind, next.kind) != op.fusion)
    return at + "does not apply to " + opKindName(op.kind) + " then " +
           opKindName(next.kind);
  if (next.fusion != FusionKind::None)
    return at + "is followed by another fusion; fusions pair two ops";
  if (op.results.empty() || next.operands.empty() ||
      next.operands[0] != op.results[0])
    return at + "needs the next op to read this op's result as its operand 0";
  return {};
}

std::string StageValidator::checkOp(const char *section, size_t index,
                                    const Op &op, std::set<int> &defined,
                                    bool recompute, const std::set<int> *kept) {
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
  const unsigned results = resultCountOf(arity, op.operands.size());
  if (op.results.size() != results)
    return fail("expects " + std::to_string(results) + " result" +
                (results == 1 ? "" : "s") + ", got " +
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
    if (!defined.count(id) && !(kept && kept->count(id)))
      return fail("operand " + std::to_string(i) + " (value " +
                  std::to_string(id) + ") is not available there");
  }
  for (size_t i = 0; i < op.results.size(); ++i) {
    int id = op.results[i];
    if (id == -1 && i == 0 && arity.has(DropsFirstResult))
      continue;
    // A split backward's B half of a dense or layer-norm gradient leaves
    // the parameter gradients to its W half (BackwardSplit.h).
    if (id == -1 && i > 0 && separatesWeightGradients(op.kind))
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
                  " must be the result of a " + opKindName(producerKind) +
                  " op");
    const Op &forward = *it->second;
    if (op.kind == OpKind::DropoutGrad && forward.rate != op.rate)
      return fail("rate " + std::to_string(op.rate) +
                  " differs from the forward's " +
                  std::to_string(forward.rate));
    if (op.kind == OpKind::AttentionGrad &&
        (forward.heads != op.heads || forward.causal != op.causal))
      return fail("heads/causal differ from the forward's");
  }
  std::string error = checkShapes(op, std::string(section) == "backward");
  if (!error.empty())
    return fail(error);
  if (!op.results.empty() && std::all_of(op.results.begin(), op.results.end(),
                                         [](int id) { return id < 0; }))
    return fail("defines none of its results");
  for (int id : op.results) {
    if (id < 0)
      continue;
    if (recompute) {
      auto it = producer.find(id);
      if (it == producer.end() || it->second->kind != op.kind)
        return fail("redefines value " + std::to_string(id) +
                    ", which no forward " + opKindName(op.kind) +
                    " op defines");
      if (it->second->kernel != op.kernel)
        return fail("redefines value " + std::to_string(id) + " with kernel " +
                    std::to_string(op.kernel) + ", which the forward defines " +
                    "with kernel " + std::to_string(it->second->kernel));
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
    if (error.empty())
      error = checkFusion("forward", program.forward, i);
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

  // Recompute. A selective one also reads the values the forward kept:
  // any the forward defines and the recompute does not define again.
  const bool selective = bundle.remat == RematPolicy::Selective;
  std::set<int> recomputed = inputs;
  for (size_t i = 0; i < program.recompute.size(); ++i) {
    std::string error =
        checkOp("recompute", i, program.recompute[i], recomputed, true,
                selective ? &forwardDefined : nullptr);
    if (error.empty())
      error = checkFusion("recompute", program.recompute, i);
    if (!error.empty())
      return error;
  }

  // Backward: under full and except-last remat it must also run on the
  // recomputed values alone.
  std::set<int> available = bundle.remat == RematPolicy::None || selective
                                ? forwardDefined
                                : recomputed;
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
  if (program.weightsFrom != StageProgram::kNotSplit &&
      program.weightsFrom > program.backward.size())
    return prefix + "splits its backward at op " +
           std::to_string(program.weightsFrom) + ", past its " +
           std::to_string(program.backward.size()) + " ops";
  std::set<int> definedByW;
  for (size_t i = 0; i < program.backward.size(); ++i) {
    const Op &op = program.backward[i];
    for (int id : op.results)
      if (id >= 0 && (forwardDefined.count(id) || available.count(id)))
        return where("backward", i, op) + ": defines value " +
               std::to_string(id) + " again";
    std::string error = checkOp("backward", i, op, available, false);
    if (error.empty())
      error = checkFusion("backward", program.backward, i);
    if (!error.empty())
      return error;
    if (i >= program.inputGradientEnd())
      for (int id : op.results)
        if (id >= 0)
          definedByW.insert(id);
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
      if (definedByW.count(id))
        return prefix + "input gradient " + std::to_string(c) + " (value " +
               std::to_string(id) +
               ") is defined by a weight-gradient op, after op " +
               std::to_string(program.weightsFrom) +
               ": it is sent before those run";
      const ValueSpec &grad = program.values[id];
      const ValueSpec &in = program.values[channelValue[c]];
      if (grad.shape != in.shape || grad.type != ElementType::F32 ||
          !grad.batched)
        return prefix + "input gradient " + std::to_string(c) +
               " must be a batched f32 " + shapeString(in.shape) + ", got " +
               typeName(grad.type) + " " + shapeString(grad.shape);
    }
  }

  // Every parameter that the stage's outputs or loss depend on gets its
  // gradient each micro-batch (once per read that has one): a backward that
  // drops it would train to a clean exit without ever updating it. A
  // parameter declared and never read, or read only by ops whose results
  // reach neither (dead code), has a zero gradient, which the compiler's
  // autodiff rightly leaves out. FuzzCompile found both.
  std::set<int> live(program.outputs.begin(), program.outputs.end());
  live.insert(program.loss);
  std::map<int, const std::string *> paramOfValue;
  for (auto op = program.forward.rbegin(); op != program.forward.rend(); ++op) {
    if (op->kind == OpKind::Param && !op->results.empty())
      paramOfValue[op->results[0]] = &op->name;
    // A batch norm's running statistics (operands 3 and 4) have no
    // gradient: their buffers hold its sums.
    const size_t differentiable =
        op->kind == OpKind::BatchNorm ? 3 : op->operands.size();
    if (std::any_of(op->results.begin(), op->results.end(),
                    [&](int result) { return live.count(result) > 0; }))
      live.insert(op->operands.begin(),
                  op->operands.begin() +
                      std::min(differentiable, op->operands.size()));
  }
  std::set<std::string> running;
  for (const Op &op : program.forward)
    if (op.kind == OpKind::BatchNorm && op.operands.size() == 5)
      for (int k : {3, 4})
        running.insert(paramDefining(program, op.operands[k]));
  std::map<std::string, int> accumulated;
  for (const auto &[value, name] : paramOfValue)
    if (live.count(value))
      accumulated.emplace(*name, 0);
  for (const Op &op : program.backward)
    if (op.kind == OpKind::AccumulateGrad) {
      if (running.count(op.name))
        return prefix + "the backward accumulates a gradient into parameter '" +
               op.name +
               "', which holds a batch norm's running statistics (their "
               "gradient buffer holds its sums)";
      ++accumulated[op.name];
    }
  std::set<std::string> frozen; // constants of the model: no gradient
  for (const ParamSpec &param : bundle.params)
    if (param.frozen)
      frozen.insert(param.name);
  for (const Op &op : program.backward)
    if (op.kind == OpKind::AccumulateGrad && frozen.count(op.name))
      return prefix + "the backward accumulates a gradient into parameter '" +
             op.name + "', which is frozen (a constant of the model)";
  for (const auto &[name, count] : accumulated)
    if (count == 0 && !frozen.count(name))
      return prefix +
             "the backward never accumulates the gradient of "
             "parameter '" +
             name + "', which the forward reads; its updates would be lost";
  return {};
}

std::string gpipe::runtime::detail::validateStage(const Bundle &bundle,
                                                  unsigned stage) {
  return StageValidator(bundle, stage).run();
}
