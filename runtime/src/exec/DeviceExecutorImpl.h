//===- DeviceExecutorImpl.h - The device executor's state -------*- C++ -*-===//
//
// Private to runtime/src/device: what the device executor keeps between
// steps and during the issue of one, shared by DeviceExecutor.cpp (creation,
// steps, evaluation, the public API), DeviceIssue.cpp (buffers and
// instructions) and DeviceOps.cpp (one op's kernels).
//
// Buffers. Every value a step defines lives where the compiler's placement
// (the bundle's memory_plan buffers) puts it: the buffer that instruction i
// defines for value v. The executor decides no lifetime and no offset; it
// checks that each buffer has the bytes its program needs (a dry run at
// creation) and PlacementVerifier has checked that no two live buffers share
// a byte.
//
// Issue order and hazards. Work on one stream runs in issue order, so a buffer
// that only device d's compute stream touches can be reused as soon as the
// host has issued its last use. Transfers keep it that way (Transport.h): a
// send reads the sent buffer in the sender's compute-stream order; a receive
// writes its buffer in the receiver's stream order. These are the memory
// planner's rules (MemoryPlanner.h).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_SRC_DEVICE_DEVICEEXECUTORIMPL_H
#define GPIPE_RUNTIME_SRC_DEVICE_DEVICEEXECUTORIMPL_H

#include "gpipe/runtime/backends/GeneratedCode.h"
#include "gpipe/runtime/exec/DeviceExecutor.h"
#include "gpipe/runtime/exec/Timeline.h"
#include "gpipe/runtime/transport/Transport.h"
#include "gpipe/runtime/verify/ProgramAnalysis.h"
#include "gpipe/runtime/verify/ScheduleVerifier.h"

#include <cmath>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
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
  /// A view of a parameter's own storage (unchanged within a pass).
  bool parameter = false;
  /// Layer norm: mean, rstd. Attention: qkv, lse, context. Cross-entropy:
  /// probs. Dropout: the mask (bytes) in saved[0].
  char *saved[3] = {nullptr, nullptr, nullptr};

  int64_t numElements() const { return product(shape); }
  float *f() const { return reinterpret_cast<float *>(data); }
  const int32_t *i() const { return reinterpret_cast<const int32_t *>(data); }
  int64_t rowsOf() const {
    return shape.empty() ? 1 : numElements() / shape.back();
  }
  int64_t colsOf() const { return shape.empty() ? 1 : shape.back(); }
};

/// The scratch bytes of `op` (OpTable.h's scratchBytesOf) at this
/// micro-batch's operand shapes.
inline int64_t scratchBytesAt(const Op &op,
                              const std::vector<const DeviceValue *> &in) {
  std::vector<const int64_t *> shapes;
  std::vector<size_t> ranks;
  for (const DeviceValue *value : in) {
    shapes.push_back(value->shape.data());
    ranks.push_back(value->shape.size());
  }
  return scratchBytesOf(op.kind, shapes.data(), ranks.data(), shapes.size(),
                        op.window);
}

struct DeviceParameter {
  ParamSpec spec;
  unsigned device = 0;
  int64_t size = 0;
  float *value = nullptr, *grad = nullptr;
  float *slots[2] = {nullptr, nullptr};
  /// A batch norm's running mean or variance: updated from its gradient
  /// buffer's sums, never by the optimizer.
  bool runningStatistic = false;
  /// `grad` holds an earlier step's gradient: this step's first write
  /// overwrites it instead of accumulating (issue time, host only).
  bool gradientStale = false;
  /// A tied copy: the parameter it copies (ParamSpec::tied), else null.
  DeviceParameter *tiedRoot = nullptr;
};

/// A batch norm's running statistics on their device.
struct DeviceRunningStatistics {
  DeviceParameter *mean = nullptr, *variance = nullptr;
  int64_t count = 0;
  float momentum = 0.1f;
};

/// The compiler's buffers of one instruction of a device's training
/// program: the value each holds, and the scratch of its ops in op order.
struct InstrBuffers {
  /// By value id, sorted.
  std::vector<std::pair<int, const PlacedBuffer *>> values;
  std::vector<const PlacedBuffer *> scratch;
};

