//===- InProcessTransport.cpp - Transfers within one process --------------===//

#include "gpipe/runtime/transport/Transport.h"

#include <map>
#include <tuple>
#include <vector>

using namespace gpipe::runtime::device;

bool TransferKey::operator<(const TransferKey &other) const {
  return std::tie(direction, from, to, microbatch, channel, boundary) <
         std::tie(other.direction, other.from, other.to, other.microbatch,
                  other.channel, other.boundary);
}

namespace {

class InProcessTransport final : public Transport {
public:
  explicit InProcessTransport(DeviceBackend &backend)
      : backend(backend), staged(backend.numDevices(), 0) {}

  std::string describe() const override { return "in-process staging copies"; }

  std::string send(StreamId stream, const TransferKey &key, const void *source,
                   int64_t bytes) override {
    return stage(stream, key, source, bytes);
  }

  // The copy runs on the sender's copy stream, beside its compute.
  std::string postSend(StreamId stream, const TransferKey &key,
                       const void *source, int64_t bytes) override {
    const StreamId copy = backend.copyStream(key.from);
    backend.waitEvent(copy, backend.recordEvent(stream));
    return stage(copy, key, source, bytes);
  }

  std::string waitSend(StreamId stream, const TransferKey &key) override {
    auto it = slots.find(key);
    if (it == slots.end())
      return "waits for a send that was never posted";
    backend.waitEvent(stream, it->second.ready);
    return {};
  }

  std::string recv(StreamId stream, const TransferKey &key, void *destination,
                   int64_t bytes) override {
    auto it = slots.find(key);
    if (it == slots.end() || it->second.bytes < bytes)
      return "received before it was sent (the schedule's proof orders every "
             "send first)";
    backend.waitEvent(stream, it->second.ready);
    backend.copyBetweenDevices(stream, destination, key.to, it->second.data,
                               key.to, bytes);
    return {};
  }

  int64_t bytesSent() const override { return sent; }
  int64_t stagingBytes(unsigned device) const override {
    return device < staged.size() ? staged[device] : 0;
  }

private:
  /// Copies `source` into the transfer's staging buffer on `stream`.
  std::string stage(StreamId stream, const TransferKey &key,
                    const void *source, int64_t bytes) {
    Slot &slot = slots[key];
    if (slot.bytes < bytes) {
      void *memory = nullptr;
      std::string error = backend.allocate(key.to, bytes, &memory);
      if (!error.empty())
        return "staging the transfer to device " + std::to_string(key.to) +
               ": " + error;
      staged[key.to] += bytes - slot.bytes;
      slot.data = memory;
      slot.bytes = bytes;
    }
    backend.copyBetweenDevices(stream, slot.data, key.to, source, key.from,
                               bytes);
    sent += bytes;
    slot.ready = backend.recordEvent(stream);
    return {};
  }

  struct Slot {
    void *data = nullptr;
    int64_t bytes = 0;
    EventId ready = 0;
  };
  DeviceBackend &backend;
  std::map<TransferKey, Slot> slots;
  std::vector<int64_t> staged;
  int64_t sent = 0;
};

} // namespace

std::unique_ptr<Transport>
gpipe::runtime::device::createInProcessTransport(DeviceBackend &backend) {
  return std::make_unique<InProcessTransport>(backend);
}
