//===- BundleEmitter.cpp - Write a compiled model as a program bundle -----===//
//
// Flattens each stage's layers into one op list over numbered values, pairs
// the stage backward's recompute ops with the forward ops they copy (same
// value ids; RecomputeCopies.h), numbers the gradient values after them, and
// copies the schedule. The JSON
// layout is docs/BundleFormat.md.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Target/BundleEmitter.h"
#include "gpipe/Target/BatchPlacement.h"
#include "gpipe/Analysis/MemoryPlanner.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "gpipe/Dialect/GPipe/Transforms/Passes.h"
#include "gpipe/Dialect/GPipe/Transforms/RecomputeCopies.h"
#include "gpipe/Dialect/GPipe/Transforms/SplitBackward.h"
#include "gpipe/Target/KernelRegions.h"
#include "gpipe/Target/PtxKernels.h"
#include "gpipe/runtime/bundle/BundleChecksum.h"
#include "gpipe/runtime/bundle/OpTable.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Base64.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"

#include <optional>
#include <vector>

using namespace mlir;
using namespace gpipe;
namespace json = llvm::json;

namespace {
/// Numbers the values of one stage and describes them.
class ValueTable {
public:
  ValueTable(int64_t batch) : batch(batch) {}

  /// `batched` says whether the value is per example (decided by dataflow:
  /// a weight's first dimension may well equal the batch).
  int define(Value value, bool batched) {
    int id = specs.size();
    ids[value] = id;
    auto type = cast<RankedTensorType>(value.getType());
    json::Array shape;
    for (int64_t dim : type.getShape())
      shape.push_back(dim);
    batched = batched && type.getRank() > 0 && type.getDimSize(0) == batch;
    batchedIds.push_back(batched);
    shapes.emplace_back(type.getShape().begin(), type.getShape().end());
    Type element = type.getElementType();
    elements.push_back(element.isInteger(1)    ? KernelElement::I1
                       : element.isInteger()   ? KernelElement::I32
                                               : KernelElement::F32);
    specs.push_back(json::Object{
        {"shape", std::move(shape)},
        {"type", type.getElementType().isInteger() ? "i32" : "f32"},
        {"batched", batched}});
    return id;
  }
  bool isBatched(int id) const { return batchedIds[id]; }
  int64_t batchSize() const { return batch; }
  /// What the kernel fusion needs of value `id`.
  ValueInfo info(int64_t id) const {
    if (id < 0 || size_t(id) >= shapes.size())
      return {};
    return {shapes[id], batchedIds[id], elements[id]};
  }
  void alias(Value value, int id) { ids[value] = id; }
  FailureOr<int> lookup(Operation *user, Value value) const {
    auto it = ids.find(value);
    if (it == ids.end())
      return user->emitOpError() << "uses a value the bundle cannot name";
    return it->second;
  }
  json::Array takeSpecs() { return std::move(specs); }

private:
  int64_t batch;
  llvm::DenseMap<Value, int> ids;
  json::Array specs;
  std::vector<bool> batchedIds;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<KernelElement> elements;
};
} // namespace

/// The bundle op of a compute or gradient op: the op table's row named by its
/// mnemonic (a gpipe.add of a backward, not a recompute copy, sums two
/// gradients: add_grads), or nothing. `param` and `accumulate_grad` carry a
/// name and are written by the stage emission itself.
static std::optional<runtime::OpKind> bundleOpKind(Operation *op) {
  if (op->getName().getDialectNamespace() != "gpipe" ||
      isa<ParamOp, AccumulateGradOp>(op))
    return std::nullopt;
  if (isa<AddOp>(op) && op->getParentOfType<StageBackwardOp>() &&
      !op->hasAttr(kRecomputeAttr))
    return runtime::OpKind::AddGrads;
  std::optional<runtime::OpKind> kind =
      runtime::opKindNamed(op->getName().stripDialect().str());
  if (kind &&
      runtime::resultCountOf(runtime::opInfo(*kind), op->getNumOperands()) !=
          op->getNumResults())
    return std::nullopt;
  return kind;
}

