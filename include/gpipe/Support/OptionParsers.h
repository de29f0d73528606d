//===- OptionParsers.h - Command-line numbers with clear errors -*- C++ -*-===//
//
// LLVM's parsers answer `--stages -1` with "'-1' value invalid for uint
// argument!". A gpipe tool's number option says what it expects instead:
// "for the --stages option: expects a whole number from 0 to 4294967295, got
// '-1'", "expects a whole number, got 'x'" or "expects a finite number, got
// 'nan'". Header-only: the tools' options and the gpipe-compile pipeline's.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_SUPPORT_OPTIONPARSERS_H
#define GPIPE_SUPPORT_OPTIONPARSERS_H

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

namespace gpipe {

/// The widest type of T's signedness: LLVM's parsers for long and unsigned
/// long are final, those for the long long types are not.
template <class T>
using WideOf =
    std::conditional_t<std::is_signed_v<T>, long long, unsigned long long>;

/// A whole number in T's range (T signed or unsigned), parsed as WideOf<T>.
template <class T> class WholeParser : public llvm::cl::parser<WideOf<T>> {
  static_assert(std::is_integral_v<T>, "whole numbers only");

public:
  using llvm::cl::parser<WideOf<T>>::parser;

  llvm::StringRef getValueName() const override {
    return std::is_signed_v<T> ? "int" : "uint";
  }

  // Returns true on an error, as llvm::cl parsers do.
  bool parse(llvm::cl::Option &option, llvm::StringRef name,
             llvm::StringRef arg, WideOf<T> &value) {
    WideOf<T> wide;
    if (!arg.getAsInteger(10, wide) && wide >= std::numeric_limits<T>::min() &&
        wide <= std::numeric_limits<T>::max()) {
      value = wide;
      return false;
    }
    llvm::StringRef digits = arg;
    if (!digits.consume_front("-"))
      (void)digits.consume_front("+");
    if (digits.empty() || !llvm::all_of(digits, llvm::isDigit))
      return option.error("expects a whole number, got '" + arg + "'");
    return option.error("expects a whole number from " +
                        std::to_string(std::numeric_limits<T>::min()) + " to " +
                        std::to_string(std::numeric_limits<T>::max()) +
                        ", got '" + arg + "'");
  }
};

/// A finite real number.
template <class T> class RealParser : public llvm::cl::parser<T> {
  static_assert(std::is_floating_point_v<T>, "real numbers only");

public:
  using llvm::cl::parser<T>::parser;

  bool parse(llvm::cl::Option &option, llvm::StringRef name,
             llvm::StringRef arg, T &value) {
    double wide;
    if (!arg.getAsDouble(wide) && std::isfinite(wide) &&
        std::fabs(wide) <= double(std::numeric_limits<T>::max())) {
      value = T(wide);
      return false;
    }
    return option.error("expects a finite number, got '" + arg + "'");
  }
};

/// An unsigned count option: `static Count stages("stages", ...)`.
using Count = llvm::cl::opt<unsigned, false, WholeParser<unsigned>>;
/// Whole-number and real options and lists of any width.
template <class T> using Whole = llvm::cl::opt<T, false, WholeParser<T>>;
template <class T> using WholeList = llvm::cl::list<T, bool, WholeParser<T>>;
template <class T> using Real = llvm::cl::opt<T, false, RealParser<T>>;

} // namespace gpipe

#endif // GPIPE_SUPPORT_OPTIONPARSERS_H
