//===- PipelineSchedule.h - Per-device pipeline programs and their checks -===//
//
// A pipeline schedule is one straight-line program per device: the order in
// which the device loads model inputs, runs its stage forward and backward
// for each micro-batch, sends and receives activations (forward) and
// gradients (backward), and applies the single optimizer step.
//
// This file builds the GPipe fill-drain schedule and verifies any schedule
// (generated or written by hand): matching send/recv, freedom from deadlock,
// and the dependences of every forward and backward. It has no MLIR
// dependency; the gpipe-unroll-schedule and gpipe-verify-schedule passes
// translate between it and IR.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_ANALYSIS_PIPELINESCHEDULE_H
#define GPIPE_ANALYSIS_PIPELINESCHEDULE_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpipe::schedule {

enum class InstrKind {
  LoadInput, ///< copy micro-batch `microbatch` of model input `inputName`
  Forward,   ///< run the forward of `stage` on micro-batch `microbatch`
  Backward, ///< run the backward of `stage` on `microbatch`, accumulating grads
  /// Zero-bubble schedules split the backward: Backward then computes only
  /// what flows back (the input gradients, B) and this runs the rest, the
  /// parameter gradients of `stage` on `microbatch` (W).
  BackwardWeights,
  Send, ///< send `direction` tensor `channel` of `microbatch` to `peer`
  Recv, ///< receive it from `peer`
  /// Wait until `peer` has received the Send of this device with the same
  /// `direction`, `stage`, `microbatch` and `channel`: until then the sent
  /// value's buffer stays as it is (Program::sendWindow).
  WaitSend,
  OptimizerStep, ///< apply the accumulated gradients once
};

/// Forward, Backward or BackwardWeights: the instructions that run a stage.
inline bool isCompute(InstrKind kind) {
  return kind == InstrKind::Forward || kind == InstrKind::Backward ||
         kind == InstrKind::BackwardWeights;
}

enum class Direction { Activation, Gradient };

struct Instr {
  InstrKind kind = InstrKind::Forward;
  /// All but OptimizerStep: the stage of this device the instruction serves
  /// (the one a load or receive feeds, or whose result a send carries); a
  /// device runs more than one under interleaving (Program).
  unsigned stage = 0;
  unsigned microbatch = 0; ///< all but OptimizerStep
  unsigned peer = 0;    ///< Send/Recv/WaitSend: the other device
  unsigned channel = 0; ///< Send/Recv/WaitSend: index of the boundary tensor
  Direction direction = Direction::Activation; ///< Send/Recv/WaitSend
  std::vector<int64_t> shape; ///< Send/Recv: the micro-batch tensor shape
  std::string elementType;    ///< Send/Recv: e.g. "f32"
  std::string inputName;      ///< LoadInput
  int64_t rows = 0;           ///< rows of the micro-batch (all but OptimizerStep)
};

/// Short human-readable form used in diagnostics, e.g.
/// "recv activation from device 0, micro-batch 2, channel 1".
std::string describe(const Instr &instr);

struct DeviceProgram {
  unsigned device = 0;
  std::vector<Instr> instrs;
};

/// K devices run K * numVirtualStages stages, round-robin: stage s on device
/// s mod K, so device d runs stages d, d + K, d + 2K, ... (interleaved 1F1B's
/// placement; one stage per device without virtual stages). A transfer goes
/// between adjacent stages: activations from s to s + 1, gradients back.
struct Program {
  unsigned numMicrobatches = 0;
  unsigned numVirtualStages = 1;
  /// How sends complete.
  ///  - 0: a send is done when it is issued (the transport copies the value,
  ///    or holds the sender until the peer receives it); no WaitSend.
  ///  - N >= 1: a send only posts its value, and the device goes on. A
  ///    WaitSend after it, on the same device and before the optimizer step,
  ///    waits until the peer has received it; the value's buffer is kept
  ///    until then (the memory plan counts it). At most N sends to one peer
  ///    are posted and not yet awaited at any point of a program.
  unsigned sendWindow = 0;
  std::vector<DeviceProgram> devices; ///< devices[d].device == d
};