/// Op-specific attributes.
static void addAttributes(Operation *op, json::Object &out) {
  if (std::optional<runtime::WindowAttrs> window = getWindowAttrs(op)) {
    auto pair = [](const int64_t(&values)[2]) {
      return json::Array{values[0], values[1]};
    };
    if (isa<Conv2dOp, Conv2dGradOp>(op)) {
      out["groups"] = window->groups;
    } else {
      out["window"] = pair(window->window);
    }
    out["stride"] = pair(window->stride);
    out["padding"] = pair(window->padding);
  }
  llvm::TypeSwitch<Operation *>(op)
      .Case<LayerNormOp, LayerNormGradOp>([&](auto norm) {
        out["epsilon"] = norm.getEpsilon().convertToDouble();
      })
      .Case([&](BatchNormOp norm) {
        out["epsilon"] = norm.getEpsilon().convertToDouble();
        out["momentum"] = norm.getMomentum().convertToDouble();
      })
      .Case<AttentionOp, AttentionGradOp>([&](auto attention) {
        out["heads"] = int64_t(attention.getHeads());
        out["causal"] = attention.getCausal();
      })
      .Case([&](MatmulOp matmul) {
        // The runtime's names; written only when set.
        if (matmul.getTransposeLhs())
          out["transpose_a"] = true;
        if (matmul.getTransposeRhs())
          out["transpose_b"] = true;
      })
      .Case([&](DropoutOp dropout) {
        out["rate"] = dropout.getRate().convertToDouble();
        out["seed"] = uint64_t(dropout.getSeed());
      })
      .Case([&](DropoutGradOp grad) {
        // The mask is the forward dropout's.
        auto forward = grad.getForward().getDefiningOp<DropoutOp>();
        if (forward) {
          out["rate"] = forward.getRate().convertToDouble();
          out["seed"] = uint64_t(forward.getSeed());
        }
      });
}

/// Marks the pairs of chooseLibraryFusions with `fuse`.
static void markFusions(json::Array &ops) {
  std::vector<runtime::FusionKind> fusions = chooseLibraryFusions(ops);
  for (size_t i = 0; i < ops.size(); ++i)
    if (fusions[i] != runtime::FusionKind::None)
      (*ops[i].getAsObject())["fuse"] = runtime::fusionName(fusions[i]);
}

/// forward's ids).
static LogicalResult emitOp(Operation *op, ValueTable &values,
                            json::Array &list, bool defineResults,
                            bool dropUnused = false) {
  // A general element-wise op is written by its mnemonic, for
  // fuseStageKernels to turn into a kernel.
  std::string name;
  const bool generated = op->hasTrait<gpipe::traits::GeneratedKernel>();
  // An add whose operands are not of its result's shape: generated.
  const bool broadcasts =
      isa<AddOp>(op) && (op->getOperand(0).getType() != op->getResultTypes()[0] ||
                         op->getOperand(1).getType() != op->getResultTypes()[0]);
  if (generated)
    name = op->getName().stripDialect().str();
  else if (std::optional<runtime::OpKind> kind = bundleOpKind(op))
    name = runtime::opKindName(*kind);
  else
    return op->emitOpError() << "cannot be written to a bundle";
  json::Array operands, results;
  SmallVector<bool> operandBatched;
  for (Value operand : op->getOperands()) {
    FailureOr<int> id = values.lookup(op, operand);
    if (failed(id))
      return failure();
    operands.push_back(*id);
    operandBatched.push_back(values.isBatched(*id));
  }
  if (generated || broadcasts)
    if (failed(checkBatchPlacement(op, values.batchSize(), operandBatched)))
      return failure();
  if (auto matmul = dyn_cast<MatmulOp>(op))
    if (failed(checkMatmulPlacement(matmul, operandBatched)))
      return failure();
  for (OpResult result : op->getResults()) {
    // Half of a split dense or layer-norm gradient: the other half's result
    // is not computed (its id is kept, as the memory description numbers
    // it); nor is an input gradient nothing reads.
    if ((dropUnused && result.use_empty()) || isUnreadInputGradient(result)) {
      if (defineResults)
        values.define(result, isPerExampleResult(result, operandBatched));
      results.push_back(-1);
      continue;
    }
    if (defineResults) {
      results.push_back(
          values.define(result, isPerExampleResult(result, operandBatched)));
      continue;
    }
    FailureOr<int> id = values.lookup(op, result);
    if (failed(id))
      return failure();
    results.push_back(*id);
  }
  json::Object out{{"op", name},
                   {"operands", std::move(operands)},
                   {"results", std::move(results)}};
  addAttributes(op, out);
  if (broadcasts)
    out["broadcast"] = true;
  // A general op's constants (clip's bounds) go into its kernel's steps, and
  // so do the axes of a reduction (and a mean's count).
  if (generated)
    for (NamedAttribute attr : op->getAttrs()) {
      if (auto value = dyn_cast<FloatAttr>(attr.getValue()))
        out[attr.getName().strref()] = value.getValueAsDouble();
      if (auto value = dyn_cast<IntegerAttr>(attr.getValue()))
        out[attr.getName().strref()] = value.getInt();
      auto list = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
      if (list && attr.getName() != "axes")
        out[attr.getName().strref()] = json::Array(list.asArrayRef());
      if (auto axes = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
          axes && attr.getName() == "axes") {
        json::Array list;
        int64_t count = 1;
        auto full = cast<RankedTensorType>(
            isa<ReduceMeanGradOp>(op) ? op->getResult(0).getType()
                                      : op->getOperand(0).getType());
        for (int64_t axis : axes.asArrayRef()) {
          list.push_back(axis);
          count *= full.getDimSize(axis);
        }
        out[attr.getName().strref()] = std::move(list);
        if (isa<ReduceMeanOp, ReduceMeanGradOp>(op))
          out["count"] = count;
      }
    }
  list.push_back(std::move(out));
  return success();
}

