//===- MemoryCapOption.cpp - The memory-cap option of the passes ----------===//

#include "MemoryCapOption.h"
#include "gpipe/Analysis/ByteCount.h"

mlir::LogicalResult gpipe::parseMemoryCapOption(mlir::Operation *op,
                                                const std::string &text,
                                                std::optional<uint64_t> &cap) {
  if (parseByteCount(text, cap))
    return mlir::success();
  return op->emitError()
         << "invalid memory-cap '" << text
         << "': expected a byte count such as 1048576, 512MiB or 2GiB";
}
