//===- KernelOpValidation.cpp - Operands of a generated kernel op ---------===//
//
// A kernel op runs one of the bundle's generated kernels (Bundle::code): as
// many operands as the kernel's inputs, all f32 and element-wise: as many
// elements as the result, batched as it is (so that they also match at a
// micro-batch's rows). StageValidation.cpp checks the result count first.
//
//===----------------------------------------------------------------------===//

#include "verify/ValidationText.h"

using namespace gpipe::runtime;
using namespace gpipe::runtime::detail;

std::string gpipe::runtime::detail::checkKernelShapes(
    const Op &op, const StageProgram &stage, const GeneratedCode &code) {
  const std::vector<GeneratedKernelSpec> &kernels = code.kernels;
  if (op.kernel < 0 || size_t(op.kernel) >= kernels.size())
    return "runs kernel " + std::to_string(op.kernel) +
           ", but the bundle has " + std::to_string(kernels.size()) +
           " generated kernel" + (kernels.size() == 1 ? "" : "s");
  const GeneratedKernelSpec &kernel = kernels[op.kernel];
  const std::string name =
      "kernel " + std::to_string(op.kernel) + " (" + kernel.ops + ")";
  if (op.operands.size() != kernel.inputs)
    return "runs " + name + ", which takes " + std::to_string(kernel.inputs) +
           " input" + (kernel.inputs == 1 ? "" : "s") + ", with " +
           std::to_string(op.operands.size()) + " operand" +
           (op.operands.size() == 1 ? "" : "s");
  const ValueSpec &result = stage.values[op.results[0]];
  if (result.type != ElementType::F32)
    return std::string("expects result 0 of type f32, got ") +
           typeName(result.type);
  const int64_t n = product(result.shape);
  for (size_t i = 0; i < op.operands.size(); ++i) {
    const ValueSpec &operand = stage.values[op.operands[i]];
    const std::string what = "operand " + std::to_string(i);
    if (operand.type != ElementType::F32)
      return "expects " + what + " of type f32, got " + typeName(operand.type);
    if (product(operand.shape) != n)
      return "runs " + name + " element-wise: expects " + what + " with " +
             std::to_string(n) + " elements (the result's " +
             shapeString(result.shape) + "), got " +
             std::to_string(product(operand.shape)) + " (" +
             shapeString(operand.shape) + ")";
    if (operand.batched != result.batched)
      return "runs " + name + " element-wise: expects " + what + " to be " +
             (result.batched ? "batched" : "not batched") +
             ", as the result is";
  }
  return {};
}
