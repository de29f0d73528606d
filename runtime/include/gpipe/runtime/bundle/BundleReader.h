//===- BundleReader.h - Reads and writes program bundles --------*- C++ -*-===//
//
// The bundle file (docs/BundleFormat.md, format version 1) is the JSON form of
// `Bundle` (Bundle.h), field for field. This reader checks the file's
// structure: that every key has the expected JSON type, every name (op,
// instruction, init, type, remat policy) is known, every op has the operand
// and result counts of its kind, every value id is in its stage's value
// table, and the references between sections resolve (model inputs, channels,
// parameters, stages, micro-batches, devices). The semantic checks (shapes,
// definition order, the schedule's consistency) are the executor's
// (`validateBundle`, run by `Executor::create`).
//
// Errors are returned, never thrown: each names the source and the JSON
// location, and says what was expected and what was found, e.g.
//   'm.bundle.json': stages[1].forward[3]: expected an array 'operands',
//   found a number
//
// Thread safety: the functions are reentrant; they share no state.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_BUNDLEREADER_H
#define GPIPE_RUNTIME_BUNDLEREADER_H

#include "gpipe/runtime/bundle/Bundle.h"
#include "gpipe/runtime/base/Status.h"

#include <cstdint>
#include <string>

namespace gpipe::runtime {

/// Parses and checks the JSON text of a bundle. `sourceName` (a path, or any
/// label) prefixes every error message, quoted. Never throws.
/// "none", "full", "except-last" or "selective", as in the bundle.
const char *rematPolicyName(RematPolicy policy);

/// Errors have the code InvalidBundle (OutOfMemory if an allocation failed).
StatusOr<Bundle> parseBundle(const std::string &text,
                             const std::string &sourceName);

/// The largest bundle file loadBundle reads, 1 GiB: the JSON of a model's
/// programs, not its weights (a separate file); far above any bundle the
/// compiler writes, and below what parsing it would take to exhaust a host.
constexpr uint64_t kMaxBundleBytes = uint64_t(1) << 30;

/// Reads the file at `path` and parses it as parseBundle does, with the path
/// as the source name. A relative `weights` path is resolved against the
/// file's directory. Never throws.
/// A file that cannot be read is an Io error (readRegularFile, FileRead.h):
/// "cannot open '<path>': <reason>" if it cannot be opened, "cannot read
/// '<path>': ..." if it is not a regular file (a FIFO, /dev/zero, a
/// directory) or holds more than kMaxBundleBytes.
StatusOr<Bundle> loadBundle(const std::string &path);

/// The JSON text of `bundle` in format version 1 (the inverse of
/// parseBundle: parseBundle(writeBundle(b)) gives back `b` for any bundle
/// that passes its checks). Short objects and arrays are written on one line.
/// Never throws; a non-finite float is written as null, which parseBundle
/// rejects.
std::string writeBundle(const Bundle &bundle);

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_BUNDLEREADER_H
