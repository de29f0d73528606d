//===- GPipeImageOps.cpp - Verifiers of the ops over NHWC images ----------===//
//
// conv2d, the pools, global average pooling, flatten and their gradients:
// the shapes of all of them follow from one window geometry, checked here
// once (verifyWindow) with messages that name what was expected.
//
//===----------------------------------------------------------------------===//

#include "OpVerification.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"

using namespace mlir;
using namespace gpipe;
using namespace gpipe::detail;

static RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

static LogicalResult verifyImage(Operation *op, RankedTensorType type,
                                 StringRef what) {
  if (type.getRank() != 4 || !type.hasStaticShape())
    return op->emitOpError() << "expects a static " << what
                             << " of rank 4 [batch, height, width, "
                                "channels], got "
                             << type;
  return success();
}

namespace {
/// What slides over an image: conv2d's kernel or a pool's window.
struct Window {
  StringRef noun;            ///< "kernel", "window"
  ArrayRef<int64_t> size;    ///< [KH, KW]
  ArrayRef<int64_t> stride;  ///< [SH, SW]
  ArrayRef<int64_t> padding; ///< [PH, PW]
  /// The pools: padding below the window, so every window sees the image.
  bool paddingBelowSize = false;
};
} // namespace

/// Checks `window` over the image `input` and gives the output type
/// [N, OH, OW, channels].
static FailureOr<RankedTensorType> verifyWindow(Operation *op,
                                                RankedTensorType input,
                                                const Window &window,
                                                int64_t channels) {
  auto pair = [&](StringRef what, ArrayRef<int64_t> values,
                  int64_t minimum) -> LogicalResult {
    if (values.size() == 2 && values[0] >= minimum && values[1] >= minimum)
      return success();
    return op->emitOpError()
           << "expects a " << what << " of 2 values >= " << minimum
           << " [rows, columns], got [" << values << "]";
  };
  if (failed(pair(window.noun, window.size, 1)) ||
      failed(pair("stride", window.stride, 1)) ||
      failed(pair("padding", window.padding, 0)))
    return failure();
  int64_t out[2];
  for (int axis = 0; axis < 2; ++axis) {
    const int64_t size = input.getDimSize(1 + axis);
    const int64_t kernel = window.size[axis];
    const int64_t pad = window.padding[axis];
    const int64_t padded = size + 2 * pad;
    if (window.paddingBelowSize && pad >= kernel)
      return op->emitOpError()
             << "expects padding smaller than the " << window.noun << " ("
             << kernel << "), got " << pad;
    if (kernel > padded)
      return op->emitOpError()
             << "expects a " << window.noun << " of at most the padded input's "
             << (axis == 0 ? "height " : "width ") << padded << " (" << size
             << " + 2 x " << pad << "), got " << kernel;
    out[axis] = (padded - kernel) / window.stride[axis] + 1;
  }
  return RankedTensorType::get({input.getDimSize(0), out[0], out[1], channels},
                               input.getElementType());
}

/// The checks of conv2d and conv2d_grad on their input and HWIO weight:
/// the forward's result type.
static FailureOr<RankedTensorType>
verifyConv(Operation *op, RankedTensorType input, RankedTensorType weight,
           ArrayRef<int64_t> stride, ArrayRef<int64_t> padding,
           int64_t groups) {
  if (failed(verifyImage(op, input, "input")))
    return failure();
  if (weight.getRank() != 4 || !weight.hasStaticShape())
    return op->emitOpError() << "expects a static weight of rank 4 [kernel "
                                "height, kernel width, channels / groups, "
                                "filters], got "
                             << weight;
  const int64_t channels = input.getDimSize(3);
  const int64_t filters = weight.getDimSize(3);
  if (channels % groups != 0 || filters % groups != 0)
    return op->emitOpError()
           << "expects " << groups << " groups to divide the input's "
           << channels << " channels and the weight's " << filters
           << " filters";
  if (weight.getDimSize(2) != channels / groups)
    return op->emitOpError()
           << "expects the weight to read " << channels / groups
           << " channels per group (the input's " << channels << " channels in "
           << groups << " groups), got " << weight;
  return verifyWindow(
      op, input, {"kernel", weight.getShape().take_front(2), stride, padding},
      filters);
}

/// A gradient `actual` (its name `what`) must have the type `expected`.
static LogicalResult verifyGradType(Operation *op, StringRef what,
                                    Type expected, Type actual) {
  if (expected != actual)
    return op->emitOpError() << "expects " << what << " of type " << expected
                             << ", got " << actual;
  return success();
}

//===----------------------------------------------------------------------===//
// Forward ops
//===----------------------------------------------------------------------===//

LogicalResult Conv2dOp::verify() {
  FailureOr<RankedTensorType> output =
      verifyConv(*this, tensorType(getInput()), tensorType(getWeight()),
                 getStride(), getPadding(), getGroups());
  if (failed(output))
    return failure();
  if (failed(verifyBiasAndTypes(*this, getInput(), getWeight(), getBias(),
                                getResult(), output->getDimSize(3))))
    return failure();
  return verifyResultShape(*this, *output, getType());
}

/// The checks of a pool or its gradient on the pool's input (`what`): the
/// pooled type.
template <class PoolOrGradOp>
static FailureOr<RankedTensorType>
verifyPoolWindow(PoolOrGradOp op, RankedTensorType input, StringRef what) {
  if (failed(verifyImage(op, input, what)))
    return failure();
  return verifyWindow(
      op, input,
      {"window", op.getWindow(), op.getStride(), op.getPadding(), true},
      input.getDimSize(3));
}

