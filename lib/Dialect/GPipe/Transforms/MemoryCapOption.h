//===- MemoryCapOption.h - The memory-cap option of the passes --*- C++ -*-===//

#ifndef GPIPE_DIALECT_GPIPE_TRANSFORMS_MEMORYCAPOPTION_H
#define GPIPE_DIALECT_GPIPE_TRANSFORMS_MEMORYCAPOPTION_H

#include "mlir/IR/Operation.h"

#include <cstdint>
#include <optional>
#include <string>

namespace gpipe {

/// Parses a pass's `memory-cap` option into `cap` (empty: none); on bad text
/// emits an error on `op` saying what was expected.
mlir::LogicalResult parseMemoryCapOption(mlir::Operation *op,
                                         const std::string &text,
                                         std::optional<uint64_t> &cap);

} // namespace gpipe

#endif // GPIPE_DIALECT_GPIPE_TRANSFORMS_MEMORYCAPOPTION_H
