//===- GeneratedCode.cpp - A bundle's native kernels, loaded --------------===//
//
// The bytes of the chosen variant go to a memfd, sealed against any change,
// and dlopen maps it as /proc/self/fd/N. The memfd stays open while the
// library is loaded: glibc knows a loaded object by the path it was opened
// with, so a second load through a reused descriptor number would get the
// first bundle's library back.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/backends/GeneratedCode.h"

#include <cerrno>
#include <cstring>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;

/// A machine's name for messages: the ones a misbuilt artifact would be.
static std::string machineName(unsigned machine) {
  switch (machine) {
  case EM_386:
    return "i386";
  case EM_AARCH64:
    return "AArch64";
  case EM_ARM:
    return "ARM";
  case EM_PPC64:
    return "PowerPC64";
  case EM_RISCV:
    return "RISC-V";
  default:
    return "machine " + std::to_string(machine);
  }
}

std::string
gpipe::runtime::device::checkElfSharedObject(std::string_view bytes,
                                             const std::string &isa) {
  auto refuse = [&](const std::string &why) {
    return "the code artifact for " + isa +
           " is not an x86-64 ELF shared object (" + why + ")";
  };
  if (bytes.size() < SELFMAG || bytes.compare(0, SELFMAG, ELFMAG) != 0)
    return refuse("no ELF magic");
  if (bytes.size() < sizeof(Elf64_Ehdr))
    return refuse("its ELF header is cut short at " +
                  std::to_string(bytes.size()) + " bytes");
  Elf64_Ehdr header;
  std::memcpy(&header, bytes.data(), sizeof header);
  if (header.e_ident[EI_CLASS] != ELFCLASS64)
    return refuse(header.e_ident[EI_CLASS] == ELFCLASS32
                      ? "a 32-bit ELF"
                      : "ELF class " +
                            std::to_string(header.e_ident[EI_CLASS]));
  if (header.e_ident[EI_DATA] != ELFDATA2LSB)
    return refuse("not little-endian");
  // x86-64 is little-endian: the fields read as they are.
  if (header.e_machine != EM_X86_64)
    return refuse("built for " + machineName(header.e_machine));
  if (header.e_type != ET_DYN)
    return refuse(header.e_type == ET_EXEC ? "an executable"
                  : header.e_type == ET_REL
                      ? "a relocatable object file"
                      : "ELF type " + std::to_string(header.e_type));
  return {};
}

/// Writes all of `bytes` to `fd`; "" or the error.
static std::string writeAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t wrote = ::write(fd, bytes.data(), bytes.size());
    if (wrote < 0 && errno == EINTR)
      continue;
    if (wrote <= 0)
      return std::string("cannot write it to memory: ") + std::strerror(errno);
    bytes.remove_prefix(size_t(wrote));
  }
  return {};
}

std::unique_ptr<LoadedCode> LoadedCode::load(const GeneratedCode &code,
                                             const CpuFeatures &cpu,
                                             std::string &error) {
  // Every variant, not only this CPU's: a damaged one would otherwise fail
  // only on the next machine.
  std::vector<std::string> isas;
  for (const CodeVariant &variant : code.cpu) {
    error = checkElfSharedObject(variant.bytes, variant.isa);
    if (!error.empty())
      return nullptr;
    isas.push_back(variant.isa);
  }
  std::optional<size_t> chosen = chooseVariant(isas, cpu, error);
  if (!chosen)
    return nullptr;
  const CodeVariant &variant = code.cpu[*chosen];
  std::unique_ptr<LoadedCode> loaded(new LoadedCode());
  loaded->chosenIsa = variant.isa;
  auto fail = [&](const std::string &why) {
    error = "cannot load the code artifact for " + variant.isa + ": " + why;
    return nullptr;
  };
  loaded->fd = memfd_create("gpipe-kernels", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (loaded->fd < 0)
    return fail(std::string("memfd_create: ") + std::strerror(errno));
  std::string wrote = writeAll(loaded->fd, variant.bytes);
  if (!wrote.empty())
    return fail(wrote);
  // Nothing changes the code between this check and the mapping.
  if (fcntl(loaded->fd, F_ADD_SEALS,
            F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0)
    return fail(std::string("cannot seal it: ") + std::strerror(errno));
  const std::string path = "/proc/self/fd/" + std::to_string(loaded->fd);
  loaded->handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!loaded->handle) {
    const char *why = dlerror();
    return fail(why ? why : "dlopen failed");
  }
  for (const GeneratedKernelSpec &kernel : code.kernels) {
    void *symbol = dlsym(loaded->handle, kernel.symbol.c_str());
    if (!symbol) {
      error = "the code artifact has no kernel '" + kernel.symbol + "' (ops " +
              kernel.ops + "): built for another bundle?";
      return nullptr;
    }
    loaded->entries.push_back(reinterpret_cast<GeneratedEntry>(symbol));
  }
  return loaded;
}

LoadedCode::~LoadedCode() {
  if (handle)
    dlclose(handle);
  if (fd >= 0)
    ::close(fd);
}