/// One device during the issue of a step.
struct DeviceRun {
  char *base = nullptr;
  /// [the device's stage][micro-batch][value id]: a device runs one stage,
  /// or several under interleaving (Bundle::localStage).
  std::vector<std::vector<std::vector<DeviceValue>>> values;
  std::vector<std::vector<char>> kept; ///< [the device's stage][micro-batch]
  /// The stage of the instruction being issued, and its index among the
  /// device's.
  unsigned stage = 0, local = 0;
  /// The values and kept flag of micro-batch m of the current stage.
  std::vector<DeviceValue> &at(unsigned m) { return values[local][m]; }
  char &keeps(unsigned m) { return kept[local][m]; }
  /// The training instruction whose buffers the current one uses, and how
  /// many of its scratch buffers the current one has taken.
  size_t planInstr = 0, scratchTaken = 0;
  int64_t computeCount = 0;
  /// Gradient receives allocated at their instruction, whose wait and copy
  /// the next backward issues after its recompute.
  struct DeferredRecv {
    TransferKey key;
    void *data = nullptr;
    int64_t bytes = 0;
  };
  std::vector<DeferredRecv> deferredRecvs;
  bool defersRecv = false; ///< the receive being issued is one of them
  bool gradientsMarked = false; ///< markGradientsStale ran this step
};

/// What one issue runs: a training step, or an evaluation: the forward
/// pass over every stage in order, chunk by chunk of at most the first
/// micro-batch's rows, each chunk in the buffers of that micro-batch.
struct IssuePass {
  const std::vector<std::vector<Instr>> *programs = nullptr; ///< per device
  std::vector<ScheduleStep> order;    ///< each send before its receive
  std::vector<int64_t> rows, offsets; ///< per micro-batch (or chunk)
  bool evaluating = false;
  /// Per device and instruction, the training instruction whose buffers it
  /// uses; empty: its own (the training pass).
  std::vector<std::vector<size_t>> planInstr;
};

/// One instruction's start and end on its stream, for the timeline.
struct TimelineMark {
  unsigned device = 0;
  InstrKind kind = InstrKind::Forward;
  bool recompute = false; ///< a backward's recompute, apart from it
  /// Not an instruction: the zeroing of the device's gradients (side work).
  bool zeroing = false;
  int64_t microbatch = -1;
  int64_t stage = -1;
  double *start = nullptr, *end = nullptr;
};

/// One op's (or fused pair's) kernels in a profiled step.
struct OpMark {
  unsigned device = 0;
  const char *section = "";
  const char *first = "", *second = nullptr; ///< second: a fused pair's
  double *start = nullptr, *end = nullptr;
};

/// "nan", "inf" or "-inf": the guard's messages.
inline const char *nonFiniteName(double value) {
  return std::isnan(value) ? "nan" : value > 0 ? "inf" : "-inf";
}

} // namespace gpipe::runtime::device::detail

