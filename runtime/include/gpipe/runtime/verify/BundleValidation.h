//===- BundleValidation.h - The loader's proof of a bundle ------*- C++ -*-===//

#ifndef GPIPE_RUNTIME_VERIFY_BUNDLEVALIDATION_H
#define GPIPE_RUNTIME_VERIFY_BUNDLEVALIDATION_H

#include "gpipe/runtime/bundle/Bundle.h"

#include <string>

namespace gpipe::runtime {

/// Checks everything `PipelineExecutor` relies on (value ids, operand and
/// result counts, element types and shapes of every op, channels between
/// adjacent stages, the instruction streams). Returns "" or the first
/// problem, e.g. "stage 1: forward op 2 (dense): expects 2 or 3 operands, got
/// 1".
std::string validateBundle(const Bundle &bundle);

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_VERIFY_BUNDLEVALIDATION_H
