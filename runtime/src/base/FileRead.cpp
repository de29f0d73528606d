//===- FileRead.cpp - Reading a whole file, bounded -----------------------===//
//
// The file is opened first and everything is checked on the open descriptor
// (fstat, then read), so that a path swapped between a check and the read
// cannot slip a FIFO or a device past the checks.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/base/FileRead.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <new>
#include <sys/stat.h>
#include <unistd.h>

using namespace gpipe::runtime;

namespace {

/// "a FIFO", "a directory", ... for a file that is not regular.
const char *fileKind(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "a special file";
}

/// read(2), retried when a signal interrupts it.
ssize_t readSome(int fd, char *into, size_t count) {
  ssize_t n;
  do
    n = ::read(fd, into, count);
  while (n < 0 && errno == EINTR);
  return n;
}

struct FdCloser {
  int fd;
  ~FdCloser() { ::close(fd); }
};

} // namespace

StatusOr<std::string> gpipe::runtime::readRegularFile(const std::string &path,
                                                      uint64_t maxBytes,
                                                      const char *what,
                                                      std::string *reason) {
  auto fail = [&](StatusCode code, const char *verb, const std::string &why) {
    if (reason)
      *reason = why;
    return Status(code, std::string(verb) + " '" + path + "': " + why);
  };
  auto readError = [&] {
    return fail(StatusCode::Io, "cannot read", std::strerror(errno));
  };
  auto tooLarge = [&](const std::string &found) {
    return fail(StatusCode::Io, "cannot read",
                std::string("expected ") + what + " of at most " +
                    std::to_string(maxBytes) + " bytes, found " + found);
  };

  // O_NONBLOCK: a FIFO without a writer would block open() until one comes.
  // O_NOCTTY: a terminal named by mistake must not become the process's.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0)
    return fail(StatusCode::Io, "cannot open", std::strerror(errno));
  FdCloser closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return readError();
  if (!S_ISREG(st.st_mode))
    return fail(StatusCode::Io, "cannot read",
                std::string("expected a regular file, found ") +
                    fileKind(st.st_mode));
  const uint64_t size = uint64_t(st.st_size);
  if (size > maxBytes)
    return tooLarge(std::to_string(size) + " bytes");

  std::string bytes;
  try {
    // One allocation of the size fstat gave, then read straight into it.
    bytes.resize(size);
    size_t got = 0;
    while (got < bytes.size()) {
      ssize_t n = readSome(fd, &bytes[got], bytes.size() - got);
      if (n < 0)
        return readError();
      if (n == 0)
        break; // it shrank
      got += size_t(n);
    }
    bytes.resize(got);
    // Past that size: a file that grew, or one whose size stat does not know
    // (those of /proc say 0). Either may not pass the limit.
    char buffer[1 << 16];
    while (true) {
      ssize_t n = readSome(fd, buffer, sizeof buffer);
      if (n < 0)
        return readError();
      if (n == 0)
        break;
      if (uint64_t(n) > maxBytes - bytes.size())
        return tooLarge("more while reading it");
      bytes.append(buffer, size_t(n));
    }
  } catch (const std::bad_alloc &) {
    return fail(StatusCode::OutOfMemory, "cannot read", "out of memory");
  }
  return bytes;
}