namespace gpipe::runtime::device {
using namespace detail;

struct DeviceExecutor::Impl {
  Bundle bundle;
  DeviceExecutorConfig config;
  /// The bundle's generated kernels, loaded once at creation (null: none).
  /// Declared before the backend, so unloaded after it is gone: no stream
  /// of it still runs their code.
  std::unique_ptr<LoadedCode> code;
  std::unique_ptr<DeviceBackend> backend;
  std::vector<std::unique_ptr<DeviceParameter>> params;
  std::unordered_map<std::string, DeviceParameter *> paramByName;
  /// Each tied parameter and its copies, in the bundle's order (the root
  /// first): their gradients are summed in this order before the update.
  std::vector<std::vector<DeviceParameter *>> tiedGroups;
  /// `param` and, for a tied parameter's root, its copies.
  std::vector<DeviceParameter *> copiesOf(DeviceParameter *param) const {
    for (const std::vector<DeviceParameter *> &group : tiedGroups)
      if (group.front() == param)
        return group;
    return {param};
  }
  std::vector<std::vector<DeviceParameter *>> paramsOf; ///< per device
  /// Per device: its batch norms' running statistics.
  std::vector<std::vector<DeviceRunningStatistics>> runningStatistics;
  /// Whether the ops being issued are a recompute: a batch norm then does
  /// not add its statistics again.
  bool recomputing = false;
  std::vector<GradientFusion> fusion;                   ///< per stage
  /// [stage][micro-batch]: its backward finds the forward values (no
  /// recompute); keptForwardValuesOf.
  std::vector<std::vector<char>> keptForward;
  /// [device][instruction]: a gradient receive waited for only after the
  /// next backward's recompute (recomputesWhileReceivingOf).
  std::vector<std::vector<char>> recomputesWhileReceiving;
  /// Per device: its program has BackwardWeights (its Backward runs B only).
  std::vector<char> splitsBackward;
  std::vector<DeviceMemoryLayout> layout;
  /// Per device: parameters, gradients and optimizer slots, unaligned.
  std::vector<int64_t> residentExact;
  /// Per device and training instruction, the compiler's buffers.
  std::vector<std::vector<InstrBuffers>> placement;
  std::vector<char *> arenaBase; ///< per device; null in the dry run
  IssuePass training;
  /// The forward-only programs and pass of the last evaluate's row count.
  std::vector<std::vector<Instr>> evaluationPrograms;
  std::unique_ptr<IssuePass> evaluation;
  /// An evaluation's loss per chunk and the loss op's operands (prediction,
  /// target), copied to the host as each chunk's forward ends.
  std::vector<float> evaluationLosses;
  HostTensor evaluationOutputs[2];
  float *lossSlots = nullptr; ///< M floats on the last stage's device
  std::vector<float> hostLosses;
  int64_t steps = 0;
  /// Serializes the reads of parameters, gradients and optimizer state:
  /// they may run concurrently (the C API's const calls), and each enqueues
  /// a copy and synchronizes the backend, which is not reentrant.
  std::mutex copyBacks;
  /// The backend's staging memory (DeviceBackend::allocateStaging) and,
  /// during a pass, where each input of the batch is read from: its copy
  /// there, or the caller's memory when the backend stages nothing.
  char *staging = nullptr;
  int64_t stagingBytes = 0;
  bool stagesNothing = false;
  std::map<std::string, const char *> inputSource;

  // Per step.
  DeviceBackend *issue = nullptr; ///< the backend, or the dry run's
  const IssuePass *pass = nullptr;
  /// Whether a GEMM by `b` may use the backend's packed copy
  /// (GemmBatch::bIsParameter): a parameter multiplied by more than one
  /// micro-batch (or chunk) in this pass, which pays for the packing.
  bool packable(const DeviceValue &b) const {
    return b.parameter && pass->rows.size() > 1;
  }
  std::vector<DeviceRun> runs;
  /// The transport of the backend that issues: the real one, or the dry
  /// run's.
  Transport *transfer = nullptr;
  std::unique_ptr<Transport> transport;
  bool recordTimeline = false;
  std::deque<double> timeSlots; ///< stable addresses for recordTime
  std::vector<TimelineMark> marks;
  bool profileOps = false;
  bool timingOps = false;     ///< this pass marks its ops (profileOps, timed)
  std::deque<OpMark> opMarks; ///< stable addresses for OpTimer
  Timeline timeline{0};

