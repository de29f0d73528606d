//===- CountParser.h - Command-line counts with clear errors ----*- C++ -*-===//
//
// LLVM's parser answers `--stages -1` with "'-1' value invalid for uint
// argument!". A gpipe tool's count option says what it expects instead:
// "for the --stages option: expects a whole number from 0 to 4294967295, got
// '-1'". Header-only, for the tools' mains.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_TOOLS_COUNTPARSER_H
#define GPIPE_TOOLS_COUNTPARSER_H

#include "llvm/Support/CommandLine.h"

#include <limits>
#include <string>

namespace gpipe {

class CountParser : public llvm::cl::parser<unsigned> {
public:
  using llvm::cl::parser<unsigned>::parser;

  // Returns true on an error, as llvm::cl parsers do.
  bool parse(llvm::cl::Option &option, llvm::StringRef name,
             llvm::StringRef arg, unsigned &value) {
    unsigned long long wide;
    if (!arg.getAsInteger(10, wide) &&
        wide <= std::numeric_limits<unsigned>::max()) {
      value = unsigned(wide);
      return false;
    }
    return option.error("expects a whole number from 0 to " +
                        std::to_string(std::numeric_limits<unsigned>::max()) +
                        ", got '" + arg + "'");
  }
};

/// An unsigned count option: `static Count stages("stages", ...)`.
using Count = llvm::cl::opt<unsigned, false, CountParser>;

} // namespace gpipe

#endif // GPIPE_TOOLS_COUNTPARSER_H
