//===- MemoryPlanner.h - Static per-device memory plans ---------*- C++ -*-===//
//
// Replays one device's GPipe instruction stream with the runtime's allocation
// rules and gives every buffer it allocates an offset in one static arena.
//
// The rules (the runtime's executor follows them; docs/Memory.md):
//  - Parameters, their gradients and the optimizer slots are resident.
//  - A value of a micro-batch is allocated when the op that defines it
//    starts (with the state the op saves for its backward), or when the
//    instruction that loads or receives it runs.
//  - It is freed after the last op of its op list that reads it, unless a
//    later instruction needs it: a stage output waits for its send, a stage
//    input gradient for its send, and what the backward reads (every forward
//    value it reads when the micro-batch keeps its forward values, only the
//    stage inputs, and the results a selective recompute reads without
//    redefining them, when it recomputes) waits for the backward. What is
//    left when a forward or backward ends and is not so needed is freed then.
//  - A split backward (zero-bubble schedules) is one op sequence, B then W,
//    paused between a Backward and its BackwardWeights: what W reads (the
//    output gradients of dense layers, their inputs) outlives the Backward
//    until its last read in W.
//  - A send hands its buffer over unless the device still needs the value,
//    in which case it sends a copy that lives only during the send.
//  - Ops may need scratch for the duration of their kernel.
//
// Kept free of MLIR: the gpipe-plan-memory pass builds the input from IR.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_ANALYSIS_MEMORYPLANNER_H
#define GPIPE_ANALYSIS_MEMORYPLANNER_H

#include "gpipe/runtime/verify/KeptForwardValues.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gpipe {

/// Every buffer's size, and so its offset, is a multiple of this many bytes:
/// the alignment that cuBLAS's tensor-core kernels and 128-bit vector loads
/// need on a GPU (a byte mask or a 4-byte loss would otherwise leave the next
/// buffer's floats at any multiple of 4). The runtime rounds a value's bytes
/// the same way and refuses offsets that are not multiples of it
/// (gpipe::runtime::kPlacedBufferGranule).
constexpr int64_t kBufferGranule = 16;

/// Bytes of a buffer holding `rows` batch rows: fixed + perRow * rows.
struct ByteSize {
  int64_t fixed = 0;
  int64_t perRow = 0;
  int64_t at(int64_t rows) const { return fixed + perRow * rows; }
};

struct PlannedOp {
  std::vector<int> operands; ///< value ids read
  std::vector<int> results;  ///< value ids defined (allocated), no views
  ByteSize scratch;          ///< live while the op's kernel runs
  std::string name;          ///< for reports: "layer_norm", ...
};

/// One stage's straight-line programs over value ids 0..values.size()-1.
struct PlannedStage {
  std::vector<ByteSize> values;        ///< a value's bytes with its saved state
  std::vector<int> inputs;             ///< stage input value ids
  std::vector<unsigned> inputChannels; ///< per input: channel, or ~0u if a
                                       ///< model input
  std::vector<std::string> inputNames; ///< per input: the model input's name
  std::vector<int> outputs;            ///< per channel to the next stage
  int loss = -1;                       ///< last stage: the loss value
  std::vector<PlannedOp> forward;
  std::vector<PlannedOp> recompute; ///< redefines forward ids
  std::vector<PlannedOp> backward;  ///< without ops whose work is fused away
  /// Zero-bubble schedules: the parameter-gradient ops (W) that a
  /// BackwardWeights runs after the Backward (B, `backward`); a program
  /// without BackwardWeights runs them at the end of its Backward. Empty for
  /// a stage whose backward is not split.
  std::vector<PlannedOp> backwardWeights;
  std::vector<int> outputGrads;     ///< per channel from the next stage
  std::vector<int> inputGrads;      ///< per channel to the previous stage
  int64_t residentBytes = 0;        ///< parameters, gradients, optimizer slots
};

enum class PlannedInstrKind {
  LoadInput,
  Forward,
  Backward,
  BackwardWeights, ///< the stage's `backwardWeights` ops
  SendActivation,
  RecvActivation,
  SendGradient,
  RecvGradient,
  /// The program's waits for its sends (a send window): a sent value's
  /// buffer is kept until its wait.
  WaitSendActivation,
  WaitSendGradient,
  OptimizerStep
};

struct PlannedInstr {
  PlannedInstrKind kind = PlannedInstrKind::Forward;
  /// All but OptimizerStep: which of the device's stages (DeviceProgram::
  /// stages) it serves.
  unsigned stage = 0;
  unsigned microbatch = 0;
  unsigned channel = 0;
  std::string inputName; ///< LoadInput
};

enum class KeepPolicy { All, None, Last };

