//===- GeneratedCode.h - A bundle's native kernels, loaded ------*- C++ -*-===//
//
// The bundle's generated kernels (Bundle::code) as callable entries: the
// variant this CPU runs, checked to be an x86-64 ELF shared object, loaded
// from the bundle's own bytes. The bytes go to an anonymous, sealed memory
// file (memfd) that dlopen maps through /proc/self/fd: no path the bundle
// names is ever opened, and no file another user can write is ever loaded.
// The runtime has no compiler: it runs what the bundle carries, so a bundle
// is as trusted as an executable (docs/BundleFormat.md, "Trust").
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_BACKENDS_GENERATEDCODE_H
#define GPIPE_RUNTIME_BACKENDS_GENERATEDCODE_H

#include "gpipe/runtime/bundle/Bundle.h"
#include "gpipe/runtime/kernels/GeneratedCall.h"

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpipe::runtime::device {

/// Which of the x86-64 levels (kCpuCodeIsas) a CPU runs, its operating
/// system's vector state included.
struct CpuFeatures {
  bool x86_64 = false; ///< the baseline: any x86-64 CPU
  bool v3 = false;     ///< AVX2, FMA, BMI1/2, F16C, MOVBE, LZCNT (and v2)
  bool v4 = false;     ///< v3 and AVX-512 F, BW, CD, DQ, VL
};

/// This machine's (CPUID and XGETBV; none of them off x86-64).
CpuFeatures hostCpuFeatures();

/// The index in `isas` (a bundle's code.cpu, in order) of the widest level
/// `cpu` runs; nothing and `error` when an isa is unknown or `cpu` runs none.
std::optional<size_t> chooseVariant(const std::vector<std::string> &isas,
                                    const CpuFeatures &cpu, std::string &error);

/// "" or why `bytes` are not an ELF64 little-endian x86-64 shared object
/// (ET_DYN): "the code artifact for x86-64-v3 is not an x86-64 ELF shared
/// object (...)".
std::string checkElfSharedObject(std::string_view bytes,
                                 const std::string &isa);

/// One variant of a bundle's code, loaded, with every kernel's entry. Owns
/// the library: the entries are valid while it lives.
class LoadedCode {
public:
  /// Checks every variant's bytes, then loads the one `cpu` runs and finds
  /// each kernel's symbol in it. Null and `error` on failure.
  static std::unique_ptr<LoadedCode>
  load(const GeneratedCode &code, const CpuFeatures &cpu, std::string &error);
  ~LoadedCode();
  LoadedCode(const LoadedCode &) = delete;
  LoadedCode &operator=(const LoadedCode &) = delete;

  /// The entry of kernel `index` of the bundle's code.kernels.
  GeneratedEntry entry(size_t index) const { return entries.at(index); }
  const std::string &isa() const { return chosenIsa; }

private:
  LoadedCode() = default;
  void *handle = nullptr;
  int fd = -1;
  std::string chosenIsa;
  std::vector<GeneratedEntry> entries;
};

} // namespace gpipe::runtime::device

#endif // GPIPE_RUNTIME_BACKENDS_GENERATEDCODE_H
