//===- ImageOpValidation.cpp - Shapes of the ops over NHWC images ---------===//
//
// The shape rules of the ops over channels-last activations: conv2d, the
// pools, global average pooling and flatten, whose shapes derive from a
// window's geometry (OpTable.h's WindowGeometry), and batch norm, whose
// channels are the last dimension; with their gradients.
// StageValidation.cpp checks every other op.
//
//===----------------------------------------------------------------------===//

#include "verify/ValidationText.h"
#include "gpipe/runtime/verify/ProgramAnalysis.h"

using namespace gpipe::runtime;
using namespace gpipe::runtime::detail;

namespace {
/// The checks with the operand and result specs of one op at hand.
class ImageOpCheck {
public:
  ImageOpCheck(const Op &op, const StageProgram &stage)
      : op(op), stage(stage), values(stage.values) {}

  std::string run();

private:
  const ValueSpec &operand(size_t i) const { return values[op.operands[i]]; }
  const ValueSpec *result(size_t i) const {
    return op.results[i] < 0 ? nullptr : &values[op.results[i]];
  }
  static std::string shape(const ValueSpec &value, std::vector<int64_t> dims,
                           bool batched, const char *what) {
    if (value.shape != dims)
      return std::string("expects ") + what + " of shape " + shapeString(dims) +
             ", got " + shapeString(value.shape);
    if (value.batched != batched)
      return std::string("expects ") + what + " to be " +
             (batched ? "batched" : "not batched");
    return {};
  }
  static std::string like(const ValueSpec &value, const ValueSpec &of,
                          const char *what) {
    return shape(value, of.shape, of.batched, what);
  }
  static std::string image(const ValueSpec &value, const char *what) {
    if (value.shape.size() != 4 || !value.batched)
      return std::string("expects ") + what +
             " to be a batched image [batch, height, width, channels], got "
             "shape " +
             shapeString(value.shape) + (value.batched ? "" : " not batched");
    return {};
  }
  /// The output of a window that fits its padded input, or why it does not.
  static std::string fits(const WindowGeometry &g) {
    if (g.outHeight > 0 && g.outWidth > 0)
      return {};
    bool rows = g.outHeight == 0;
    return "expects a window of at most the padded input's " +
           std::string(rows ? "height " : "width ") +
           std::to_string(rows ? g.height + 2 * g.padH : g.width + 2 * g.padW) +
           ", got " + std::to_string(rows ? g.kernelH : g.kernelW);
  }
  static std::vector<int64_t> outputOf(const WindowGeometry &g) {
    return {g.batch, g.outHeight, g.outWidth, g.filters};
  }
  std::string f32() const;
  std::string conv();
  std::string pool();
  std::string flatten();
  std::string batchNorm();

  const Op &op;
  const StageProgram &stage;
  const std::vector<ValueSpec> &values;
};
} // namespace

std::string ImageOpCheck::f32() const {
  for (size_t i = 0; i < op.operands.size(); ++i)
    if (operand(i).type != ElementType::F32)
      return "expects operand " + std::to_string(i) + " of type f32, got " +
             typeName(operand(i).type);
  for (size_t i = 0; i < op.results.size(); ++i)
    if (result(i) && result(i)->type != ElementType::F32)
      return "expects result " + std::to_string(i) + " of type f32, got " +
             typeName(result(i)->type);
  return {};
}

#define CHECK(expr)                                                            \
  if (std::string error = (expr); !error.empty())                              \
    return error;

std::string ImageOpCheck::conv() {
  // conv2d: (x, w[, b]) -> y; conv2d_grad: (dy, x, w) -> (dx, dw).
  const bool grad = op.kind == OpKind::Conv2dGrad;
  const ValueSpec &x = operand(grad ? 1 : 0), &w = operand(grad ? 2 : 1);
  CHECK(image(x, "an input"));
  if (w.shape.size() != 4 || w.batched)
    return "expects a weight of rank 4 [kernel height, kernel width, "
           "channels / groups, filters], got shape " +
           shapeString(w.shape);
  WindowGeometry g = convGeometryOf(x.shape.data(), w.shape.data(), op.window);
  if (g.channels % g.groups != 0 || g.filters % g.groups != 0)
    return "expects " + std::to_string(g.groups) +
           " groups to divide the input's " + std::to_string(g.channels) +
           " channels and the weight's " + std::to_string(g.filters) +
           " filters";
  if (w.shape[2] != g.channels / g.groups)
    return "expects a weight reading " + std::to_string(g.channels / g.groups) +
           " channels per group, got shape " + shapeString(w.shape);
  CHECK(fits(g));
  if (!grad) {
    if (op.operands.size() == 3)
      CHECK(shape(operand(2), {g.filters}, false, "a bias"));
    return shape(*result(0), outputOf(g), true, "the result");
  }
  CHECK(shape(operand(0), outputOf(g), true, "dy"));
  if (result(0))
    CHECK(like(*result(0), x, "dx"));
  return result(1) ? like(*result(1), w, "dw") : std::string();
}