namespace {
struct StageEmission {
  json::Object stage;
  json::Array params;
};
} // namespace

static FailureOr<StageEmission> emitStage(StageOp stage,
                                          StageBackwardOp backward, bool isLast,
                                          int64_t batch, KernelTable &kernels) {
  ValueTable values(batch);
  StageEmission out;
  Block &body = stage.getBody().front();

  json::Array inputs;
  for (auto [operand, argument] :
       llvm::zip(stage.getInputs(), body.getArguments())) {
    int id = values.define(argument, true);
    if (auto input = operand.getDefiningOp<InputOp>())
      inputs.push_back(json::Object{{"value", id}, {"input", input.getName()}});
    else if (auto recv = operand.getDefiningOp<RecvOp>())
      inputs.push_back(
          json::Object{{"value", id}, {"channel", int64_t(recv.getChannel())}});
    else
      return stage.emitOpError()
             << "has an input that is neither a model input nor a "
                "gpipe.recv; run gpipe-insert-send-recv first";
  }

  // Forward: the layers flattened; parameters become `param` ops, all first
  // (they are views: no work, no order), so that ops of adjacent layers meet
  // and fuse (a residual add and the next layer's layer norm).
  json::Array params, forward;
  // Each op's index in `forward`, the params aside.
  llvm::DenseMap<Operation *, size_t> forwardIndex;
  for (LayerOp layer : body.getOps<LayerOp>()) {
    Block &layerBody = layer.getBody().front();
    for (Operation &op : layerBody.without_terminator()) {
      if (auto param = dyn_cast<ParamOp>(op)) {
        int id = values.define(param.getResult(), false);
        params.push_back(json::Object{{"op", "param"},
                                      {"operands", json::Array()},
                                      {"results", json::Array{id}},
                                      {"name", param.getName()}});
        std::optional<APFloat> scale = param.getScale();
        json::Array shape;
        for (int64_t dim : param.getType().getShape())
          shape.push_back(dim);
        json::Object spec{{"name", param.getName()},
                          {"shape", std::move(shape)},
                          {"init", stringifyInitKind(param.getInit())},
                          {"scale", scale ? scale->convertToDouble() : 1.0},
                          {"stage", int64_t(stage.getIndex())}};
        if (param.getFrozen())
          spec["frozen"] = true;
        out.params.push_back(std::move(spec));
        continue;
      }
      forwardIndex[&op] = forward.size();
      if (failed(emitOp(&op, values, forward, /*defineResults=*/true)))
        return failure();
    }
    for (auto [result, yielded] : llvm::zip(
             layer.getResults(), layerBody.getTerminator()->getOperands()))
      values.alias(result, *values.lookup(layer, yielded));
  }
  auto yield = cast<YieldOp>(body.getTerminator());
  json::Array outputs;
  int loss = -1;
  if (isLast) {
    loss = *values.lookup(yield, yield.getValues()[0]);
  } else {
    for (Value value : yield.getValues())
      outputs.push_back(*values.lookup(yield, value));
  }

  // Backward: inputs share the forward's ids; each recompute op is the
  // forward op it copies again (same ids); gradient values are numbered
  // after.
  Block &backBody = backward.getBody().front();
  for (auto [argument, forwardArg] :
       llvm::zip(backBody.getArguments(), body.getArguments()))
    values.alias(argument, *values.lookup(backward, forwardArg));
  json::Array outputGrads;
  for (BlockArgument grad :
       backBody.getArguments().drop_front(body.getNumArguments()))
    outputGrads.push_back(values.define(grad, true));
  FailureOr<llvm::DenseMap<Operation *, Operation *>> copies =
      matchRecomputeCopies(stage, backward);
  if (failed(copies))
    return failure();
  llvm::DenseSet<Operation *> rerun = rerunRecomputes(backward, *copies);

  json::Array grads;
  std::vector<size_t> recomputed; // indices into `forward`, in order
  std::optional<int64_t> weightsFrom;
  const bool split = isSplitBackward(backward);
  for (Operation &op : backBody.without_terminator()) {
    // W ops follow B's (SplitBackward.h): the first one starts W.
    if (split && isWeightsOp(&op) && !weightsFrom)
      weightsFrom = int64_t(grads.size());
    if (Operation *original = copies->lookup(&op)) {
      for (auto [copy, forwardResult] :
           llvm::zip(op.getResults(), original->getResults()))
        values.alias(copy, *values.lookup(original, forwardResult));
      if (!isa<ParamOp>(original) && rerun.contains(&op))
        recomputed.push_back(forwardIndex.lookup(original));
      continue;
    }
    if (auto accumulate = dyn_cast<AccumulateGradOp>(op)) {
      grads.push_back(json::Object{
          {"op", "accumulate_grad"},
          {"operands", json::Array{*values.lookup(&op, accumulate.getGrad())}},
          {"results", json::Array()},
          {"name", accumulate.getName()}});
      continue;
    }
    if (failed(emitOp(&op, values, grads, /*defineResults=*/true,
                      split && separatesWeightGradients(&op))))
      return failure();
  }
  json::Array inputGrads;
  for (Value grad : backBody.getTerminator()->getOperands())
    inputGrads.push_back(*values.lookup(backBody.getTerminator(), grad));

  json::Array lossIds;
  if (loss >= 0)
    lossIds.push_back(loss);
  size_t refusedBefore = kernels.refused().size();
  fuseStageKernels(forward, grads, recomputed, weightsFrom,
                   {&outputs, &inputGrads, &lossIds},
                   [&](int64_t id) { return values.info(id); }, kernels);
  if (kernels.refused().size() > refusedBefore)
    return stage.emitOpError() << kernels.refused()[refusedBefore];
  const size_t numGrads = grads.size();
  // The forward's ops the backward reads again, on the same ids; fused as
  // they meet, since a pair of the forward may have lost its second op.
  json::Array recompute;
  for (size_t index : recomputed)
    recompute.push_back(forward[index]);
  markFusions(forward);
  forward.insert(forward.begin(), params.begin(), params.end());
  markFusions(recompute);
  recompute.insert(recompute.begin(), params.begin(), params.end());
  out.stage = json::Object{{"values", values.takeSpecs()},
                           {"inputs", std::move(inputs)},
                           {"outputs", std::move(outputs)},
                           {"loss", loss},
                           {"forward", std::move(forward)},
                           {"recompute", std::move(recompute)},
                           {"backward", std::move(grads)},
                           {"output_grads", std::move(outputGrads)},
                           {"input_grads", std::move(inputGrads)}};
  if (split)
    out.stage["weights_from"] = weightsFrom.value_or(int64_t(numGrads));
  return out;
}

