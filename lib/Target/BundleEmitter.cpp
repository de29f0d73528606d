//===- BundleEmitter.cpp - Write a compiled model as a program bundle -----===//
//
// Flattens each stage's layers into one op list over numbered values, pairs
// the stage backward's recompute ops with the forward ops they copy (same
// value ids; RecomputeCopies.h), numbers the gradient values after them (the
// values and ops as BundleOps.cpp writes them), and copies the schedule
// (BundleSchedule.cpp). The JSON layout is docs/BundleFormat.md.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Target/BundleEmitter.h"

#include "BundleOps.h"
#include "BundleSchedule.h"

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
using namespace gpipe::bundle_detail;
namespace json = llvm::json;

/// Marks the pairs of chooseLibraryFusions with `fuse`.
static void markFusions(json::Array &ops) {
  std::vector<runtime::FusionKind> fusions = chooseLibraryFusions(ops);
  for (size_t i = 0; i < ops.size(); ++i)
    if (fusions[i] != runtime::FusionKind::None)
      (*ops[i].getAsObject())["fuse"] = runtime::fusionName(fusions[i]);
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
        if (std::optional<StringRef> tied = param.getTied())
          spec["tied"] = *tied;
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
  if (std::optional<uint64_t> window = schedule.getSendWindow())
    bundle["send_window"] = int64_t(*window);
  if (auto precision =
          model->getAttrOfType<StringAttr>(ModelOp::kPrecisionAttrName))
    bundle["precision"] = precision.getValue().str();
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
