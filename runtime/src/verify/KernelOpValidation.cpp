//===- KernelOpValidation.cpp - Operands of a generated kernel op ---------===//
//
// A kernel op runs one of the bundle's generated kernels (Bundle::code): as
// many operands as the kernel's inputs, each of its memref's element type
// (f32, or i32 where the kernel's `types` say so), over the op's iteration
// space (one size per dimension of the kernel). Operand k holds the sizes of
// the space at the kernel's inputDims[k], the result those at its
// outputDims, but where the kernel's extents fix a memref's own size along
// a dimension: so many elements each. A batched space has the batch in
// dimension 0, a multiple of the bundle's batch that a micro-batch scales
// to its rows; exactly the values with that dimension are batched then
// (so that they also match at a micro-batch's rows). StageValidation.cpp
// checks the result count first; validateCode, the kernel's dimensions.
//
//===----------------------------------------------------------------------===//

#include "verify/ValidationText.h"

#include <limits>

using namespace gpipe::runtime;
using namespace gpipe::runtime::detail;

namespace {

/// The product of a memref's own sizes: `space` at `dims`, but where
/// `extents` (empty, or one per dimension) fixes one; -1 past int64_t.
int64_t elementsAt(const std::vector<int64_t> &space,
                   const std::vector<unsigned> &dims,
                   const std::vector<int64_t> &extents) {
  int64_t n = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t size =
        extents.empty() || extents[i] < 0 ? space[dims[i]] : extents[i];
    if (size > 0 && n > std::numeric_limits<int64_t>::max() / size)
      return -1;
    n *= size;
  }
  return n;
}

template <typename T> std::string listString(const std::vector<T> &values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i)
    text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

/// "dims [0, 1]", and ", extents [-1, 6]" where one is fixed.
std::string dimsString(const std::vector<unsigned> &dims,
                       const std::vector<int64_t> &extents) {
  std::string text = "dims " + listString(dims);
  for (int64_t extent : extents)
    if (extent >= 0)
      return text + ", extents " + listString(extents);
  return text;
}

bool hasDim0(const std::vector<unsigned> &dims) {
  return !dims.empty() && dims[0] == 0;
}

} // namespace

std::string gpipe::runtime::detail::checkKernelShapes(const Op &op,
                                                      const StageProgram &stage,
                                                      const Bundle &bundle) {
  const std::vector<GeneratedKernelSpec> &kernels = bundle.code.kernels;
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
  if (std::string error = checkKernelDims(kernel); !error.empty())
    return "runs " + name + ": " + error;
  if (op.space.size() != kernel.rank)
    return "runs " + name + " of rank " + std::to_string(kernel.rank) +
           " over a space of " + std::to_string(op.space.size()) + " size" +
           (op.space.size() == 1 ? "" : "s") + " " + shapeString(op.space);
  for (int64_t size : op.space)
    if (size < 1)
      return "runs " + name + " over space " + shapeString(op.space) +
             ": expected every size >= 1";
  const std::string over = "runs " + name + " over " +
                           (op.spaceBatched ? "batched " : "") + "space " +
                           shapeString(op.space) + ": ";
  if (op.spaceBatched && op.space[0] % bundle.batch != 0)
    return over + "expects space[0] = " + std::to_string(op.space[0]) +
           " to be a multiple of the batch " + std::to_string(bundle.batch);

  // Element counts and batching, the result first.
  const bool checkBatching = bundle.batch > 1;
  // Memref m: input m, or the output (m = inputs).
  auto check = [&](const ValueSpec &value, const std::string &what,
                   size_t m) -> std::string {
    const std::vector<unsigned> &dims =
        m < kernel.inputs ? kernel.inputDims[m] : kernel.outputDims;
    static const std::vector<int64_t> none;
    const std::vector<int64_t> &extents =
        kernel.extents.empty() ? none : kernel.extents[m];
    if (value.type != kernel.typeOf(m))
      return "runs " + name + ": expects " + what + " of type " +
             typeName(kernel.typeOf(m)) + " (" +
             (kernel.types.empty()
                  ? std::string("the kernel has no 'types': all f32")
                  : "the kernel's 'types[" + std::to_string(m) + "]'") +
             "), got " + typeName(value.type);
    const int64_t expected = elementsAt(op.space, dims, extents);
    if (expected < 0 || product(value.shape) != expected)
      return over + "expects " + what + " with " +
             (expected < 0 ? std::string("more than 2^63")
                           : std::to_string(expected)) +
             " elements (the sizes at " + dimsString(dims, extents) +
             "), got " + std::to_string(product(value.shape)) + " (" +
             shapeString(value.shape) + ")";
    const bool batched = op.spaceBatched && hasDim0(dims);
    if (checkBatching && value.batched != batched)
      return over + "expects " + what + (batched ? " " : " not ") +
             "to be batched (dims " + listString(dims) + "), got a value " +
             (value.batched ? "that is" : "that is not");
    return {};
  };
  if (std::string error =
          check(stage.values[op.results[0]], "result 0", kernel.inputs);
      !error.empty())
    return error;
  for (size_t k = 0; k < op.operands.size(); ++k)
    if (std::string error = check(stage.values[op.operands[k]],
                                  "operand " + std::to_string(k), k);
        !error.empty())
      return error;
  return {};
}