/// The number of programs (devices) of `schedule`: one per stage, or one per
/// virtual_stages stages under interleaving.
static unsigned numDevicesOf(ScheduleOp schedule, ModelOp model) {
  return getStagesCount(model) / schedule.getVirtualStages().value_or(1);
}

static FailureOr<json::Array> emitPrograms(ScheduleOp schedule, ModelOp model) {
  json::Array programs;
  SmallVector<ProgramOp> ordered(numDevicesOf(schedule, model));
  for (ProgramOp program : schedule.getBody().front().getOps<ProgramOp>()) {
    if (program.getDevice() >= ordered.size())
      return program.emitOpError() << "is for a device the model does not have";
    ordered[program.getDevice()] = program;
  }
  for (auto [device, program] : llvm::enumerate(ordered)) {
    if (!program)
      return schedule.emitOpError() << "has no program for device " << device;
    json::Array instrs;
    for (Operation &op : program.getBody().front()) {
      json::Object instr =
          llvm::TypeSwitch<Operation *, json::Object>(&op)
              .Case([](LoadInputOp o) {
                json::Object out{{"op", "load_input"},
                                 {"name", o.getName()},
                                 {"mb", int64_t(o.getMb())}};
                if (o.getStage())
                  out["stage"] = int64_t(*o.getStage());
                return out;
              })
              .Case<ForwardOp, BackwardOp, BackwardWeightsOp>([&](auto o) {
                StageOp stage = model.lookupStage(o.getStage());
                return json::Object{
                    {"op", o->getName().stripDialect()},
                    {"stage", stage ? int64_t(stage.getIndex()) : int64_t(-1)},
                    {"mb", int64_t(o.getMb())}};
              })
              .Case<SendActivationOp, RecvActivationOp, SendGradientOp,
                    RecvGradientOp>([](auto o) {
                json::Object out{{"op", o->getName().stripDialect()},
                                 {"peer", int64_t(o.getPeer())},
                                 {"mb", int64_t(o.getMb())},
                                 {"channel", int64_t(o.getChannel())}};
                if (o.getStage())
                  out["stage"] = int64_t(*o.getStage());
                return out;
              })
              .Case([](OptimizerStepOp) {
                return json::Object{{"op", "optimizer_step"}};
              })
              .Default([](Operation *) { return json::Object(); });
      if (instr.empty())
        return op.emitOpError() << "is not a schedule instruction";
      instrs.push_back(std::move(instr));
    }
    programs.push_back(std::move(instrs));
  }
  return programs;
}

