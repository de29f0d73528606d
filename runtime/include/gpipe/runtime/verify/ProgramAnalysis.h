//===- ProgramAnalysis.h - What the executors derive from a bundle -*- C++
//-*-===//
//
// Facts about a bundle's stage programs that the executor and the load-time
// checks use: which parameter-gradient results accumulate straight into the
// parameter's gradient, which micro-batches keep their forward values, and
// the names used in messages. When values live and where is the compiler's
// decision, carried by the bundle's placement.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_PROGRAMANALYSIS_H
#define GPIPE_RUNTIME_PROGRAMANALYSIS_H

#include "gpipe/runtime/bundle/Bundle.h"

#include <string>
#include <vector>

namespace gpipe::runtime {

/// "forward", "recv activation", ...: an instruction kind in the timeline.
const char *instructionName(InstrKind kind);

/// "forward of stage 2, micro-batch 1" and the like, as in the schedule's
/// diagnostics (`device` runs it).
std::string describeInstruction(const Instr &instr, unsigned device);

/// The parameter whose Param op in `stage`'s forward defines value `id`, or
/// "" when another op defines it.
std::string paramDefining(const StageProgram &stage, int id);

/// A batch norm's running statistics: the parameters that hold them (their
/// gradient buffers accumulate the mini-batch's sums), the rows a
/// mini-batch normalises per channel and the momentum of the update.
struct RunningStatistics {
  unsigned stage = 0;
  std::string mean, variance;
  int64_t count = 0;
  float momentum = 0.1f;
};
/// Those of every batch norm of `bundle`'s forwards, in stage order.
std::vector<RunningStatistics> runningStatisticsOf(const Bundle &bundle);

/// The scratch bytes `op`'s kernels need while it runs (OpTable.h's
/// scratchBytesOf), from its operands' specs in `values`.
int64_t scratchBytesOf(const Op &op, const std::vector<ValueSpec> &values);

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

/// kept[stage][microbatch]: whether that micro-batch's backward finds its
/// forward values instead of recomputing them (KeptForwardValues.h: under
/// `bundle.remat`, and wherever the backward directly follows the forward).
std::vector<std::vector<char>> keptForwardValuesOf(const Bundle &bundle);

/// [device][instruction]: a gradient receive whose wait the device issues
/// after the recompute of the backward that follows it
/// (KeptForwardValues.h's recomputesWhileReceiving), given `kept` from
/// keptForwardValuesOf.
std::vector<std::vector<char>>
recomputesWhileReceivingOf(const Bundle &bundle,
                           const std::vector<std::vector<char>> &kept);

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_PROGRAMANALYSIS_H
