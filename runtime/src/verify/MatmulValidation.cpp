//===- MatmulValidation.cpp - Shapes of a broadcasting matmul -------------===//
//
// matmul (a [A..., ra, ca], b [B..., rb, cb]) -> y [C..., M, N]
// (MatmulGeometry.h): ranks >= 2, op(a)'s K equal to op(b)'s, A and B
// broadcastable, y's shape exactly C..., M, N. And where the batch goes: a
// micro-batch runs a batched operand's rows, so its dimension 0 must be y's
// dimension 0 (a batch dimension of both, or a's rows when both are
// matrices), and an operand that is not batched must not span that
// dimension (size 1 or no dimension there: it broadcasts). A backward may
// also contract the batch, in both operands (a [batch, M] with transpose_a
// against b [batch, N]: dw = x^T dy), into an unbatched y: each micro-batch
// adds its rows' share, as dense_grad's weight gradient does.
// StageValidation.cpp checks the operand and result counts first.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/bundle/MatmulGeometry.h"
#include "verify/ValidationText.h"

using namespace gpipe::runtime;
using namespace gpipe::runtime::detail;

namespace {

/// Where an operand's dimension 0 lands in y (rank `resultRank`), or -1
/// where the product contracts it.
int landingOf(const ValueSpec &value, bool isA, bool transposed,
              size_t resultRank) {
  const size_t rank = value.shape.size();
  if (rank > 2)
    return int(resultRank - rank); // a batch dimension
  // A matrix: a's rows are M unless transposed, b's are K unless
  // transposed (then N, y's last dimension).
  if (isA)
    return transposed ? -1 : int(resultRank - 2);
  return transposed ? int(resultRank - 1) : -1;
}

std::string describe(const char *name, const ValueSpec &value,
                     bool transposed) {
  return std::string(name) + " " + shapeString(value.shape) +
         (transposed ? std::string(" with transpose_") + name : "");
}

} // namespace

std::string gpipe::runtime::detail::checkMatmulShapes(const Op &op,
                                                      const StageProgram &stage,
                                                      bool backward) {
  const ValueSpec &a = stage.values[op.operands[0]];
  const ValueSpec &b = stage.values[op.operands[1]];
  const ValueSpec &y = stage.values[op.results[0]];
  const char *names[] = {"a", "b"};
  const ValueSpec *operands[] = {&a, &b};
  const bool transposed[] = {op.transposeA, op.transposeB};
  for (size_t i = 0; i < 2; ++i)
    if (operands[i]->type != ElementType::F32)
      return std::string("expects ") + names[i] + " of type f32, got " +
             typeName(operands[i]->type);
  if (y.type != ElementType::F32)
    return std::string("expects the result of type f32, got ") +
           typeName(y.type);
  for (size_t i = 0; i < 2; ++i)
    if (operands[i]->shape.size() < 2)
      return std::string("expects ") + names[i] +
             " of rank >= 2 ([..., rows, cols]), got shape " +
             shapeString(operands[i]->shape);

  // op(a) [..., M, K] against op(b) [..., K, N].
  auto opShape = [](const ValueSpec &value, bool transposed) {
    std::vector<int64_t> shape = value.shape;
    if (transposed)
      std::swap(shape[shape.size() - 2], shape[shape.size() - 1]);
    return shape;
  };
  const std::vector<int64_t> opA = opShape(a, op.transposeA),
                             opB = opShape(b, op.transposeB);
  const int64_t aK = opA.back(), bK = opB[opB.size() - 2];
  if (aK != bK)
    return "expects op(a) [..., M, K] and op(b) [..., K, N] of one K, got "
           "op(a) " +
           shapeString(opA) + " (K = " + std::to_string(aK) + ") and op(b) " +
           shapeString(opB) + " (K = " + std::to_string(bK) + ")";
  const std::vector<int64_t> aBatch(a.shape.begin(), a.shape.end() - 2),
      bBatch(b.shape.begin(), b.shape.end() - 2);
  for (size_t i = 0; i < aBatch.size() && i < bBatch.size(); ++i) {
    const int64_t aSize = aBatch[aBatch.size() - 1 - i],
                  bSize = bBatch[bBatch.size() - 1 - i];
    if (aSize != bSize && aSize != 1 && bSize != 1)
      return "expects batch dimensions that broadcast (equal, or 1), got a's " +
             shapeString(aBatch) + " and b's " + shapeString(bBatch) + ": " +
             std::to_string(aSize) + " against " + std::to_string(bSize);
  }
  MatmulGeometry g;
  if (!matmulGeometryOf(a.shape, b.shape, op.transposeA, op.transposeB, g))
    return "expects a matmul of a " + shapeString(a.shape) + " and b " +
           shapeString(b.shape);
  const std::vector<int64_t> expected = g.resultShape();
  if (y.shape != expected)
    return "expects the result of shape " + shapeString(expected) + " (" +
           describe("a", a, op.transposeA) + ", " +
           describe("b", b, op.transposeB) + "), got " + shapeString(y.shape);

  // The batch: kept in y's dimension 0, or (a backward) contracted in both.
  const size_t rank = expected.size();
  int landing[2];
  for (size_t i = 0; i < 2; ++i)
    landing[i] = landingOf(*operands[i], i == 0, transposed[i], rank);
  const bool contracted =
      a.batched && b.batched && landing[0] == -1 && landing[1] == -1;
  if (contracted && !backward)
    return "expects the batch in the result's dimension 0, got it "
           "contracted in both a and b (only a backward may contract it: a "
           "parameter's gradient)";
  bool batched = false;
  for (size_t i = 0; i < 2 && !contracted; ++i) {
    if (!operands[i]->batched)
      continue;
    batched = true;
    if (landing[i] == 0)
      continue;
    return std::string("expects the batch (dimension 0 of ") + names[i] +
           ") in the result's dimension 0, got it " +
           (landing[i] < 0 ? std::string("contracted")
                           : "in dimension " + std::to_string(landing[i])) +
           " (" + describe("a", a, op.transposeA) + ", " +
           describe("b", b, op.transposeB) + ")";
  }
  // An operand that is not batched broadcasts over the batch.
  for (size_t i = 0; i < 2 && batched; ++i) {
    const ValueSpec &value = *operands[i];
    if (value.batched || value.shape.size() != rank || value.shape.size() < 3 ||
        value.shape[0] == 1)
      continue;
    return std::string("expects ") + names[i] +
           ", which is not batched, of size 1 in the result's batch "
           "dimension 0 (or without it), got shape " +
           shapeString(value.shape);
  }
  if (y.batched != batched)
    return std::string("expects the result to be ") +
           (batched ? "batched" : "not batched");
  return {};
}
