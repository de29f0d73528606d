//===- OptionAliases.h - Counts spelled as the tools spell them -*- C++ -*-===//
//
// The pipeline and the passes take the pipeline's shape as gpipe-run and the
// other tools do: stages, microbatches, virtual-stages. Their first
// spellings, num-stages, num-microbatches and num-virtual-stages, were
// documented before the spellings were unified; they stay accepted as
// aliases, and a value given both ways must agree.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_DIALECT_GPIPE_TRANSFORMS_OPTIONALIASES_H
#define GPIPE_DIALECT_GPIPE_TRANSFORMS_OPTIONALIASES_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/Twine.h"

#include <string>

namespace gpipe {

/// Moves a count given under its old spelling `alias` into `option`; fails
/// through `errorHandler` when both were given different values. A printed
/// pipeline writes every option, an alias never given as its default 0:
/// beside its option, an alias of 0 is ignored; alone, 0 is passed on for
/// the pass to refuse.
template <class Option, class Alias>
mlir::LogicalResult resolveOptionAlias(
    Option &option, const Alias &alias,
    llvm::function_ref<mlir::LogicalResult(const llvm::Twine &)> errorHandler) {
  if (!alias.hasValue() || (alias.getValue() == 0 && option.hasValue()))
    return mlir::success();
  if (option.hasValue() && option.getValue() != alias.getValue())
    return errorHandler(
        alias.getArgStr() + "=" + std::to_string(alias.getValue()) +
        " is the old spelling of " + option.getArgStr() + ", given as " +
        std::to_string(option.getValue()) + ": give one of them");
  option = alias.getValue();
  return mlir::success();
}

} // namespace gpipe

#endif // GPIPE_DIALECT_GPIPE_TRANSFORMS_OPTIONALIASES_H