/// The per-device plans of gpipe-plan-memory with every buffer's placement:
/// the runtime takes its buffers from them and plans nothing itself.
static FailureOr<json::Object> emitMemoryPlan(ModelOp model,
                                              ScheduleOp schedule) {
  SmallVector<ProgramOp> programs(numDevicesOf(schedule, model));
  for (ProgramOp program : schedule.getBody().front().getOps<ProgramOp>())
    if (program.getDevice() < programs.size())
      programs[program.getDevice()] = program;
  json::Array devices;
  std::optional<int64_t> slots;
  for (auto [device, program] : llvm::enumerate(programs)) {
    if (!program)
      return schedule.emitOpError() << "has no gpipe.program for device "
                                    << device << " of " << programs.size();
    auto plan = program->getAttrOfType<DictionaryAttr>("gpipe.memory");
    if (!plan)
      return program.emitOpError()
             << "has no gpipe.memory plan; run gpipe-plan-memory first "
                "(gpipe-compile does): the runtime places buffers only where "
                "the compiler planned them";
    auto get = [&](StringRef key) -> std::optional<int64_t> {
      auto value = plan.getAs<IntegerAttr>(key);
      return value ? std::optional<int64_t>(value.getInt()) : std::nullopt;
    };
    std::optional<int64_t> resident = get("resident_bytes"),
                           peak = get("peak_bytes"), arena = get("arena_bytes"),
                           count = get("num_buffers");
    slots = get("optimizer_slots");
    if (!resident || !peak || !arena || !slots || !count)
      return program.emitOpError()
             << "has a gpipe.memory plan without resident_bytes, peak_bytes, "
                "arena_bytes, num_buffers and optimizer_slots";
    auto placement =
        program->getAttrOfType<DenseI64ArrayAttr>("gpipe.placement");
    if (!placement)
      return program.emitOpError()
             << "has " << *count << " buffers, more than the "
             << kMaxPlacedBuffers
             << " whose placement a bundle carries per device; use more "
                "stages or fewer micro-batches";
    ArrayRef<int64_t> words = placement.asArrayRef();
    if (words.size() != size_t(*count) * kPlacedBufferWords)
      return program.emitOpError()
             << "has a gpipe.placement of " << words.size()
             << " words, expected " << kPlacedBufferWords << " for each of its "
             << *count << " buffers";
    json::Array buffers;
    for (size_t i = 0; i < words.size(); i += kPlacedBufferWords)
      buffers.push_back(
          json::Array(llvm::ArrayRef(words.data() + i, kPlacedBufferWords)));
    devices.push_back(json::Object{{"resident_bytes", *resident},
                                   {"peak_bytes", *peak},
                                   {"arena_bytes", *arena},
                                   {"buffers", std::move(buffers)}});
  }
  return json::Object{{"optimizer_slots", slots.value_or(0)},
                      {"devices", std::move(devices)}};
}