/// The device of `stage` when `numDevices` devices run the stages
/// round-robin.
inline unsigned deviceOfStage(unsigned stage, unsigned numDevices) {
  return numDevices == 0 ? 0 : stage % numDevices;
}

/// A tensor that crosses the boundary between stage s and stage s+1 (in the
/// forward direction; its gradient crosses back). Shapes are at the full
/// batch, dimension 0 being the batch.
struct BoundaryTensor {
  std::vector<int64_t> shape;
  std::string elementType;
};

struct PipelineSpec {
  unsigned numStages = 1; ///< all of them: devices x virtual stages
  /// Stages per device (V); the K = numStages / V devices run them
  /// round-robin (Program). Must divide numStages.
  unsigned numVirtualStages = 1;
  unsigned numDevices() const {
    return numVirtualStages ? numStages / numVirtualStages : 0;
  }
  unsigned numMicrobatches = 1;
  int64_t batchSize = 1;
  /// Size numStages - 1: boundaries[s] are the tensors from stage s to s+1;
  /// the index in the vector is the channel number.
  std::vector<std::vector<BoundaryTensor>> boundaries;
  /// Size numStages: the model inputs each stage reads (loaded per micro-batch).
  std::vector<std::vector<std::string>> stageInputs;
};

/// Rows of each micro-batch when `batchSize` rows are split into
/// `numMicrobatches`: the first batchSize % M micro-batches get one row more
/// than the others (sizes differ by at most one, in order). Fails with a
/// message when M is 0 or larger than the batch.
struct MicrobatchSplit {
  std::vector<int64_t> rows;
  std::string error;
};
MicrobatchSplit splitMicrobatches(int64_t batchSize, unsigned numMicrobatches);

/// Stage s runs on device s. For each device, in order: for every micro-batch
/// m = 0..M-1: recv activations (s > 0), load inputs, forward, send
/// activations (s < K-1); then for m = M-1..0 (reverse, so the last
/// micro-batch forwarded is the first one back): recv gradients (s < K-1),
/// backward, send gradients (s > 0); then one optimizer step.
/// Precondition: the spec is consistent (checked by the caller); the split
/// must succeed.
Program buildGPipeSchedule(const PipelineSpec &spec);

/// Gives `program` (which has no WaitSend yet) sends that complete in the
/// background, at most `window` >= 1 in flight to each peer: before a send
/// that would exceed the window, a WaitSend for the oldest send still in
/// flight to that peer; before the optimizer step (or at the end), one for
/// each send still in flight, oldest first. A wait thus comes as late as the
/// window allows, and each sent buffer is kept at most until `window` more
/// values have gone to the same peer.
void placeSendWaits(Program &program, unsigned window);

struct Violation {
  unsigned device = 0;
  std::size_t instrIndex = 0; ///< index in that device's program
  std::string message;        ///< names the device, micro-batch and op
};

/// Checks, reporting every violation found (empty means the program is sound):
///  - every Send has exactly one Recv with the same direction, endpoints,
///    micro-batch and channel, and they agree on shape and element type; a
///    Recv with no Send is reported too;
///  - the program cannot deadlock; a deadlock names each blocked device and
///    what it waits for. Without a send window, even when every send blocks
///    until its receive is posted (rendezvous semantics, the strictest a
///    transport may have); with one, under its own semantics: sends never
///    block, a receive waits for its send and a WaitSend for the receive;
///  - with a send window, every Send has exactly one WaitSend after it and
///    before the optimizer step, every WaitSend has its Send before it, and
///    no point of a program has more sends in flight to one peer than the
///    window; without one, no WaitSend;
///  - per device and stage, every micro-batch in [0, numMicrobatches) has
///    exactly one Forward and one Backward, the Forward first; a Forward
///    comes after the activation receives and input loads of its micro-batch,
///    a Backward after its gradient receives; a Send comes after the
///    Forward/Backward that produces it;
///  - a program that splits its backward (any BackwardWeights) has exactly
///    one BackwardWeights per micro-batch, after that micro-batch's Backward;
///  - exactly one OptimizerStep per device, after all of its Backwards and
///    BackwardWeights.
std::vector<Violation> verifySchedule(const Program &program);

} // namespace gpipe::schedule

#endif // GPIPE_ANALYSIS_PIPELINESCHEDULE_H
