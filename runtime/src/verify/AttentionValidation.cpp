//===- AttentionValidation.cpp - Shapes of attention and its gradient -----===//
//
// attention (x [batch, seq, width], wqkv [width, 3 width], wo [width, width]
// and, together or not at all, the biases bqkv [3 width] and bo [width]) and
// attention_grad (dy, the forward's result, then the forward's operands),
// whose results are dx, dwqkv, dwo and, with the biases, dbqkv and dbo.
// StageValidation.cpp checks the operand and result counts against the op
// table first, the heads and causal flag against the forward's.
//
//===----------------------------------------------------------------------===//

#include "verify/ValidationText.h"

using namespace gpipe::runtime;
using namespace gpipe::runtime::detail;

namespace {
std::string expectShape(const ValueSpec &value,
                        const std::vector<int64_t> &shape, bool batched,
                        const char *what) {
  if (value.shape != shape)
    return std::string("expects ") + what + " of shape " + shapeString(shape) +
           ", got " + shapeString(value.shape);
  if (value.batched != batched)
    return std::string("expects ") + what + " to be " +
           (batched ? "batched" : "not batched");
  return {};
}

std::string expectLike(const ValueSpec &value, const ValueSpec &like,
                       const char *what) {
  return expectShape(value, like.shape, like.batched, what);
}
} // namespace

std::string
gpipe::runtime::detail::checkAttentionShapes(const Op &op,
                                             const StageProgram &stage) {
  const bool grad = op.kind == OpKind::AttentionGrad;
  // Operands: [dy, forward y,] x, wqkv, wo[, bqkv, bo].
  const size_t first = grad ? 2 : 0;
  auto operand = [&](size_t i) -> const ValueSpec & {
    return stage.values[op.operands[first + i]];
  };
  auto result = [&](size_t i) -> const ValueSpec * {
    return op.results[i] < 0 ? nullptr : &stage.values[op.results[i]];
  };
  for (size_t i = 0; i < op.operands.size(); ++i)
    if (stage.values[op.operands[i]].type != ElementType::F32)
      return "expects operand " + std::to_string(i) + " of type f32, got " +
             typeName(stage.values[op.operands[i]].type);
  for (size_t i = 0; i < op.results.size(); ++i)
    if (result(i) && result(i)->type != ElementType::F32)
      return "expects result " + std::to_string(i) + " of type f32, got " +
             typeName(result(i)->type);

  const size_t weights = op.operands.size() - first;
  if (weights != 3 && weights != 5)
    return "expects both biases (bqkv, bo) or neither, got " +
           std::to_string(weights - 3) + " bias operand";
  const bool biased = weights == 5;
  const ValueSpec &x = operand(0);
  if (x.shape.size() != 3 || !x.batched)
    return "expects a batched input [batch, seq, width], got shape " +
           shapeString(x.shape);
  const int64_t width = x.shape[2];
  if (op.heads < 1 || width % op.heads != 0)
    return "expects heads dividing the width " + std::to_string(width) +
           ", got " + std::to_string(op.heads);
  std::string error;
  if (!(error = expectShape(operand(1), {width, 3 * width}, false, "wqkv"))
           .empty() ||
      !(error = expectShape(operand(2), {width, width}, false, "wo")).empty())
    return error;
  if (biased &&
      (!(error = expectShape(operand(3), {3 * width}, false, "bqkv")).empty() ||
       !(error = expectShape(operand(4), {width}, false, "bo")).empty()))
    return error;
  if (!grad)
    return expectLike(*result(0), x, "the result");

  if (!(error = expectLike(stage.values[op.operands[0]], x, "dy")).empty())
    return error;
  if (result(0) && !(error = expectLike(*result(0), x, "dx")).empty())
    return error;
  const char *names[] = {"dwqkv", "dwo", "dbqkv", "dbo"};
  for (size_t r = 1; r < op.results.size(); ++r)
    if (!(error = expectLike(*result(r), operand(r), names[r - 1])).empty())
      return error;
  return {};
}
