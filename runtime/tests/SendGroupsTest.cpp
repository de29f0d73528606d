//===- SendGroupsTest.cpp - A boundary's sends issued as one group --------===//
//
// The executor brackets each run of consecutive sends of one device to one
// peer with Transport::beginSendGroup / endSendGroup (the NCCL transport
// makes such a run one ncclGroupStart/End). A transport that records its
// calls checks the brackets against the programs, under plain and posted
// sends, on the host emulation.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Analysis/ScheduleKinds.h"
#include "gpipe/runtime/backends/host/HostBackend.h"
#include "gpipe/runtime/exec/DeviceExecutor.h"

#include "TestBundles.h"
#include "TestModels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>

using namespace gpipe::runtime;
using namespace gpipe::runtime::device;
using namespace gpipe::runtime::testing;

namespace {

/// Each device's sends and group brackets as text: "[" and "]" around a
/// group, and "p<peer>m<micro-batch>c<channel> " per send.
using SendLog = std::map<unsigned, std::string>;

std::string sendText(unsigned peer, unsigned microbatch, unsigned channel) {
  return "p" + std::to_string(peer) + "m" + std::to_string(microbatch) + "c" +
         std::to_string(channel) + " ";
}

/// The in-process transport, with every send and bracket written to a log.
class RecordingTransport final : public Transport {
public:
  RecordingTransport(DeviceBackend &backend, std::shared_ptr<SendLog> log)
      : inner(createInProcessTransport(backend)), log(std::move(log)) {}

  std::string describe() const override { return inner->describe(); }
  std::string send(StreamId s, const TransferKey &key, const void *source,
                   int64_t bytes) override {
    (*log)[key.from] += sendText(key.to, key.microbatch, key.channel);
    return inner->send(s, key, source, bytes);
  }
  std::string postSend(StreamId s, const TransferKey &key, const void *source,
                       int64_t bytes) override {
    (*log)[key.from] += sendText(key.to, key.microbatch, key.channel);
    return inner->postSend(s, key, source, bytes);
  }
  std::string waitSend(StreamId s, const TransferKey &key) override {
    return inner->waitSend(s, key);
  }
  std::string beginSendGroup(unsigned device, unsigned peer) override {
    (*log)[device] += "[";
    return inner->beginSendGroup(device, peer);
  }
  std::string endSendGroup(unsigned device, unsigned peer) override {
    (*log)[device] += "]";
    return inner->endSendGroup(device, peer);
  }
  std::string recv(StreamId s, const TransferKey &key, void *destination,
                   int64_t bytes) override {
    return inner->recv(s, key, destination, bytes);
  }
  int64_t stagingBytes(unsigned device) const override {
    return inner->stagingBytes(device);
  }
  int64_t bytesSent() const override { return inner->bytesSent(); }

private:
  std::unique_ptr<Transport> inner;
  std::shared_ptr<SendLog> log;
};

bool isSend(const Instr &instr) {
  return instr.kind == InstrKind::SendActivation ||
         instr.kind == InstrKind::SendGradient;
}

/// What the log should say for `program`: its sends in order, each maximal
/// run of two or more to one peer with no other instruction between them
/// bracketed.
std::string expectedLog(const std::vector<Instr> &program) {
  std::string text;
  size_t i = 0;
  while (i < program.size()) {
    if (!isSend(program[i])) {
      ++i;
      continue;
    }
    size_t end = i + 1;
    while (end < program.size() && isSend(program[end]) &&
           program[end].peer == program[i].peer)
      ++end;
    std::string run;
    for (size_t k = i; k < end; ++k)
      run += sendText(program[k].peer, program[k].microbatch,
                      program[k].channel);
    text += end - i > 1 ? "[" + run + "]" : run;
    i = end;
  }
  return text;
}

} // namespace

/// The Transformer at K=4 sends two channels across the boundaries that its
/// residual's skip value crosses: those go as groups, the rest one by one.
TEST(SendGroups, BracketEachBoundarysSendsToOnePeer) {
  using gpipe::schedule::ScheduleKind;
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                            ScheduleKind::ZeroBubbleH1})
    for (unsigned window : {0u, 2u}) {
      SCOPED_TRACE(std::string(gpipe::schedule::scheduleKindName(kind)) +
                   ", window " + std::to_string(window));
      Bundle bundle = buildBundle(residualGraph(10), residualSplit(4), 3,
                                  RematPolicy::Full, kind, 1, window);
      auto log = std::make_shared<SendLog>();
      DeviceExecutorConfig config;
      config.seed = 42;
      config.transport = [log](DeviceBackend &backend,
                               std::unique_ptr<Transport> &transport) {
        transport = std::make_unique<RecordingTransport>(backend, log);
        return std::string();
      };
      std::string error;
      const std::vector<std::vector<Instr>> programs = bundle.programs;
      auto executor = DeviceExecutor::create(
          std::move(bundle), std::make_unique<HostBackend>(4, 3), config,
          error);
      ASSERT_TRUE(executor) << error;
      StepResult result = executor->trainStep(residualBatch(10, 5));
      ASSERT_TRUE(result.ok()) << result.error;

      unsigned groups = 0;
      for (unsigned d = 0; d < programs.size(); ++d) {
        const std::string expected = expectedLog(programs[d]);
        EXPECT_EQ((*log)[d], expected) << "device " << d;
        groups += std::count(expected.begin(), expected.end(), '[');
      }
      // Every micro-batch's skip value goes with the activation, forward.
      EXPECT_GE(groups, 3u);
    }
}