  std::string issueStep(const Batch *batch, bool dryRun);
  /// Starts `device`'s gradients (but running statistics', zeroed at the
  /// step's start) afresh: each one's first write of the step overwrites it,
  /// so that no pass over them zeroes what the backward writes anyway.
  void markGradientsStale(unsigned device);
  /// Zeroes the gradients of `device` that no op has written this step
  /// (before they are read) on its compute stream, marked as side work when
  /// `timed`.
  void zeroStaleGradients(unsigned device, bool timed);
  /// A backward's recompute, then the receives of its gradients that waited
  /// for it (recomputesWhileReceiving); each marked apart when `timed`.
  std::string issueRecompute(unsigned device, const Instr &backward,
                             bool timed);
  /// An event of the timeline: its start recorded on `stream` now, its end
  /// by endMark.
  TimelineMark startMark(unsigned device, const Instr &instr, StreamId stream);
  void endMark(const TimelineMark &mark, StreamId stream);
  std::string issueInstr(unsigned device, const Instr &instr,
                         const Batch *batch);
  /// ops[begin, end) (all of them by default); `backward`: ops of the
  /// stage's backward, whose indices the gradient fusion uses.
  /// Marks an op's (or fused pair's) kernels on the device's compute stream
  /// while it lives, when the pass times its ops.
  struct OpTimer {
    OpTimer(Impl &impl, unsigned device, const char *section, const Op &op,
            const Op *fusedWith);
    ~OpTimer();
    Impl &impl;
    OpMark *mark = nullptr;
  };
  std::string issueOps(unsigned device, unsigned m, const std::vector<Op> &ops,
                       const char *section, bool backward, size_t begin = 0,
                       size_t end = ~size_t(0));
  std::string issueOp(unsigned device, unsigned m, const Op &op, size_t index,
                      bool backward);
  /// An op over images (conv2d, the pools, flatten and their gradients:
  /// DeviceImageOps.cpp) with issueOp's operands, results (placed; null when
  /// not needed), result 0's value (its shape) and which results accumulate
  /// into a parameter's gradient.
  std::string issueImageOp(unsigned device, const Op &op,
                           const std::vector<const DeviceValue *> &in,
                           const std::vector<float *> &out,
                           const DeviceValue *result,
                           const std::vector<bool> &accumulateInto);
  /// `first` and the next op, `second`, as one fused kernel (OpTable.h's
  /// FusionKind; StageValidation checked the pair).
  std::string issueFused(unsigned device, unsigned m, const Op &first,
                         const Op &second);
  std::string checkModelInputs(const Batch &batch) const;
  std::string checkInputRange(const Batch &batch, unsigned st, unsigned d,
                              size_t k, const Op &op, int operand, int64_t low,
                              int64_t limit, const char *what) const;
  /// Builds the compiler's buffers per instruction; "" or why the
  /// placement does not fit the programs.
  std::string indexPlacement();
  std::string prepareEvaluation(int64_t rows);
  /// Issues `pass` against a backend that runs nothing: every buffer it
  /// asks for must be in the compiler's placement, large enough.
  std::string verifyPass(const IssuePass &pass);
  /// Copies the batch's inputs into staging memory (grown as needed) and
  /// fills inputSource.
  std::string stageInputs(const Batch &batch);
  /// Waits for the issued pass; on failure the transport abandons what it
  /// has in flight. "" or the error.
  std::string synchronizePass();
  /// Once every backward of the step is issued: sums each tied group's
  /// gradients, in the group's order, into each of its copies
  /// (DeviceTiedParameters.cpp); "" or the error.
  std::string sumTiedGradients();
  /// Issues and runs `pass` on `batch`; "" or the first error.
  std::string runPass(const IssuePass &pass, const Batch &batch);
  /// The last stage's forward of an evaluation chunk: its loss and the loss
  /// op's operands, copied to the host.
  void copyEvaluationOutputs(unsigned m);
  /// After an evaluation: the last device's losses and outputs, from its
  /// process to every other (Transport::shareFrom).
  std::string shareEvaluationOutputs();
  /// The last step's timeline from the marks (shared across processes);
  /// "" or an error.
  std::string buildTimeline();

  /// The compiler's buffer for value `id` (with `bytes` at most) or the
  /// next scratch buffer of the current instruction; null with
  /// placementError set when the placement has none large enough.
  char *valueBuffer(unsigned device, int id, int64_t bytes);
  char *scratchBuffer(unsigned device, int64_t bytes);
  /// At least `bytes` of workspace on `device` (kept for later steps).
  std::string reserveWorkspace(unsigned device, int64_t bytes);
  /// Copies this step's StepScalars under `optimizer` into `device`'s memory
  /// on stream `s` (allocated at the first step); the updates read them.
  std::string writeStepScalars(unsigned device, StreamId s,
                               const OptimizerConfig &optimizer);
  /// The first mismatch between the program and the compiler's placement.
  std::string placementError;
  /// Per device, room for kernels that need more scratch than the plan's.
  std::vector<char *> workspace;
  std::vector<int64_t> workspaceBytes;
  DeviceValue &newValue(unsigned device, unsigned m, int id,
                        std::vector<int64_t> extraBytes = {});

