//===- GPipeOps.cpp - gpipe op verifiers ----------------------------------===//
//
// Every verifier names what it expected and what it found.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"
#include "OpVerification.h"
#include "gpipe/runtime/bundle/Precision.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"

#include <tuple>

using namespace mlir;
using namespace gpipe;
using namespace gpipe::detail;

//===----------------------------------------------------------------------===//
// Shared checks
//===----------------------------------------------------------------------===//

static RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// Checks that each named value has the element type of `reference`.
static LogicalResult
verifySameElementType(Operation *op, Type reference,
                      ArrayRef<std::pair<StringRef, Value>> values) {
  for (auto [what, value] : values) {
    if (!value)
      continue;
    Type element = tensorType(value).getElementType();
    if (element != reference)
      return op->emitOpError() << "expects the " << what
                               << " to have element type " << reference
                               << ", got " << element;
  }
  return success();
}

LogicalResult gpipe::detail::verifyResultShape(Operation *op, Type expected,
                                               Type actual) {
  if (expected != actual)
    return op->emitOpError()
           << "expects result type " << expected << ", got " << actual;
  return success();
}

/// The bias of a weighted op (dense, conv2d), if any, is [features] and the
/// weight, bias and result have the input's element type.
LogicalResult gpipe::detail::verifyBiasAndTypes(Operation *op, Value input,
                                                Value weight, Value bias,
                                                Value result,
                                                int64_t features) {
  if (bias) {
    RankedTensorType biasType = tensorType(bias);
    if (biasType.getRank() != 1 || biasType.getDimSize(0) != features)
      return op->emitOpError() << "expects a bias of shape [" << features
                               << "], got " << biasType;
  }
  return verifySameElementType(
      op, tensorType(input).getElementType(),
      {{"weight", weight}, {"bias", bias}, {"result", result}});
}

LogicalResult gpipe::detail::verifyAttentionBiases(Operation *op, Value qkvBias,
                                                   Value outBias, int64_t width,
                                                   Type elementType) {
  if (!qkvBias != !outBias)
    return op->emitOpError()
           << "expects qkv_bias and out_bias together, got only "
           << (qkvBias ? "qkv_bias" : "out_bias");
  if (!qkvBias)
    return success();
  for (auto [what, bias, size] :
       {std::tuple<StringRef, Value, int64_t>{"qkv_bias", qkvBias, 3 * width},
        {"out_bias", outBias, width}}) {
    RankedTensorType type = tensorType(bias);
    if (type.getRank() != 1 || type.getDimSize(0) != size)
      return op->emitOpError() << "expects " << what << " of shape [" << size
                               << "], got " << type;
  }
  return verifySameElementType(op, elementType,
                               {{"qkv_bias", qkvBias}, {"out_bias", outBias}});
}

