//===- Mailbox.cpp - In-process channels between pipeline devices ---------===//

#include "gpipe/runtime/Mailbox.h"

using namespace gpipe::runtime;

static const char *directionName(Direction direction) {
  return direction == Direction::Activation ? "activation" : "gradient";
}

std::string gpipe::runtime::describeRecv(const MessageKey &key) {
  return std::string("recv ") + directionName(key.direction) +
         " from device " + std::to_string(key.from) + ", micro-batch " +
         std::to_string(key.microbatch) + ", channel " +
         std::to_string(key.channel);
}

Mailbox::Key Mailbox::toKey(const MessageKey &key) {
  return {static_cast<int>(key.direction), key.from, key.to, key.microbatch,
          key.channel};
}

std::string Mailbox::send(const MessageKey &key, std::vector<float> payload) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!abortReason.empty())
      return abortReason;
    auto [it, inserted] = messages.emplace(toKey(key), std::move(payload));
    if (!inserted)
      return "device " + std::to_string(key.from) + ": send " +
             directionName(key.direction) + " to device " +
             std::to_string(key.to) + ", micro-batch " +
             std::to_string(key.microbatch) + ", channel " +
             std::to_string(key.channel) + " was already sent and not received";
  }
  arrived.notify_all();
  return {};
}

RecvResult Mailbox::recv(const MessageKey &key, size_t opIndex) {
  std::unique_lock<std::mutex> lock(mutex);
  Key wanted = toKey(key);
  bool ready = arrived.wait_for(lock, timeout, [&] {
    return !abortReason.empty() || messages.count(wanted);
  });
  RecvResult result;
  if (!abortReason.empty()) {
    result.error = "device " + std::to_string(key.to) + " stopped at op #" +
                   std::to_string(opIndex) + " (" + describeRecv(key) +
                   "): " + abortReason;
    return result;
  }
  if (!ready) {
    result.error = "device " + std::to_string(key.to) + " timed out after " +
                   std::to_string(timeout.count()) + " ms at op #" +
                   std::to_string(opIndex) + " (" + describeRecv(key) +
                   "): device " + std::to_string(key.from) +
                   " never sent it";
    return result;
  }
  auto it = messages.find(wanted);
  result.payload = std::move(it->second);
  messages.erase(it);
  return result;
}

void Mailbox::abort(const std::string &reason) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (abortReason.empty())
      abortReason = reason;
  }
  arrived.notify_all();
}
