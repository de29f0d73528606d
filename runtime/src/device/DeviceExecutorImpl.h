//===- DeviceExecutorImpl.h - The device executor's state -------*- C++ -*-===//
//
// Private to runtime/src/device: what the device executor keeps between
// steps and during the issue of one, shared by DeviceExecutor.cpp (creation,
// steps, evaluation, the public API), DeviceIssue.cpp (buffers and
// instructions) and DeviceOps.cpp (one op's kernels).
//
// Issue order and hazards. Work on one stream runs in issue order, so a buffer
// that only device d's compute stream touches can be reused as soon as the
// host has issued its last use. Two kinds of buffers are touched by another
// stream and get more care:
//   - a receive buffer is written by the sender's copy stream: it is reserved
//     for the whole step (one per micro-batch and channel, as the GPipe stash
//     holds them anyway);
//   - a sent buffer is read by the sender's copy stream: when it is freed, it
//     waits in `pending` until the device's second next compute instruction,
//     whose stream first waits for the copy's event (long done by then, so
//     the copy of micro-batch m overlaps the forward of m + 1 at no cost).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_SRC_DEVICE_DEVICEEXECUTORIMPL_H
#define GPIPE_RUNTIME_SRC_DEVICE_DEVICEEXECUTORIMPL_H

#include "gpipe/runtime/ProgramAnalysis.h"
#include "gpipe/runtime/ScheduleVerifier.h"
#include "gpipe/runtime/device/ArenaAllocator.h"
#include "gpipe/runtime/device/DeviceExecutor.h"

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace gpipe::runtime::device::detail {

inline int64_t product(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t dim : shape)
    n *= dim;
  return n;
}

/// A value of one micro-batch on one device, with the state its op saves.
struct DeviceValue {
  bool present = false;
  std::vector<int64_t> shape;
  char *data = nullptr;
  /// Layer norm: mean, rstd. Attention: qkv, probs, context. Cross-entropy:
  /// probs. Dropout: the mask (bytes) in saved[0].
  char *saved[3] = {nullptr, nullptr, nullptr};
  int64_t offset = -1;  ///< its arena block; -1: a view or a receive buffer
  bool reserved = false; ///< a receive buffer, kept for the whole step
  bool readByCopy = false;
  EventId copyDone = 0;

  int64_t numElements() const { return product(shape); }
  float *f() const { return reinterpret_cast<float *>(data); }
  const int32_t *i() const { return reinterpret_cast<const int32_t *>(data); }
  int64_t rowsOf() const {
    return shape.empty() ? 1 : numElements() / shape.back();
  }
  int64_t colsOf() const { return shape.empty() ? 1 : shape.back(); }
};

struct DeviceParameter {
  ParamSpec spec;
  unsigned device = 0;
  int64_t size = 0;
  float *value = nullptr, *grad = nullptr;
  float *slots[2] = {nullptr, nullptr};
};

using MessageKey = std::tuple<int, unsigned, unsigned, unsigned>;

struct PendingFree {
  int64_t offset;
  EventId copyDone;
  int64_t releaseAt; ///< compute instruction count
};

/// One device during the issue of a step.
struct DeviceRun {
  ArenaAllocator arena;
  char *base = nullptr;
  std::vector<std::vector<DeviceValue>> values; ///< [micro-batch][value id]
  std::vector<char> kept;                       ///< per micro-batch
  std::vector<PendingFree> pending;
  int64_t computeCount = 0;
};


} // namespace gpipe::runtime::device::detail

namespace gpipe::runtime::device {
using namespace detail;

struct DeviceExecutor::Impl {
  Bundle bundle;
  DeviceExecutorConfig config;
  std::unique_ptr<DeviceBackend> backend;
  std::vector<std::unique_ptr<DeviceParameter>> params;
  std::unordered_map<std::string, DeviceParameter *> paramByName;
  std::vector<std::vector<DeviceParameter *>> paramsOf; ///< per device
  std::vector<GradientFusion> fusion;
  std::vector<StageLiveness> liveness;
  std::vector<unsigned> lastForward;
  std::vector<int64_t> rowOffsets;
  std::vector<DeviceMemoryLayout> layout;
  std::vector<char *> arenaBase;
  float *lossSlots = nullptr; ///< M floats on the last device
  std::vector<float> hostLosses;
  int64_t steps = 0;

  // Per step.
  DeviceBackend *issue = nullptr; ///< the backend, or the dry run's
  std::vector<DeviceRun> runs;
  std::map<MessageKey, EventId> sent;
  /// Every device's instructions in one order that issues each send before
  /// its receive (verifySchedule's).
  std::vector<ScheduleStep> issueOrder;

  std::string issueStep(const Batch *batch, bool dryRun);
  std::string issueInstr(unsigned device, const Instr &instr,
                         const Batch *batch);
  std::string issueOps(unsigned device, unsigned m, const std::vector<Op> &ops,
                       const char *section, const std::vector<std::vector<int>>
                                                *freeAfter,
                       bool backward);
  std::string issueOp(unsigned device, unsigned m, const Op &op, size_t index,
                      bool backward);
  std::string send(unsigned device, const Instr &instr);
  std::string checkModelInputs(const Batch &batch) const;

  char *allocateBlock(unsigned device, int64_t bytes, int64_t &offset);
  DeviceValue &newValue(unsigned device, unsigned m, int id,
                        std::vector<int64_t> extraBytes = {});
  void freeValue(unsigned device, DeviceValue &value);
  void releasePending(unsigned device, bool all);

  StreamId compute(unsigned d) { return issue->computeStream(d); }
  int64_t rowsOf(unsigned m) const { return bundle.microbatchRows[m]; }
};

} // namespace gpipe::runtime::device

#endif // GPIPE_RUNTIME_SRC_DEVICE_DEVICEEXECUTORIMPL_H
