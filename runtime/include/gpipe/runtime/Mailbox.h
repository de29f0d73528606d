//===- Mailbox.h - In-process channels between pipeline devices -*- C++ -*-===//
//
// The transport of CPU devices in one process: every device's sends go into
// one mailbox keyed by (direction, sender, receiver, micro-batch, channel).
// A send never blocks (the schedule verifier proved the program deadlock-free
// even with blocking sends, so buffering only adds slack). A receive waits at
// most the mailbox timeout, then fails with a message naming the waiting
// device, its op and what it waited for, so a peer that never answers ends
// the run instead of hanging it. When one device fails, `abort` wakes every
// waiter with the reason.
//
// Thread safety: all members may be called concurrently from device threads.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_MAILBOX_H
#define GPIPE_RUNTIME_MAILBOX_H

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace gpipe::runtime {

enum class Direction { Activation, Gradient };

/// One transfer: `from` sends tensor `channel` of `microbatch` to `to`.
struct MessageKey {
  Direction direction = Direction::Activation;
  unsigned from = 0;
  unsigned to = 0;
  unsigned microbatch = 0;
  unsigned channel = 0;
};

/// "recv activation from device 0, micro-batch 2, channel 1" and the like.
std::string describeRecv(const MessageKey &key);

struct RecvResult {
  std::vector<float> payload;
  std::string error; ///< empty on success
  bool ok() const { return error.empty(); }
};

class Mailbox {
public:
  explicit Mailbox(std::chrono::milliseconds timeout) : timeout(timeout) {}

  /// Delivers `payload`. Returns an error if the same message was already
  /// sent (a schedule bug) or the mailbox was aborted.
  std::string send(const MessageKey &key, std::vector<float> payload);

  /// Takes the message for `key`, waiting up to the timeout. `opIndex` is the
  /// waiting op's index in its device program, for the message.
  RecvResult recv(const MessageKey &key, size_t opIndex);

  /// Fails every current and future receive with `reason`.
  void abort(const std::string &reason);

private:
  using Key = std::tuple<int, unsigned, unsigned, unsigned, unsigned>;
  static Key toKey(const MessageKey &key);

  std::chrono::milliseconds timeout;
  std::mutex mutex;
  std::condition_variable arrived;
  std::map<Key, std::vector<float>> messages;
  std::string abortReason;
};

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_MAILBOX_H
