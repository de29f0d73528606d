//===- FileRead.h - Reading a whole file, bounded ---------------*- C++ -*-===//
//
// The one way the runtime reads an input file whole (a bundle, a checkpoint's
// files, an IDX data set, a text corpus, a weights file, a run's metrics and
// trace): only a regular file, and only up to a size limit that each reader
// names and documents (docs/Reliability.md, "Limits on files read"). A FIFO,
// a device such as /dev/zero or a directory is refused before a byte is read,
// and the FIFO without blocking in open(); a file larger than the limit is
// refused from its size, before any allocation, and one that grows past the
// limit while it is read is refused when it does.
//
// Errors (never thrown) name the path and say what was expected and what was
// found:
//   cannot open 'PATH': No such file or directory
//   cannot read 'PATH': expected a regular file, found a FIFO
//   cannot read 'PATH': expected a bundle of at most 1073741824 bytes, found
//   3000000000 bytes
//
// Thread safety: reentrant; it shares no state.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_FILEREAD_H
#define GPIPE_RUNTIME_FILEREAD_H

#include "gpipe/runtime/base/Status.h"

#include <cstdint>
#include <string>

namespace gpipe::runtime {

/// The bytes of the regular file at `path`, which may have at most `maxBytes`
/// of them; `what` names its content for the size message, with its article
/// ("a bundle", "an IDX file"). An error has the code Io (OutOfMemory if the
/// bytes cannot be allocated) and the message "cannot open 'PATH': REASON" or
/// "cannot read 'PATH': REASON"; `reason`, when given, is set to REASON alone,
/// for callers that name the file in their own words.
StatusOr<std::string> readRegularFile(const std::string &path,
                                      uint64_t maxBytes, const char *what,
                                      std::string *reason = nullptr);

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_FILEREAD_H