unsigned gpipe::getStagesCount(ModelOp model) {
  return llvm::range_size(model.getBody().front().getOps<StageOp>());
}

/// The model's weights file as the bundle names it: absolute when the model
/// text came from a file (`sourcePath`), as written otherwise.
static std::string weightsPath(ModelOp model, StringRef sourcePath) {
  StringRef weights = model.getWeightsFile();
  if (weights.empty() || llvm::sys::path::is_absolute(weights) ||
      sourcePath.empty() || sourcePath == "<stdin>")
    return weights.str();
  // The runtime may run elsewhere: no path relative to this directory. A
  // source that names no directory (a buffer's name) resolves nothing.
  SmallString<256> path, directory = llvm::sys::path::parent_path(sourcePath);
  if (directory.empty())
    directory = ".";
  if (llvm::sys::fs::real_path(directory, path))
    return weights.str();
  llvm::sys::path::append(path, weights);
  llvm::sys::path::remove_dots(path);
  return std::string(path);
}

FailureOr<llvm::json::Value> gpipe::emitBundle(ModelOp model,
                                               ScheduleOp schedule,
                                               StringRef sourcePath,
                                               KernelCodegen codegen,
                                               bool ptx) {
  Block &body = model.getBody().front();
  SmallVector<StageOp> stages = llvm::to_vector(body.getOps<StageOp>());
  if (stages.empty())
    return model.emitOpError() << "has no stages; compile it with "
                                  "gpipe-compile first";
  Value loss = model.getReturnOp().getLoss();

  json::Array inputs;
  for (InputOp input : body.getOps<InputOp>()) {
    auto type = cast<RankedTensorType>(input.getType());
    Type element = type.getElementType();
    StringRef typeName;
    if (element.isF32())
      typeName = "f32";
    else if (element.isInteger(32))
      typeName = "i32";
    else
      return input.emitOpError()
             << "has element type " << element
             << "; the runtime reads f32 data and i32 ids or labels";
    json::Array shape;
    for (int64_t dim : type.getShape())
      shape.push_back(dim);
    inputs.push_back(json::Object{{"name", input.getName()},
                                  {"shape", std::move(shape)},
                                  {"type", typeName}});
  }

  json::Array stageObjects, params;
  std::optional<StringRef> remat;
  KernelTable kernels(codegen == KernelCodegen::Native);
  for (StageOp stage : stages) {
    StageBackwardOp backward;
    for (StageBackwardOp candidate : body.getOps<StageBackwardOp>())
      if (candidate.getStage() == stage.getSymName())
        backward = candidate;
    if (!backward)
      return stage.emitOpError() << "has no gpipe.stage_backward; run "
                                    "gpipe-differentiate first";
    StringRef policy = backward.getRemat().value_or("full");
    if (remat && *remat != policy)
      return backward.emitOpError()
             << "uses remat policy '" << policy << "' but another stage uses '"
             << *remat << "'; a bundle has one policy";
    remat = policy;
    FailureOr<StageEmission> emitted =
        emitStage(stage, backward, loss.getDefiningOp() == stage,
                  model.getBatch(), kernels);
    if (failed(emitted))
      return failure();
    stageObjects.push_back(std::move(emitted->stage));
    for (json::Value &param : emitted->params)
      params.push_back(std::move(param));
  }

  FailureOr<json::Array> programs = emitPrograms(schedule, model);
  if (failed(programs))
    return failure();
  json::Array rows;
  for (int64_t count : schedule.getRows())
    rows.push_back(count);
  json::Object bundle{{"format", "gpipe-bundle"},
                      {"version", runtime::kBundleFormatVersion},
                      {"model", model.getSymName()},
                      {"batch", int64_t(model.getBatch())},
                      {"microbatch_rows", std::move(rows)},
                      {"remat", *remat},
                      {"inputs", std::move(inputs)},
                      {"params", std::move(params)},
                      {"stages", std::move(stageObjects)},
                      {"programs", std::move(*programs)}};
  FailureOr<json::Object> plan = emitMemoryPlan(model, schedule);
  if (failed(plan))
    return failure();
  bundle["memory_plan"] = std::move(*plan);
  std::string weights = weightsPath(model, sourcePath);
  if (!weights.empty())
    bundle["weights"] = std::move(weights);
  if (!kernels.kernels().empty()) {
    FailureOr<std::vector<NativeCodeVariant>> code =
        compileNativeKernels(kernels.kernels(), model.getLoc());
    if (failed(code))
      return failure();
    json::Array cpu;
    for (NativeCodeVariant &variant : *code)
      cpu.push_back(
          json::Object{{"isa", variant.isa},
                       {"elf", llvm::encodeBase64(variant.sharedObject)}});
    json::Object section{{"kernels", kernels.describe()},
                         {"cpu", std::move(cpu)}};
    if (ptx) {
      FailureOr<std::string> text =
          compilePtxKernels(kernels.kernels(), kDefaultPtxChip, model.getLoc());
      if (failed(text))
        return failure();
      section["cuda"] = json::Object{{"arch", kDefaultPtxChip},
                                     {"ptx", std::move(*text)}};
    }
    bundle["code"] = std::move(section);
  }
  return json::Value(std::move(bundle));
}