std::string ImageOpCheck::pool() {
  // The forwards and max_pool2d_grad read x; avg_pool2d_grad's result is
  // shaped as x.
  const bool avgGrad = op.kind == OpKind::AvgPool2dGrad;
  const bool maxGrad = op.kind == OpKind::MaxPool2dGrad;
  const ValueSpec &x = avgGrad ? *result(0) : operand(maxGrad ? 1 : 0);
  CHECK(image(x, avgGrad ? "the result" : "an input"));
  for (int axis = 0; axis < 2; ++axis)
    if (op.window.padding[axis] >= op.window.window[axis])
      return "expects padding smaller than the window, got padding " +
             std::to_string(op.window.padding[axis]) + " for a window of " +
             std::to_string(op.window.window[axis]);
  WindowGeometry g = poolGeometryOf(x.shape.data(), op.window);
  CHECK(fits(g));
  if (op.kind == OpKind::MaxPool2d || op.kind == OpKind::AvgPool2d)
    return shape(*result(0), outputOf(g), true, "the result");
  CHECK(shape(operand(0), outputOf(g), true, "dy"));
  return maxGrad ? like(*result(0), x, "the result") : std::string();
}

std::string ImageOpCheck::flatten() {
  // flatten: x -> y; flatten_grad: dy -> dx shaped as x.
  const bool grad = op.kind == OpKind::FlattenGrad;
  const ValueSpec &x = grad ? *result(0) : operand(0);
  const ValueSpec &y = grad ? operand(0) : *result(0);
  if (x.shape.size() < 2 || !x.batched)
    return std::string("expects ") + (grad ? "the result" : "an input") +
           " batched of rank 2 or more, got shape " + shapeString(x.shape);
  std::vector<int64_t> flat = {x.shape[0], product(x.shape) / x.shape[0]};
  return shape(y, flat, true, grad ? "dy" : "the result");
}

std::string ImageOpCheck::batchNorm() {
  // (x, gamma, beta, running mean, running var) -> y;
  // (dy, forward y, x, gamma) -> (dx, dgamma, dbeta).
  const bool grad = op.kind == OpKind::BatchNormGrad;
  const ValueSpec &x = operand(grad ? 2 : 0);
  if ((x.shape.size() != 2 && x.shape.size() != 4) || !x.batched)
    return "expects a batched input [batch, features] or [batch, height, "
           "width, channels], got shape " +
           shapeString(x.shape) + (x.batched ? "" : " not batched");
  const int64_t channels = x.shape.back();
  CHECK(shape(operand(grad ? 3 : 1), {channels}, false, "gamma"));
  if (grad) {
    CHECK(like(operand(0), x, "dy"));
    CHECK(like(operand(1), x, "the forward result"));
    if (result(0))
      CHECK(like(*result(0), x, "dx"));
    if (result(1))
      CHECK(like(*result(1), operand(3), "dgamma"));
    return result(2) ? like(*result(2), operand(3), "dbeta") : std::string();
  }
  CHECK(shape(operand(2), {channels}, false, "beta"));
  const char *running[] = {"the running mean", "the running variance"};
  for (int k = 0; k < 2; ++k) {
    CHECK(shape(operand(3 + k), {channels}, false, running[k]));
    if (paramDefining(stage, op.operands[3 + k]).empty())
      return std::string("expects ") + running[k] +
             " to be a parameter (a param op's result), got value " +
             std::to_string(op.operands[3 + k]);
  }
  if (!(op.epsilon > 0.0f))
    return "expects a positive epsilon, got " + std::to_string(op.epsilon);
  if (!(op.momentum >= 0.0f && op.momentum <= 1.0f))
    return "expects a momentum in [0, 1], got " + std::to_string(op.momentum);
  return like(*result(0), x, "the result");
}

std::string ImageOpCheck::run() {
  CHECK(f32());
  switch (op.kind) {
  case OpKind::Conv2d:
  case OpKind::Conv2dGrad:
    return conv();
  case OpKind::MaxPool2d:
  case OpKind::AvgPool2d:
  case OpKind::MaxPool2dGrad:
  case OpKind::AvgPool2dGrad:
    return pool();
  case OpKind::GlobalAvgPool:
  case OpKind::GlobalAvgPoolGrad: {
    const bool grad = op.kind == OpKind::GlobalAvgPoolGrad;
    const ValueSpec &x = grad ? *result(0) : operand(0);
    CHECK(image(x, grad ? "the result" : "an input"));
    return shape(grad ? operand(0) : *result(0), {x.shape[0], x.shape[3]}, true,
                 grad ? "dy" : "the result");
  }
  case OpKind::Flatten:
  case OpKind::FlattenGrad:
    return flatten();
  case OpKind::BatchNorm:
  case OpKind::BatchNormGrad:
    return batchNorm();
  default:
    return "is not an image op";
  }
}

#undef CHECK

std::string detail::checkImageOpShapes(const Op &op,
                                       const StageProgram &stage) {
  return ImageOpCheck(op, stage).run();
}