/// The policy in the terms of the rule the runtime, the plan and the
/// simulator share (KeptForwardValues.h).
inline runtime::KeptBeyondAdjacent keptBeyondAdjacentOf(KeepPolicy keep) {
  return keep == KeepPolicy::All    ? runtime::KeptBeyondAdjacent::Everything
         : keep == KeepPolicy::Last ? runtime::KeptBeyondAdjacent::LastForward
                                    : runtime::KeptBeyondAdjacent::Nothing;
}

struct DeviceProgram {
  /// The stages the device runs: one, or V under interleaving (stage d + vK
  /// of the pipeline is stages[v]).
  std::vector<PlannedStage> stages;
  std::vector<PlannedInstr> instrs;
  std::vector<int64_t> microbatchRows;
  /// Which micro-batches keep their forward values for the backward: all
  /// (remat none), none (full), or per stage the one whose forward runs
  /// last.
  KeepPolicy keep = KeepPolicy::None;
};

/// A buffer: live from event `start` up to, not including, event `end`.
struct PlannedBuffer {
  int64_t bytes = 0;
  int64_t start = 0, end = 0;
  int64_t offset = 0;  ///< in the arena, after the resident block
  int microbatch = -1; ///< -1: not a micro-batch's value (scratch, copies)
  int value = -1;
  int64_t instr = 0; ///< the instruction that allocated it
};

struct DeviceMemoryPlan {
  int64_t residentBytes = 0;
  /// The largest sum of live bytes (resident included): what the runtime's
  /// high-water mark will read.
  int64_t peakBytes = 0;
  /// resident + the highest end of a buffer placed by offset: the static
  /// arena, >= peakBytes (the gap is fragmentation).
  int64_t arenaBytes = 0;
  /// The instruction at which the peak is reached and a description of it.
  size_t peakInstr = 0;
  std::string peakWhere;
  /// The most bytes live at one time only because a send of theirs was not
  /// yet waited for (a send window): what sends completing in the
  /// background add to the plan, at most.
  int64_t sendHeldBytes = 0;
  std::vector<PlannedBuffer> buffers;
  /// The first event of each instruction, and one past the last event.
  std::vector<int64_t> instrStart;
};

/// Up to this many buffers per device, the plan's placement travels to the
/// runtime (the bundle's memory_plan.devices[d].buffers).
constexpr size_t kMaxPlacedBuffers = 100000;

/// Words per buffer in the gpipe.placement attribute and the bundle: bytes,
/// offset, start, end, instr, microbatch, value (PlannedBuffer's fields).
constexpr size_t kPlacedBufferWords = 7;

/// Up to this many buffers, planDeviceMemory places them all with the greedy
/// of assignOffsets, whose cost grows with the fragments of the placed
/// buffers live at once (about 22 ms for the 40,000 buffers of
/// BM_MemoryPlanner_PlaceExact/L:156/M:64 here); more are placed by
/// instruction (assignOffsetsByInstruction), whose arena may be a little
/// larger.
constexpr size_t kExactPlacementLimit = 20000;

/// Plans one device. Fails (returns an error message, a full sentence) if
/// the program reads a value that is not live, which the compiler's own
/// verifiers rule out.
std::string planDeviceMemory(const DeviceProgram &program,
                             DeviceMemoryPlan &plan);

/// The replay alone: residentBytes, peakBytes, peakInstr, peakWhere and the
/// buffers' lifetimes, without offsets (arenaBytes stays 0). The placement
/// costs far more than the replay.
std::string replayDeviceMemory(const DeviceProgram &program,
                               DeviceMemoryPlan &plan);

/// Offsets for `buffers` (greedy by size: largest first, each at the lowest
/// offset not overlapping a placed buffer that is live at the same time);
/// returns the arena size they need.
int64_t assignOffsets(std::vector<PlannedBuffer> &buffers);

/// Offsets in allocation order, as an allocator with best-fit reuse of freed
/// holes would give them: O(n log n) whatever the overlap, for sets too large
/// for assignOffsets; returns the arena size.
int64_t assignOffsetsInTimeOrder(std::vector<PlannedBuffer> &buffers);

/// Offsets for the buffers of a replayed program (`plan.buffers`, with
/// `plan.instrStart`), near-linear in their number: the buffers that live
/// within one instruction are placed once per distinct pattern (the
/// micro-batches of a GPipe program repeat a few patterns) inside a block
/// that stands for the instruction; the blocks and the buffers that cross
/// instructions are placed by assignOffsets (assignOffsetsInTimeOrder for
/// sets beyond kExactPlacementLimit). Returns the arena size.
int64_t assignOffsetsByInstruction(DeviceMemoryPlan &plan);

} // namespace gpipe

#endif // GPIPE_ANALYSIS_MEMORYPLANNER_H
