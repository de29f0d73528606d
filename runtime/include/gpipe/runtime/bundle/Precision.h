//===- Precision.h - How a bundle's products read their operands -*- C++ -*-===//
//
// The compiler's decision (gpipe-compile precision=...), recorded in the
// bundle: in what precision the GEMMs of dense layers, matmuls,
// convolutions and attention read their operands. Accumulation is f32 in
// every case; parameters, optimizer state and the values between ops stay
// f32 (docs/Cuda.md says what each backend does with it).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_BUNDLE_PRECISION_H
#define GPIPE_RUNTIME_BUNDLE_PRECISION_H

#include <optional>
#include <string_view>

namespace gpipe::runtime {

enum class Precision {
  F32,  ///< f32 operands
  TF32, ///< operands rounded to TF32 (10-bit mantissa): tensor cores
  BF16, ///< operands rounded to bf16 (7-bit mantissa)
};

/// "f32", "tf32" or "bf16": the spelling of gpipe-compile, gpipe-run and the
/// bundle.
constexpr const char *precisionName(Precision precision) {
  switch (precision) {
  case Precision::F32:
    return "f32";
  case Precision::TF32:
    return "tf32";
  case Precision::BF16:
    return "bf16";
  }
  return "f32";
}

/// The precision spelled `name`, or none.
inline std::optional<Precision> parsePrecision(std::string_view name) {
  for (Precision p : {Precision::F32, Precision::TF32, Precision::BF16})
    if (name == precisionName(p))
      return p;
  return std::nullopt;
}

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_BUNDLE_PRECISION_H
