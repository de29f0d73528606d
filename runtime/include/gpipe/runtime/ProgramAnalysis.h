//===- ProgramAnalysis.h - What the executors derive from a bundle -*- C++ -*-===//
//
// Facts about a bundle's stage programs that every executor (the CPU one in
// Executor.h and the device one in device/DeviceExecutor.h) uses the same
// way: when each value dies, which parameter-gradient results accumulate
// straight into the parameter's gradient, and the names used in messages.
// Sharing them keeps both executors' memory use equal to the plan's
// (gpipe-plan-memory models exactly these rules).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_PROGRAMANALYSIS_H
#define GPIPE_RUNTIME_PROGRAMANALYSIS_H

#include "gpipe/runtime/Bundle.h"

#include <string>
#include <vector>

namespace gpipe::runtime {

/// "forward", "recv activation", ...: an instruction kind in the timeline.
const char *instructionName(InstrKind kind);

/// "forward of stage 2, micro-batch 1" and the like, as in the schedule's
/// diagnostics.
std::string describeInstruction(const Instr &instr, unsigned device);

/// Per backward op of a stage, per result: the parameter whose gradient that
/// result accumulates into directly ("" = a value of its own), and the
/// AccumulateGrad ops made redundant by it. A parameter-gradient result whose
/// only use is one AccumulateGrad is accumulated by its kernel: no
/// parameter-sized temporary per micro-batch.
struct GradientFusion {
  std::vector<std::vector<std::string>> accumulatesInto;
  std::vector<char> skip;
};
GradientFusion fuseGradientAccumulation(const StageProgram &stage);

/// When the values of one stage die, for a micro-batch whose forward values
/// are kept for its backward ([1]) and for one that recomputes them ([0]).
/// A value is freed after its last use in the op list that uses it last,
/// unless a later instruction needs it: a stage output waits for its send, a
/// stage input gradient for its send, and what the backward reads waits for
/// the backward.
struct StageLiveness {
  std::vector<char> keptForBackward; ///< read by the backward
  std::vector<char> stashed;         ///< stage inputs read after the forward
  std::vector<std::vector<int>> forwardFree[2];
  std::vector<std::vector<int>> recomputeFree;
  std::vector<std::vector<int>> backwardFree[2];

  bool neededAfterForward(int id, bool kept) const {
    return kept ? keptForBackward[id] : stashed[id];
  }
};
/// `skipBackward`: GradientFusion::skip of the stage.
StageLiveness computeLiveness(const StageProgram &program,
                              const std::vector<char> &skipBackward);

/// Whether device `device` keeps the forward values of `microbatch` for its
/// backward under `remat`; `lastForward` is the micro-batch it forwards last.
bool keepsForwardValues(RematPolicy remat, unsigned microbatch,
                        unsigned lastForward);

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_PROGRAMANALYSIS_H
