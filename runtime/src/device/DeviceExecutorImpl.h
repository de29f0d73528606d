//===- DeviceExecutorImpl.h - The device executor's state -------*- C++ -*-===//
//
// Private to runtime/src/device: what the device executor keeps between
// steps and during the issue of one, shared by DeviceExecutor.cpp (creation,
// steps, evaluation, the public API), DeviceIssue.cpp (buffers and
// instructions) and DeviceOps.cpp (one op's kernels).
//
// Issue order and hazards. Work on one stream runs in issue order, so a buffer
// that only device d's compute stream touches can be reused as soon as the
// host has issued its last use. Transfers keep it that way (Transport.h): a
// send reads the sent buffer in the sender's compute-stream order, so the
// buffer is freed at the send; a receive writes a buffer the receiver
// allocates at the receive, in its own stream's order. These are the memory
// planner's rules (MemoryPlanner.h), which the placement will come to follow
// exactly (docs/Architecture.md).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_SRC_DEVICE_DEVICEEXECUTORIMPL_H
#define GPIPE_RUNTIME_SRC_DEVICE_DEVICEEXECUTORIMPL_H

#include "gpipe/runtime/ProgramAnalysis.h"
#include "gpipe/runtime/ScheduleVerifier.h"
#include "gpipe/runtime/Timeline.h"
#include "gpipe/runtime/device/ArenaAllocator.h"
#include "gpipe/runtime/device/DeviceExecutor.h"
#include "gpipe/runtime/device/Transport.h"

#include <deque>
#include <map>
#include <memory>
#include <set>
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
  int64_t offset = -1; ///< its arena block; -1: a view
  int64_t blockBytes = 0; ///< the block with the saved state

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

/// One device during the issue of a step.
struct DeviceRun {
  ArenaAllocator arena;
  char *base = nullptr;
  std::vector<std::vector<DeviceValue>> values; ///< [micro-batch][value id]
  std::vector<char> kept;                       ///< per micro-batch
  size_t placed = 0; ///< buffers taken from the compiler's placement
  /// Bytes live now and at most, in the order the program allocates them.
  int64_t live = 0, liveHigh = 0;
  std::map<int64_t, int64_t> liveAt; ///< offset -> bytes
  int64_t computeCount = 0;
};

/// What one issue runs: a training step, or an evaluation's forward pass
/// over every stage in order on one "micro-batch" of any number of rows.
struct IssuePass {
  const std::vector<std::vector<Instr>> *programs = nullptr; ///< per device
  std::vector<ScheduleStep> order;    ///< each send before its receive
  std::vector<int64_t> rows, offsets; ///< per micro-batch
  bool evaluating = false;
  /// Buffers at the compiler's offsets (the bundle's placement), not the
  /// dry run's.
  bool planned = false;
  std::vector<int64_t> arenaBytes; ///< per device
  std::vector<char *> arenaBase;   ///< per device; null in the dry run
};

/// One instruction's start and end on its stream, for the timeline.
struct TimelineMark {
  unsigned device = 0;
  InstrKind kind = InstrKind::Forward;
  int64_t microbatch = -1;
  double *start = nullptr, *end = nullptr;
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
  std::vector<DeviceMemoryLayout> layout;
  /// Per device: parameters, gradients and optimizer slots, unaligned; and
  /// that plus the training step's live high-water mark.
  std::vector<int64_t> residentExact, livePeak;
  IssuePass training;
  /// The forward-only programs and pass of the last evaluate's row count.
  std::vector<std::vector<Instr>> evaluationPrograms;
  std::unique_ptr<IssuePass> evaluation;
  /// Last stage: the loss op's operands, kept after an evaluation's forward.
  std::vector<char> keptForEvaluation;
  float *lossSlots = nullptr; ///< M floats on the last device
  std::vector<float> hostLosses;
  int64_t steps = 0;

  // Per step.
  DeviceBackend *issue = nullptr; ///< the backend, or the dry run's
  const IssuePass *pass = nullptr;
  std::vector<DeviceRun> runs;
  std::set<MessageKey> sent;
  /// The transport of the backend that issues: the real one, or the dry
  /// run's.
  Transport *transfer = nullptr;
  std::unique_ptr<Transport> transport;
  bool recordTimeline = false;
  std::deque<double> timeSlots; ///< stable addresses for recordTime
  std::vector<TimelineMark> marks;
  Timeline timeline{0};

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
  std::string prepareEvaluation(int64_t rows);
  /// Sizes each device's arena for `placed` by a dry run of its issue.
  std::string placePass(IssuePass &placed);
  /// Issues and runs `pass` on `batch`; "" or the first error.
  std::string runPass(const IssuePass &pass, const Batch &batch);
  void buildTimeline();

  char *allocateBlock(unsigned device, int64_t bytes, int64_t &offset);
  void releaseBlock(unsigned device, int64_t offset);
  /// At least `bytes` of workspace on `device` (kept for later steps).
  std::string reserveWorkspace(unsigned device, int64_t bytes);
  /// The first mismatch between the program and the compiler's placement.
  std::string placementError;
  /// Per device, room for kernels that need more scratch than the plan's.
  std::vector<char *> workspace;
  std::vector<int64_t> workspaceBytes;
  DeviceValue &newValue(unsigned device, unsigned m, int id,
                        std::vector<int64_t> extraBytes = {});
  void freeValue(unsigned device, DeviceValue &value);

  StreamId compute(unsigned d) { return issue->computeStream(d); }
  int64_t rowsOf(unsigned m) const { return pass->rows[m]; }
  bool keepsForEvaluation(unsigned device, int id) const {
    return pass->evaluating && device + 1 == bundle.stages.size() &&
           keptForEvaluation[id];
  }
};

} // namespace gpipe::runtime::device

#endif // GPIPE_RUNTIME_SRC_DEVICE_DEVICEEXECUTORIMPL_H