LogicalResult gpipe::translateModuleToBundle(ModuleOp module,
                                             llvm::raw_ostream &os,
                                             StringRef sourcePath,
                                             KernelCodegen codegen, bool ptx) {
  auto schedules = llvm::to_vector(module.getOps<ScheduleOp>());
  if (schedules.size() != 1)
    return module.emitError()
           << "expects exactly one gpipe.schedule to write as a bundle, found "
           << schedules.size() << "; compile the model with gpipe-compile";
  ScheduleOp schedule = schedules.front();
  auto model = SymbolTable::lookupNearestSymbolFrom<ModelOp>(
      schedule, schedule.getModelAttr());
  if (!model)
    return schedule.emitOpError() << "refers to " << schedule.getModelAttr()
                                  << ", which is not a gpipe.model";
  // A schedule edited after gpipe-compile may no longer be sound: it is
  // proven again, so that no bundle that could hang is written.
  if (failed(verifyUnrolledSchedule(schedule)))
    return failure();
  FailureOr<json::Value> bundle =
      emitBundle(model, schedule, sourcePath, codegen, ptx);
  if (failed(bundle))
    return failure();
  std::string text = llvm::formatv("{0:2}", *bundle).str();
  os << runtime::sealBundleText(text);
  return success();
}

void gpipe::registerToBundleTranslation() {
  // gpipe-compile's codegen option, for a model compiled by gpipe-opt; only
  // the tools that register the translation have the flag.
  static llvm::cl::opt<KernelCodegen> translateCodegen(
      "gpipe-codegen",
      llvm::cl::desc("with --gpipe-to-bundle: what runs the element-wise ops"),
      llvm::cl::init(KernelCodegen::None),
      llvm::cl::values(
          clEnumValN(KernelCodegen::None, "none",
                     "the runtime's library kernels"),
          clEnumValN(KernelCodegen::Native, "native",
                     "kernels generated for each run of element-wise ops")));
  // gpipe-compile's ptx option.
  static llvm::cl::opt<bool> translatePtx(
      "gpipe-ptx",
      llvm::cl::desc("with --gpipe-to-bundle: also write the generated "
                     "kernels as PTX for CUDA (sm_90), code.cuda"),
      llvm::cl::init(false));
  // Parses the input itself (rather than through TranslateFromMLIR) to know
  // the input file, against which a relative weights path is resolved.
  TranslateRegistration registration(
      "gpipe-to-bundle", "write a compiled gpipe model as a program bundle",
      [](const std::shared_ptr<llvm::SourceMgr> &sourceMgr,
         llvm::raw_ostream &os, MLIRContext *context) -> LogicalResult {
        DialectRegistry registry;
        registry.insert<GPipeDialect>();
        context->appendDialectRegistry(registry);
        OwningOpRef<ModuleOp> module =
            parseSourceFile<ModuleOp>(sourceMgr, ParserConfig(context));
        if (!module)
          return failure();
        StringRef source =
            sourceMgr->getMemoryBuffer(sourceMgr->getMainFileID())
                ->getBufferIdentifier();
        // --split-input-file names each chunk "within split at FILE:LINE
        // offset ".
        if (source.consume_front("within split at "))
          source = source.take_front(source.rfind(':'));
        return translateModuleToBundle(*module, os, source,
                                       translateCodegen.getValue(),
                                       translatePtx.getValue());
      });
}