  StreamId compute(unsigned d) { return issue->computeStream(d); }
  int64_t rowsOf(unsigned m) const { return pass->rows[m]; }
  /// The batch row where micro-batch (or chunk) m starts: a data-parallel
  /// replica's training slice starts at replica * bundle.batch.
  int64_t firstRow(unsigned m) const { return rowBase + pass->offsets[m]; }
  int64_t rowBase = 0;

  //===-- gradient statistics (DeviceGradients.cpp): clipping, the guard --===//
  /// Whether a step measures its gradients before the optimizer steps.
  bool measuresGradients() const {
    return config.optimizer.clipGradNorm > 0 || config.optimizer.checkFinite;
  }
  /// At the first optimizer step of a training pass that measures its
  /// gradients: the replicas' means, each gradient's sum of squares, one
  /// synchronize, then the guard's checks of the losses and gradients and
  /// the clipping factor. "" or the error (nonFinite set for the guard's).
  std::string prepareOptimizerStep();
  /// Where the backend decides on its devices (DeviceGating.h): each device
  /// waits for every device's sums and writes its own gate, which its
  /// updates read; "" or an allocation error.
  std::string issueDecisions(DeviceGating &gating);
  /// After the step's synchronize, where the devices decided: the host's
  /// checks from the same sums (the message naming what was not finite, the
  /// norm), and whether every device decided as the host; "" or the error.
  std::string checkDecisions();
  /// After the synchronize that brought the sums and the losses: the guard's
  /// checks in order (the losses, then each gradient in the bundle's order),
  /// the norm and the clipping factor; "" or the guard's error (nonFinite
  /// set).
  std::string judgeGradients(
      const std::vector<float> &losses,
      const std::unordered_map<const DeviceParameter *, double> &sums);
  /// After the optimizer steps (the guard), copied to the host in stream
  /// order: the flags the gated updates raised, where the devices decided;
  /// else each parameter's sum of squares.
  std::string issueParameterCheck();
  /// The position of `param` in paramsOf[param->device].
  size_t indexOnDevice(const DeviceParameter *param) const;
  /// After the step's synchronize: "" or the first parameter that is not
  /// finite (nonFinite set).
  std::string checkParameters();
  /// Per device: kSquareParts doubles per parameter of paramsOf[d] (device
  /// memory, allocated at the first use) and their host copy.
  struct SquareSums {
    std::vector<double *> device;
    std::vector<std::vector<double>> host;
  };
  /// The gradients' (before the update) and the parameters' (after it).
  SquareSums gradientSquares, parameterSquares;
  /// This step's: the gradients' factor, their norm, whether the replicas'
  /// means were taken already, whether the guard stopped it.
  float gradientScale = 1.0f;
  std::optional<double> gradientNorm;
  bool gradientsAveraged = false, nonFinite = false;
  /// zeroStaleGradients ran for this step's devices.
  bool staleGradientsZeroed = false;
  /// This step's decisions on the devices (null: the host decided), and
  /// each device's gate (device memory, allocated at the first use).
  DeviceGating *decidingGating = nullptr;
  std::vector<StepGate *> gates;
  /// Each device's StepScalars (device memory, allocated at the first step)
  /// and the host values they are copied from (staging memory, or
  /// ownStepScalars), written as each step issues its updates and read by
  /// the copy before the step's synchronize.
  std::vector<StepScalars *> stepScalars;
  StepScalars *hostStepScalars = nullptr;
  std::vector<StepScalars> ownStepScalars;
  /// Where the devices decide and the guard is on: per device, the
  /// kUpdated* flags of each parameter of paramsOf[d] that its update
  /// raises (device memory), and their host copy (the check after the
  /// update, instead of the parameters' sums of squares).
  std::vector<int32_t *> updatedFlags;
  std::vector<std::vector<int32_t>> hostUpdatedFlags;
  /// `param`'s flags on `device`, or null where nothing is flagged.
  int32_t *updatedFlagsOf(unsigned device, const DeviceParameter *param);
};

} // namespace gpipe::runtime::device

#endif // GPIPE_RUNTIME_SRC_DEVICE_DEVICEEXECUTORIMPL_H
