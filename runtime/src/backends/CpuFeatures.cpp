//===- CpuFeatures.cpp - Which x86-64 level this CPU runs -----------------===//
//
// The levels of the x86-64 psABI, read from CPUID (and XGETBV: the operating
// system must save the AVX and AVX-512 registers too), and the choice of the
// widest code variant a CPU runs. CPUID rather than GCC's
// __builtin_cpu_supports("x86-64-v3"): clang has no such names before 16, and
// the fuzzers build with clang.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/backends/GeneratedCode.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <cstdint>
#include <iterator>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;

#if defined(__x86_64__)

static bool bit(unsigned reg, int index) { return (reg >> index) & 1u; }

/// XCR0: the register state the operating system saves.
static uint64_t enabledStates() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return uint64_t(edx) << 32 | eax;
}

CpuFeatures gpipe::runtime::device::hostCpuFeatures() {
  CpuFeatures cpu;
  cpu.x86_64 = true;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d))
    return cpu;
  const unsigned ecx1 = c;
  unsigned ecx81 = 0, ebx7 = 0;
  if (__get_cpuid(0x80000001u, &a, &b, &c, &d))
    ecx81 = c;
  if (__get_cpuid_max(0, nullptr) >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    ebx7 = b;
  }
  const uint64_t states = bit(ecx1, 27) ? enabledStates() : 0; // OSXSAVE
  // v2: SSE3, SSSE3, CMPXCHG16B, SSE4.1, SSE4.2, POPCNT, LAHF/SAHF.
  const bool v2 = bit(ecx1, 0) && bit(ecx1, 9) && bit(ecx1, 13) &&
                  bit(ecx1, 19) && bit(ecx1, 20) && bit(ecx1, 23) &&
                  bit(ecx81, 0);
  // v3: AVX (with XMM and YMM state), FMA, MOVBE, F16C, BMI1, AVX2, BMI2,
  // LZCNT.
  cpu.v3 = v2 && (states & 0x6) == 0x6 && bit(ecx1, 28) && bit(ecx1, 12) &&
           bit(ecx1, 22) && bit(ecx1, 29) && bit(ebx7, 3) && bit(ebx7, 5) &&
           bit(ebx7, 8) && bit(ecx81, 5);
  // v4: AVX-512 F, DQ, CD, BW, VL (with opmask and ZMM state).
  cpu.v4 = cpu.v3 && (states & 0xe6) == 0xe6 && bit(ebx7, 16) &&
           bit(ebx7, 17) && bit(ebx7, 28) && bit(ebx7, 30) && bit(ebx7, 31);
  return cpu;
}

#else

CpuFeatures gpipe::runtime::device::hostCpuFeatures() { return {}; }

#endif

std::optional<size_t>
gpipe::runtime::device::chooseVariant(const std::vector<std::string> &isas,
                                      const CpuFeatures &cpu,
                                      std::string &error) {
  // Parallel to kCpuCodeIsas.
  const bool runs[] = {cpu.x86_64, cpu.v3, cpu.v4};
  static_assert(std::size(runs) == std::size(kCpuCodeIsas));
  std::optional<size_t> chosen;
  size_t chosenLevel = 0;
  std::string built, supported;
  for (size_t i = 0; i < isas.size(); ++i) {
    size_t level = 0;
    while (level < std::size(kCpuCodeIsas) && isas[i] != kCpuCodeIsas[level])
      ++level;
    if (level == std::size(kCpuCodeIsas)) {
      error = "the generated kernels' code variant " + std::to_string(i) +
              " is for an unknown isa '" + isas[i] +
              "'; expected x86-64, x86-64-v3 or x86-64-v4";
      return std::nullopt;
    }
    built += (built.empty() ? "" : ", ") + isas[i];
    if (runs[level] && (!chosen || level > chosenLevel)) {
      chosen = i;
      chosenLevel = level;
    }
  }
  if (chosen)
    return chosen;
  for (size_t level = 0; level < std::size(kCpuCodeIsas); ++level)
    if (runs[level])
      supported +=
          (supported.empty() ? "" : ", ") + std::string(kCpuCodeIsas[level]);
  error = isas.empty()
              ? std::string("the bundle has generated kernels but no CPU "
                            "code variant")
              : "the bundle's generated kernels are built for " + built +
                    "; this CPU supports none of them (" +
                    (supported.empty() ? "it is not an x86-64 CPU"
                                       : "it runs " + supported) +
                    ")";
  return std::nullopt;
}