/// Every size the compiler and the runtime derive from a tensor (element
/// and byte counts, costs) fits in int64 only if the tensor's bytes do: a
/// dimension of 0 or a byte count of 2^63 or more is refused here, before
/// any pass multiplies by it.
static LogicalResult verifyTensorSize(Operation *op, Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return success();
  Type element = tensor.getElementType();
  int64_t bytes =
      element.isIntOrFloat()
          ? std::max<int64_t>(1, (element.getIntOrFloatBitWidth() + 7) / 8)
          : 8;
  for (int64_t dim : tensor.getShape()) {
    if (dim < 1)
      return op->emitOpError()
             << "expects every dimension to be at least 1, got " << tensor;
    if (__builtin_mul_overflow(bytes, dim, &bytes))
      return op->emitOpError() << "expects a tensor of fewer than 2^63 bytes, "
                                  "got "
                               << tensor;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Model structure
//===----------------------------------------------------------------------===//

ReturnOp ModelOp::getReturnOp() {
  return dyn_cast<ReturnOp>(getBody().front().getTerminator());
}

StageOp ModelOp::lookupStage(StringRef name) {
  for (StageOp stage : getBody().front().getOps<StageOp>())
    if (stage.getSymName() == name)
      return stage;
  return {};
}

StringRef ModelOp::getWeightsFile() {
  auto weights = (*this)->getAttrOfType<StringAttr>(kWeightsAttrName);
  return weights ? weights.getValue() : StringRef();
}

/// A tied parameter copies one declared before it, in another layer, alike;
/// and that one is tied to none (a parameter's copies share one root).
static LogicalResult verifyTie(ParamOp param,
                               const llvm::StringMap<ParamOp> &earlier) {
  std::optional<StringRef> tied = param.getTied();
  if (!tied)
    return success();
  auto root = earlier.find(*tied);
  if (root == earlier.end())
    return param.emitOpError()
           << "is tied to '" << *tied
           << "', which is not a parameter declared before it";
  ParamOp other = root->second;
  if (other.getTied())
    return param.emitOpError()
           << "is tied to '" << *tied << "', itself tied to '"
           << *other.getTied() << "'; tie it to '" << *other.getTied()
           << "'";
  if (other->getParentOp() == param->getParentOp())
    return param.emitOpError() << "is tied to '" << *tied
                               << "' of the same layer; read that one";
  if (other.getType() != param.getType() ||
      other.getInit() != param.getInit() ||
      other.getScale() != param.getScale() ||
      other.getFrozen() != param.getFrozen())
    return param.emitOpError()
           << "is tied to '" << *tied
           << "', declared otherwise; a tied parameter has the type, "
              "initializer, scale and frozen of the one it copies ("
           << other.getType() << " " << stringifyInitKind(other.getInit())
           << ")";
  return success();
}

LogicalResult ModelOp::verify() {
  Block &body = getBody().front();
  if (body.empty() || !isa<ReturnOp>(body.back()))
    return emitOpError() << "expects its body to end with 'gpipe.return'";

  if (Attribute weights = (*this)->getAttr(kWeightsAttrName)) {
    auto path = dyn_cast<StringAttr>(weights);
    if (!path || path.getValue().empty())
      return emitOpError() << "expects attribute " << kWeightsAttrName
                           << " to be a non-empty string (the weights file), "
                              "got "
                           << weights;
  }

  if (Attribute precision = (*this)->getAttr(kPrecisionAttrName)) {
    auto name = dyn_cast<StringAttr>(precision);
    if (!name || !runtime::parsePrecision(name.getValue().str()))
      return emitOpError() << "expects attribute " << kPrecisionAttrName
                           << " to be \"f32\", \"tf32\" or \"bf16\", got "
                           << precision;
  }

  llvm::StringSet<> inputNames, stageNames, layerNames, paramNames;
  llvm::StringMap<ParamOp> paramsByName;
  Operation *lastComputing = nullptr;
  for (Operation &op : body) {
    if (auto input = dyn_cast<InputOp>(op)) {
      if (!inputNames.insert(input.getName()).second)
        return input.emitOpError()
               << "name '" << input.getName() << "' is used by another input";
    }
    if (auto stage = dyn_cast<StageOp>(op)) {
      if (!stageNames.insert(stage.getSymName()).second)
        return stage.emitOpError() << "name @" << stage.getSymName()
                                   << " is used by another stage";
      // Stage s runs on device s: passes and schedules rely on the index
      // being the stage's position.
      uint64_t position = stageNames.size() - 1;
      if (stage.getIndex() != position)
        return stage.emitOpError()
               << "expects index " << position
               << " (its position among the stages), got " << stage.getIndex();
    }
    if (isa<LayerOp, StageOp>(op))
      lastComputing = &op;
  }
  if (!lastComputing)
    return emitOpError() << "expects at least one 'gpipe.layer'";

  // Layer and parameter names identify them in reports and checkpoints.
  ParamOp firstPretrained;
  WalkResult names = walk([&](Operation *op) {
    for (Type type : op->getResultTypes())
      if (failed(verifyTensorSize(op, type)))
        return WalkResult::interrupt();
    if (auto layer = dyn_cast<LayerOp>(op)) {
      if (!layerNames.insert(layer.getName()).second) {
        layer.emitOpError() << "name '" << layer.getName()
                            << "' is used by another layer";
        return WalkResult::interrupt();
      }
    } else if (auto param = dyn_cast<ParamOp>(op)) {
      if (!paramNames.insert(param.getName()).second) {
        param.emitOpError() << "name '" << param.getName()
                            << "' is used by another parameter";
        return WalkResult::interrupt();
      }
      if (failed(verifyTie(param, paramsByName)))
        return WalkResult::interrupt();
      paramsByName[param.getName()] = param;
      if (!firstPretrained && param.getInit() == InitKind::Pretrained)
        firstPretrained = param;
    }
    return WalkResult::advance();
  });
  if (names.wasInterrupted())
    return failure();
  // The runtime has nowhere else to find the values.
  if (firstPretrained && getWeightsFile().empty())
    return emitOpError() << "parameter '" << firstPretrained.getName()
                         << "' is pretrained, but the model names no weights "
                            "file (attribute "
                         << kWeightsAttrName << ")";

  Value loss = getReturnOp().getLoss();
  if (loss.getDefiningOp() != lastComputing)
    return emitOpError()
           << "expects the returned loss to be a result of the last '"
           << lastComputing->getName() << "' in the body";
  return success();
}

LogicalResult InputOp::verify() {
  if (getName().empty())
    return emitOpError() << "expects a non-empty name";
  auto type = cast<RankedTensorType>(getType());
  auto model = (*this)->getParentOfType<ModelOp>();
  if (!type.hasStaticShape() || type.getRank() == 0 ||
      type.getDimSize(0) != static_cast<int64_t>(model.getBatch()))
    return emitOpError() << "expects a static shape with the batch size "
                         << model.getBatch()
                         << " as leading dimension, got " << type;
  return success();
}

LogicalResult ParamOp::verify() {
  if (getName().empty())
    return emitOpError() << "expects a non-empty name";
  auto type = cast<RankedTensorType>(getType());
  if (!type.hasStaticShape())
    return emitOpError() << "expects a static shape, got " << type;
  if (std::optional<APFloat> scaleAttr = getScale()) {
    double scale = scaleAttr->convertToDouble();
    if (getInit() != InitKind::Normal && getInit() != InitKind::Uniform)
      return emitOpError() << "takes a scale only with the normal or uniform "
                              "initializer, got "
                           << stringifyInitKind(getInit());
    if (!(scale > 0.0))
      return emitOpError() << "expects a positive scale, got " << scale;
  }
  return success();
}

LogicalResult LayerOp::verify() {
  if (getName().empty())
    return emitOpError() << "expects a non-empty name";
  return success();
}

LogicalResult StageOp::verify() {
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError() << "expects " << getInputs().size()
                         << " block arguments matching its inputs, got "
                         << body.getNumArguments();
  for (auto [i, pair] :
       llvm::enumerate(llvm::zip(body.getArgumentTypes(),
                                 getInputs().getTypes()))) {
    auto [argType, inputType] = pair;
    if (argType != inputType)
      return emitOpError() << "expects block argument #" << i
                           << " to have the input's type " << inputType
                           << ", got " << argType;
  }
  return success();
}

LogicalResult YieldOp::verify() {
  Operation *parent = (*this)->getParentOp();
  TypeRange expected = parent->getResultTypes();
  if (auto backward = dyn_cast<StageBackwardOp>(parent))
    expected = backward.getFunctionType().getResults();
  if (getValues().size() != expected.size())
    return emitOpError() << "expects " << expected.size()
                         << (expected.size() == 1 ? " value" : " values")
                         << " matching the results of '" << parent->getName()
                         << "', got " << getValues().size();
  for (auto [i, pair] :
       llvm::enumerate(llvm::zip(getValues().getTypes(), expected))) {
    auto [actual, want] = pair;
    if (actual != want)
      return emitOpError() << "expects value #" << i << " to have type "
                           << want << ", got " << actual;
  }
  return success();
}

/// Channels connect a stage to the next one only.
static LogicalResult verifyChannelEnds(Operation *op, int64_t from,
                                       int64_t to) {
  if (to != from + 1)
    return op->emitOpError()
           << "expects 'to' to be 'from' + 1 (channels connect adjacent "
              "stages), got from "
           << from << " to " << to;
  return success();
}

LogicalResult SendOp::verify() {
  return verifyChannelEnds(*this, getFrom(), getTo());
}

LogicalResult RecvOp::verify() {
  return verifyChannelEnds(*this, getFrom(), getTo());
}

//===----------------------------------------------------------------------===//
// Compute ops
//===----------------------------------------------------------------------===//

LogicalResult DenseOp::verify() {
  RankedTensorType input = tensorType(getInput());
  RankedTensorType weight = tensorType(getWeight());
  if (input.getRank() < 1 || !input.hasStaticShape())
    return emitOpError() << "expects a static input of rank >= 1, got "
                         << input;
  if (weight.getRank() != 2)
    return emitOpError() << "expects a weight of rank 2, got " << weight;
  int64_t inFeatures = input.getShape().back();
  if (weight.getDimSize(0) != inFeatures)
    return emitOpError() << "expects the weight to have " << inFeatures
                         << " rows (the input's last dimension), got "
                         << weight;
  int64_t outFeatures = weight.getDimSize(1);
  if (failed(verifyBiasAndTypes(*this, getInput(), getWeight(), getBias(),
                                getResult(), outFeatures)))
    return failure();
  SmallVector<int64_t> shape(input.getShape());
  shape.back() = outFeatures;
  return verifyResultShape(
      *this, RankedTensorType::get(shape, input.getElementType()),
      getType());
}

LogicalResult LayerNormOp::verify() {
  RankedTensorType input = tensorType(getInput());
  if (input.getRank() < 1)
    return emitOpError() << "expects an input of rank >= 1, got " << input;
  int64_t features = input.getShape().back();
  for (auto [what, value] :
       {std::pair<StringRef, Value>{"gamma", getGamma()}, {"beta", getBeta()}}) {
    RankedTensorType type = tensorType(value);
    if (type.getRank() != 1 || type.getDimSize(0) != features)
      return emitOpError() << "expects " << what << " of shape [" << features
                           << "] (the input's last dimension), got " << type;
  }
  if (!(getEpsilon().convertToDouble() > 0.0))
    return emitOpError() << "expects a positive epsilon, got "
                         << getEpsilon().convertToDouble();
  if (failed(verifySameElementType(*this, input.getElementType(),
                                   {{"gamma", getGamma()},
                                    {"beta", getBeta()}})))
    return failure();
  return verifyResultShape(*this, input, getType());
}

static constexpr const char *kBatchNormOperandNames[] = {
    "the input", "gamma", "beta", "the running mean", "the running variance"};

LogicalResult BatchNormOp::verify() {
  RankedTensorType input = tensorType(getInput());
  if ((input.getRank() != 2 && input.getRank() != 4) || !input.hasStaticShape())
    return emitOpError() << "expects a static input of rank 2 [batch, "
                            "features] or 4 [batch, height, width, channels], "
                            "got "
                         << input;
  const int64_t channels = input.getShape().back();
  for (auto [what, value] : {std::pair<StringRef, Value>{"gamma", getGamma()},
                             {"beta", getBeta()},
                             {"the running mean", getRunningMean()},
                             {"the running variance", getRunningVar()}}) {
    RankedTensorType type = tensorType(value);
    if (type.getRank() != 1 || type.getDimSize(0) != channels)
      return emitOpError() << "expects " << what << " of shape [" << channels
                           << "] (the input's channels), got " << type;
  }
  // The runtime keeps running statistics as parameters the optimizer skips.
  for (auto [what, value] :
       {std::pair<StringRef, Value>{"the running mean", getRunningMean()},
        {"the running variance", getRunningVar()}})
    if (!value.getDefiningOp<ParamOp>() && !value.getDefiningOp<ParamRefOp>())
      return emitOpError()
             << "expects " << what
             << " to be a gpipe.param, got a value defined by "
             << (value.getDefiningOp()
                     ? value.getDefiningOp()->getName().getStringRef()
                     : StringRef("a block argument"));
  // The runtime keeps the statistics' sums in their gradient buffers, so no
  // other read may give them a gradient, and no other batch norm may update
  // them (FuzzCompile found the runtime refusing such a bundle).
  for (auto [what, index] :
       {std::pair<StringRef, unsigned>{"the running mean", 3},
        {"the running variance", 4}})
    for (OpOperand &use : getOperand(index).getUses()) {
      if (use.getOwner() == getOperation() && use.getOperandNumber() == index)
        continue;
      InFlightDiagnostic diag = emitOpError()
                                << "expects " << what
                                << " to be read by nothing else (its parameter "
                                   "holds running statistics, which have no "
                                   "gradient), but it is also ";
      if (use.getOwner() == getOperation())
        diag << "this op's operand " << use.getOperandNumber() << " ("
             << kBatchNormOperandNames[use.getOperandNumber()] << ")";
      else
        diag << "read by " << use.getOwner()->getName();
      return diag;
    }
  if (!(getEpsilon().convertToDouble() > 0.0))
    return emitOpError() << "expects a positive epsilon, got "
                         << getEpsilon().convertToDouble();
  const double momentum = getMomentum().convertToDouble();
  if (!(momentum >= 0.0 && momentum <= 1.0))
    return emitOpError() << "expects a momentum in [0, 1], got " << momentum;
  if (failed(verifySameElementType(*this, input.getElementType(),
                                   {{"gamma", getGamma()},
                                    {"beta", getBeta()},
                                    {"running mean", getRunningMean()},
                                    {"running variance", getRunningVar()}})))
    return failure();
  return verifyResultShape(*this, input, getType());
}

LogicalResult EmbeddingOp::verify() {
  RankedTensorType ids = tensorType(getIds());
  RankedTensorType table = tensorType(getTable());
  if (table.getRank() != 2)
    return emitOpError() << "expects a table of rank 2 [vocabulary, width], got "
                         << table;
  SmallVector<int64_t> shape(ids.getShape());
  shape.push_back(table.getDimSize(1));
  return verifyResultShape(
      *this, RankedTensorType::get(shape, table.getElementType()), getType());
}

LogicalResult AttentionOp::verify() {
  RankedTensorType input = tensorType(getInput());
  // A dynamic width would make the weight checks below compare against
  // ShapedType::kDynamic (and overflow computing 3 * width).
  if (input.getRank() != 3 || !input.hasStaticShape())
    return emitOpError() << "expects a static input of rank 3 [batch, "
                            "sequence, width], got "
                         << input;
  int64_t width = input.getDimSize(2);
  auto expectWeight = [&](StringRef what, Value value,
                          int64_t cols) -> LogicalResult {
    RankedTensorType type = tensorType(value);
    if (type.getRank() != 2 || type.getDimSize(0) != width ||
        type.getDimSize(1) != cols)
      return emitOpError() << "expects " << what << " of shape [" << width
                           << ", " << cols << "], got " << type;
    return success();
  };
  if (failed(expectWeight("qkv_weight", getQkvWeight(), 3 * width)) ||
      failed(expectWeight("out_weight", getOutWeight(), width)))
    return failure();
  if (width % getHeads() != 0)
    return emitOpError() << "expects the number of heads to divide the width "
                         << width << ", got " << getHeads() << " heads";
  if (failed(verifySameElementType(
          *this, input.getElementType(),
          {{"qkv_weight", getQkvWeight()}, {"out_weight", getOutWeight()}})) ||
      failed(verifyAttentionBiases(*this, getQkvBias(), getOutBias(), width,
                                   input.getElementType())))
    return failure();
  return verifyResultShape(*this, input, getType());
}

LogicalResult DropoutOp::verify() {
  double rate = getRate().convertToDouble();
  if (!(rate >= 0.0 && rate < 1.0))
    return emitOpError() << "expects a rate in [0, 1), got " << rate;
  return success();
}

LogicalResult SoftmaxCrossEntropyOp::verify() {
  RankedTensorType logits = tensorType(getLogits());
  RankedTensorType labels = tensorType(getLabels());
  if (logits.getRank() < 1)
    return emitOpError() << "expects logits of rank >= 1, got " << logits;
  if (labels.getShape() != logits.getShape().drop_back())
    return emitOpError()
           << "expects labels of the logits' shape without the class "
              "dimension, got "
           << labels << " for logits " << logits;
  return verifySameElementType(*this, logits.getElementType(),
                               {{"result", getResult()}});
}

LogicalResult MseLossOp::verify() {
  if (getPrediction().getType() != getTarget().getType())
    return emitOpError() << "expects the target to have the prediction's type "
                         << getPrediction().getType() << ", got "
                         << getTarget().getType();
  return verifySameElementType(
      *this, tensorType(getPrediction()).getElementType(),
      {{"result", getResult()}});
}

//===----------------------------------------------------------------------===//
// Schedule
//===----------------------------------------------------------------------===//

LogicalResult ScheduleOp::verify() {
  ArrayRef<int64_t> rows = getRows();
  if (rows.size() != getMicrobatches())
    return emitOpError() << "expects " << getMicrobatches()
                         << " micro-batch row counts, got " << rows.size();
  for (auto [i, count] : llvm::enumerate(rows))
    if (count <= 0)
      return emitOpError() << "expects a positive row count for micro-batch "
                           << i << ", got " << count;
  return success();
}

// After the programs and instructions passed their own verifiers. Devices,
// micro-batches, channels and peers are 32-bit indices past the IR (the
// schedule analysis, the memory planner, the bundle): bound them here, so
// that no later stage truncates one into another valid index.
LogicalResult ScheduleOp::verifyRegions() {
  const uint64_t numMicrobatches = getMicrobatches();
  for (ProgramOp program : getBody().front().getOps<ProgramOp>()) {
    if (program.getDevice() > UINT32_MAX)
      return program.emitOpError()
             << "expects a device below 2^32, got " << program.getDevice();
    for (Operation &instr : program.getBody().front()) {
      if (auto mb = instr.getAttrOfType<IntegerAttr>("mb");
          mb && mb.getValue().getZExtValue() >= numMicrobatches)
        return instr.emitOpError()
               << "names micro-batch " << mb.getValue().getZExtValue()
               << ", but the schedule has " << numMicrobatches
               << " micro-batches (0 to " << numMicrobatches - 1 << ")";
      for (StringRef name : {"peer", "channel"})
        if (auto index = instr.getAttrOfType<IntegerAttr>(name);
            index && index.getValue().getZExtValue() > UINT32_MAX)
          return instr.emitOpError()
                 << "expects a " << name << " below 2^32, got "
                 << index.getValue().getZExtValue();
    }
  }
  return success();
}

#define GET_OP_CLASSES
#include "gpipe/Dialect/GPipe/IR/GPipeOps.cpp.inc"

LogicalResult MatmulOp::verify() {
  auto lhs = cast<RankedTensorType>(getLhs().getType());
  auto rhs = cast<RankedTensorType>(getRhs().getType());
  auto result = cast<RankedTensorType>(getResult().getType());
  if (lhs.getRank() < 2 || rhs.getRank() < 2)
    return emitOpError() << "expects operands of rank >= 2 (batch dimensions, "
                            "then a matrix), got "
                         << lhs << " and " << rhs;
  auto matrix = [](RankedTensorType type, bool transposed) {
    int64_t rows = type.getDimSize(type.getRank() - 2),
            cols = type.getDimSize(type.getRank() - 1);
    return transposed ? std::pair(cols, rows) : std::pair(rows, cols);
  };
  auto [m, k] = matrix(lhs, getTransposeLhs());
  auto [k2, n] = matrix(rhs, getTransposeRhs());
  if (k != k2)
    return emitOpError() << "expects the lhs's columns (" << k
                         << ") to equal the rhs's rows (" << k2
                         << ") after the transposes, got " << lhs << " and "
                         << rhs;
  ArrayRef<int64_t> a = lhs.getShape().drop_back(2),
                    b = rhs.getShape().drop_back(2);
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> shape;
  for (size_t d = 0; d < rank; ++d) {
    int64_t x = d < rank - a.size() ? 1 : a[d - (rank - a.size())];
    int64_t y = d < rank - b.size() ? 1 : b[d - (rank - b.size())];
    if (x != y && x != 1 && y != 1)
      return emitOpError() << "expects batch dimensions that broadcast, got "
                           << lhs << " and " << rhs;
    shape.push_back(std::max(x, y));
  }
  shape.append({m, n});
  auto expected = RankedTensorType::get(shape, lhs.getElementType());
  if (result != expected || rhs.getElementType() != lhs.getElementType())
    return emitOpError() << "expects result type " << expected << ", got "
                         << result;
  return success();
}