template <class PoolOp> static LogicalResult verifyPool(PoolOp op) {
  FailureOr<RankedTensorType> output =
      verifyPoolWindow(op, tensorType(op.getInput()), "input");
  if (failed(output))
    return failure();
  return verifyResultShape(op, *output, op.getType());
}

LogicalResult MaxPool2dOp::verify() { return verifyPool(*this); }
LogicalResult AvgPool2dOp::verify() { return verifyPool(*this); }

LogicalResult GlobalAvgPoolOp::verify() {
  RankedTensorType input = tensorType(getInput());
  if (failed(verifyImage(*this, input, "input")))
    return failure();
  return verifyResultShape(
      *this,
      RankedTensorType::get({input.getDimSize(0), input.getDimSize(3)},
                            input.getElementType()),
      getType());
}

/// [N, d1 x ... x dk] of `input` [N, d1, ..., dk], or an error.
static FailureOr<RankedTensorType>
flattened(Operation *op, RankedTensorType input, StringRef what) {
  if (input.getRank() < 2 || !input.hasStaticShape())
    return op->emitOpError()
           << "expects a static " << what
           << " of rank 2 or more [batch, ...], got " << input;
  int64_t features = 1;
  for (int64_t dim : input.getShape().drop_front())
    features *= dim;
  return RankedTensorType::get({input.getDimSize(0), features},
                               input.getElementType());
}

LogicalResult FlattenOp::verify() {
  FailureOr<RankedTensorType> output =
      flattened(*this, tensorType(getInput()), "input");
  if (failed(output))
    return failure();
  return verifyResultShape(*this, *output, getType());
}

//===----------------------------------------------------------------------===//
// Gradient ops
//===----------------------------------------------------------------------===//

LogicalResult Conv2dGradOp::verify() {
  FailureOr<RankedTensorType> output =
      verifyConv(*this, tensorType(getInput()), tensorType(getWeight()),
                 getStride(), getPadding(), getGroups());
  if (failed(output) ||
      failed(verifyGradType(*this, "dy", *output, getDy().getType())) ||
      failed(
          verifyGradType(*this, "dx", getInput().getType(), getDx().getType())))
    return failure();
  return verifyGradType(*this, "dw", getWeight().getType(), getDw().getType());
}

/// A pool's gradient: `input` is the forward's input (max_pool2d_grad's
/// operand, avg_pool2d_grad's result).
template <class PoolGradOp>
static LogicalResult verifyPoolGrad(PoolGradOp op, RankedTensorType input,
                                    StringRef what) {
  FailureOr<RankedTensorType> output = verifyPoolWindow(op, input, what);
  if (failed(output))
    return failure();
  return verifyGradType(op, "dy", *output, op.getDy().getType());
}

LogicalResult MaxPool2dGradOp::verify() {
  if (failed(verifyPoolGrad(*this, tensorType(getInput()), "input")))
    return failure();
  return verifyGradType(*this, "dx", getInput().getType(), getDx().getType());
}

LogicalResult AvgPool2dGradOp::verify() {
  return verifyPoolGrad(*this, tensorType(getDx()), "dx");
}

LogicalResult GlobalAvgPoolGradOp::verify() {
  RankedTensorType dx = tensorType(getDx());
  if (failed(verifyImage(*this, dx, "dx")))
    return failure();
  return verifyGradType(
      *this, "dy",
      RankedTensorType::get({dx.getDimSize(0), dx.getDimSize(3)},
                            dx.getElementType()),
      getDy().getType());
}

LogicalResult FlattenGradOp::verify() {
  FailureOr<RankedTensorType> flat =
      flattened(*this, tensorType(getDx()), "dx");
  if (failed(flat))
    return failure();
  return verifyGradType(*this, "dy", *flat, getDy().getType());
}

//===----------------------------------------------------------------------===//
// Attributes for the runtime
//===----------------------------------------------------------------------===//

std::optional<runtime::WindowAttrs> gpipe::getWindowAttrs(Operation *op) {
  runtime::WindowAttrs attrs;
  auto copy = [](ArrayRef<int64_t> from, int64_t(&to)[2]) {
    if (from.size() == 2)
      to[0] = from[0], to[1] = from[1];
  };
  auto conv = [&](auto o) {
    copy(o.getStride(), attrs.stride);
    copy(o.getPadding(), attrs.padding);
    attrs.groups = o.getGroups();
    return attrs;
  };
  auto pool = [&](auto o) {
    copy(o.getWindow(), attrs.window);
    copy(o.getStride(), attrs.stride);
    copy(o.getPadding(), attrs.padding);
    return attrs;
  };
  if (auto o = dyn_cast<Conv2dOp>(op))
    return conv(o);
  if (auto o = dyn_cast<Conv2dGradOp>(op))
    return conv(o);
  if (auto o = dyn_cast<MaxPool2dOp>(op))
    return pool(o);
  if (auto o = dyn_cast<AvgPool2dOp>(op))
    return pool(o);
  if (auto o = dyn_cast<MaxPool2dGradOp>(op))
    return pool(o);
  if (auto o = dyn_cast<AvgPool2dGradOp>(op))
    return pool(o);
  return std::nullopt;
}
