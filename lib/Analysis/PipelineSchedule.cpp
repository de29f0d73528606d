//===- PipelineSchedule.cpp - Pipeline programs and their checks ----------===//
//
// Builds the GPipe fill-drain schedule and verifies arbitrary schedules. The
// verifier is linear (up to hashing) in the total number of instructions so
// that it stays usable on programs of a million instructions.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Analysis/PipelineSchedule.h"
#include "ProgramBuilder.h"

#include <algorithm>
#include <cassert>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

using namespace gpipe;
using namespace gpipe::schedule;

/// Marks "no instruction" in index tables.
static constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

static const char *directionName(Direction direction) {
  return direction == Direction::Activation ? "activation" : "gradient";
}

static bool isTransfer(const Instr &instr) {
  return instr.kind == InstrKind::Send || instr.kind == InstrKind::Recv;
}

/// "1 row", "4 rows".
static std::string countOf(int64_t count, const char *singular,
                           const char *plural) {
  return std::to_string(count) + " " + (count == 1 ? singular : plural);
}

/// Formats a tensor type the way MLIR prints it, e.g. "tensor<4x256xf32>".
static std::string formatTensor(const std::vector<int64_t> &shape,
                                const std::string &elementType) {
  std::string text;
  for (int64_t dim : shape) {
    text += dim < 0 ? "?" : std::to_string(dim);
    text += 'x';
  }
  if (!elementType.empty())
    text += elementType;
  else if (!text.empty())
    text.pop_back();
  return "tensor<" + text + ">";
}

std::string schedule::describe(const Instr &instr) {
  std::string microbatch = ", micro-batch " + std::to_string(instr.microbatch);
  switch (instr.kind) {
  case InstrKind::LoadInput:
    return "load input '" + instr.inputName + "'" + microbatch;
  case InstrKind::Forward:
    return "forward of stage " + std::to_string(instr.stage) + microbatch;
  case InstrKind::Backward:
    return "backward of stage " + std::to_string(instr.stage) + microbatch;
  case InstrKind::BackwardWeights:
    return "weight-gradient backward of stage " + std::to_string(instr.stage) +
           microbatch;
  case InstrKind::Send:
  case InstrKind::Recv: {
    bool isSend = instr.kind == InstrKind::Send;
    return std::string(isSend ? "send " : "recv ") +
           directionName(instr.direction) +
           (isSend ? " to device " : " from device ") +
           std::to_string(instr.peer) + microbatch + ", channel " +
           std::to_string(instr.channel);
  }
  case InstrKind::WaitSend:
    return std::string("wait for the ") + directionName(instr.direction) +
           " sent to device " + std::to_string(instr.peer) + microbatch +
           ", channel " + std::to_string(instr.channel);
  case InstrKind::OptimizerStep:
    return "optimizer step";
  }
  return "unknown instruction";
}

MicrobatchSplit schedule::splitMicrobatches(int64_t batchSize,
                                            unsigned numMicrobatches) {
  MicrobatchSplit split;
  if (numMicrobatches == 0) {
    split.error = "expected at least 1 micro-batch, got 0";
    return split;
  }
  if (batchSize <= 0) {
    split.error =
        "expected a positive batch size, got " + std::to_string(batchSize);
    return split;
  }
  if (static_cast<int64_t>(numMicrobatches) > batchSize) {
    split.error = "cannot split a batch of " +
                  countOf(batchSize, "row", "rows") + " into " +
                  countOf(numMicrobatches, "micro-batch", "micro-batches") +
                  ": expected at most " +
                  countOf(batchSize, "micro-batch", "micro-batches");
    return split;
  }
  int64_t base = batchSize / numMicrobatches;
  int64_t extra = batchSize % numMicrobatches;
  split.rows.reserve(numMicrobatches);
  for (unsigned m = 0; m < numMicrobatches; ++m)
    split.rows.push_back(base + (static_cast<int64_t>(m) < extra ? 1 : 0));
  return split;
}

//===----------------------------------------------------------------------===//
// GPipe schedule
//===----------------------------------------------------------------------===//

Program schedule::buildGPipeSchedule(const PipelineSpec &spec) {
  Program program;
  program.numMicrobatches = spec.numMicrobatches;
  MicrobatchSplit split =
      splitMicrobatches(spec.batchSize, spec.numMicrobatches);
  assert(split.error.empty() && "the micro-batch split must succeed");
  assert(spec.numStages >= 1 && "expected at least one stage");
  assert(spec.boundaries.size() + 1 == spec.numStages &&
         "expected one boundary between each pair of adjacent stages");
  assert(spec.stageInputs.size() == spec.numStages &&
         "expected the inputs of every stage");
  assert(spec.numVirtualStages == 1 && "fill-drain runs one stage a device");
  if (!split.error.empty() || spec.numStages == 0)
    return program;

  const unsigned numStages = spec.numStages;
  const unsigned numMicrobatches = spec.numMicrobatches;
  static const std::vector<BoundaryTensor> noBoundary;
  static const std::vector<std::string> noInputs;
  program.devices.resize(numStages);
  for (unsigned s = 0; s < numStages; ++s) {
    DeviceProgram &device = program.devices[s];
    device.device = s;
    const std::vector<BoundaryTensor> &in =
        s > 0 && s - 1 < spec.boundaries.size() ? spec.boundaries[s - 1]
                                                : noBoundary;
    const std::vector<BoundaryTensor> &out =
        s + 1 < numStages && s < spec.boundaries.size() ? spec.boundaries[s]
                                                        : noBoundary;
    const std::vector<std::string> &inputs =
        s < spec.stageInputs.size() ? spec.stageInputs[s] : noInputs;
    device.instrs.reserve(
        static_cast<std::size_t>(numMicrobatches) *
            (2 + 2 * in.size() + 2 * out.size() + inputs.size()) +
        1);

    ProgramBuilder builder(device, split.rows);
    // Fill: forwards in micro-batch order.
    for (unsigned m = 0; m < numMicrobatches; ++m) {
      builder.addTransfers(InstrKind::Recv, Direction::Activation, s, s - 1, in,
                           m);
      for (const std::string &name : inputs)
        builder.addLoad(name, s, m);
      builder.addCompute(InstrKind::Forward, s, m);
      builder.addTransfers(InstrKind::Send, Direction::Activation, s, s + 1,
                           out, m);
    }
    // Drain: backwards in reverse, the last micro-batch forwarded first back.
    for (unsigned m = numMicrobatches; m-- > 0;) {
      builder.addTransfers(InstrKind::Recv, Direction::Gradient, s, s + 1, out,
                           m);
      builder.addCompute(InstrKind::Backward, s, m);
      builder.addTransfers(InstrKind::Send, Direction::Gradient, s, s - 1, in,
                           m);
    }
    builder.addOptimizerStep();
  }
  return program;
}

//===----------------------------------------------------------------------===//
// Verifier
//===----------------------------------------------------------------------===//

namespace {
/// Identifies one tensor transfer: both ends name it the same way.
struct TransferKey {
  Direction direction;
  unsigned source;
  unsigned dest;
  unsigned microbatch;
  unsigned channel;
  unsigned boundary; ///< between stage `boundary` and `boundary` + 1

  bool operator==(const TransferKey &other) const {
    return direction == other.direction && source == other.source &&
           dest == other.dest && microbatch == other.microbatch &&
           channel == other.channel && boundary == other.boundary;
  }
};

/// Indices of the Send (on the source device) and the Recv (on the
/// destination device) of one transfer.
struct TransferEnds {
  std::size_t send = kNone;
  std::size_t recv = kNone;
};

/// Open-addressing map from TransferKey to TransferEnds with a fixed
/// capacity. A node-based std::unordered_map spent most of the verifier's
/// time chasing pointers on large programs; this is one contiguous array.
class TransferTable {
public:
  /// Room for `maxKeys` distinct keys at a load factor of at most 1/2.
  explicit TransferTable(std::size_t maxKeys) {
    std::size_t capacity = 16;
    while (capacity < 2 * maxKeys)
      capacity *= 2;
    slots.resize(capacity);
    mask = capacity - 1;
  }

  /// The ends of `key`, inserted empty if absent.
  TransferEnds &operator[](const TransferKey &key) {
    for (std::size_t i = hash(key) & mask;; i = (i + 1) & mask) {
      Slot &slot = slots[i];
      if (!slot.used) {
        slot.used = true;
        slot.key = key;
        return slot.ends;
      }
      if (slot.key == key)
        return slot.ends;
    }
  }

private:
  struct Slot {
    TransferKey key{};
    TransferEnds ends;
    bool used = false;
  };

  static std::size_t hash(const TransferKey &key) {
    uint64_t hash = static_cast<uint64_t>(key.direction);
    for (uint64_t field :
         {key.source, key.dest, key.microbatch, key.channel, key.boundary}) {
      // splitmix64-style mixing: cheap and spreads small integers well.
      hash = (hash ^ field) * 0x9e3779b97f4a7c15ULL;
      hash ^= hash >> 31;
    }
    return static_cast<std::size_t>(hash);
  }

  std::vector<Slot> slots;
  std::size_t mask = 0;
};

class ScheduleVerifier {
public:
  explicit ScheduleVerifier(const Program &program) : program(program) {}

  std::vector<Violation> run();

private:
  void checkDevice(unsigned device);
  /// Returns true when every Send and Recv found its counterpart, which the
  /// deadlock simulation needs.
  bool checkTransfers();
  /// Pairs each WaitSend with its Send (sendOfWait) and checks the window;
  /// true when every Send has its wait, which the buffered simulation needs.
  bool checkWaits(unsigned device);
  void checkDeadlock();
  void checkDeadlockBuffered();
  void reportBlocked(const std::vector<std::size_t> &pc);

  void report(unsigned device, std::size_t index, std::string message) {
    violations.push_back({device, index, std::move(message)});
  }
  const Instr &instrAt(unsigned device, std::size_t index) const {
    return program.devices[device].instrs[index];
  }
  /// "recv activation from device 0, micro-batch 2, channel 0 (op #6)".
  std::string opAt(unsigned device, std::size_t index) const {
    return describe(instrAt(device, index)) + " (op #" + std::to_string(index) +
           ")";
  }
  std::string prefix(unsigned device) const {
    return "device " + std::to_string(device) + ": ";
  }
  unsigned numDevices() const {
    return static_cast<unsigned>(program.devices.size());
  }
  unsigned numLocalStages() const {
    return std::max(program.numVirtualStages, 1u);
  }
  /// The v-th stage of `device` (Program: round-robin).
  unsigned stageOf(unsigned device, unsigned v) const {
    return device + v * numDevices();
  }
  /// Which of `device`'s stages `stage` is, if it runs it.
  std::optional<unsigned> localStage(unsigned device, unsigned stage) const {
    if (stage % numDevices() != device ||
        stage / numDevices() >= numLocalStages())
      return std::nullopt;
    return stage / numDevices();
  }
  /// "stage 1", or "stages 1, 3" under interleaving.
  std::string stagesOf(unsigned device) const {
    std::string text = numLocalStages() == 1 ? "stage " : "stages ";
    for (unsigned v = 0; v < numLocalStages(); ++v)
      text += (v ? ", " : "") + std::to_string(stageOf(device, v));
    return text;
  }

  const Program &program;
  std::vector<Violation> violations;
  /// partner[d][i]: for a matched Send/Recv i of device d, the index of its
  /// counterpart in the program of the peer device.
  std::vector<std::vector<std::size_t>> partner;
  /// sendOfWait[d][i]: for a WaitSend i of device d, the index of its Send.
  std::vector<std::vector<std::size_t>> sendOfWait;
};
} // namespace

void ScheduleVerifier::checkDevice(unsigned d) {
  const DeviceProgram &device = program.devices[d];
  const std::vector<Instr> &instrs = device.instrs;
  const unsigned numMicrobatches = program.numMicrobatches;
  const unsigned numLocal = numLocalStages();
  // Where to report something that is missing altogether: the last
  // instruction (kept a valid index for callers that map it back to IR).
  const std::size_t lastIndex = instrs.empty() ? 0 : instrs.size() - 1;
  if (device.device != d)
    report(d, 0,
           prefix(d) + "program is labelled device " +
               std::to_string(device.device));

  // First pass: locate the Forward, Backward and W of each stage of the
  // device and micro-batch, and the optimizer steps; range and stage errors
  // exclude an op from later checks.
  struct StageOps {
    std::vector<std::size_t> forwardAt, backwardAt, weightsAt;
  };
  std::vector<StageOps> ops(numLocal);
  for (StageOps &stageOps : ops) {
    stageOps.forwardAt.assign(numMicrobatches, kNone);
    stageOps.backwardAt = stageOps.weightsAt = stageOps.forwardAt;
  }
  std::vector<char> valid(instrs.size(), 0);
  bool splitsBackward = false, runsCompute = false;
  std::vector<std::size_t> steps;
  std::size_t lastBackward = kNone;
  for (std::size_t i = 0, e = instrs.size(); i != e; ++i) {
    const Instr &instr = instrs[i];
    if (instr.kind == InstrKind::OptimizerStep) {
      if (!steps.empty())
        report(d, i,
               prefix(d) + opAt(d, i) + " duplicates op #" +
                   std::to_string(steps.front()));
      steps.push_back(i);
      continue;
    }
    if (instr.kind == InstrKind::Backward ||
        instr.kind == InstrKind::BackwardWeights)
      lastBackward = i;
    splitsBackward |= instr.kind == InstrKind::BackwardWeights;
    runsCompute |= isCompute(instr.kind);
    if (instr.microbatch >= numMicrobatches) {
      report(d, i,
             prefix(d) + opAt(d, i) + " is out of range: the program has " +
                 countOf(numMicrobatches, "micro-batch", "micro-batches"));
      continue;
    }
    std::optional<unsigned> local = localStage(d, instr.stage);
    if (!local) {
      report(d, i,
             prefix(d) + opAt(d, i) + " belongs to stage " +
                 std::to_string(instr.stage) + ", but device " +
                 std::to_string(d) + " runs " + stagesOf(d));
      continue;
    }
    valid[i] = 1;
    if (!isCompute(instr.kind))
      continue;
    StageOps &stageOps = ops[*local];
    std::vector<std::size_t> &at =
        instr.kind == InstrKind::Forward    ? stageOps.forwardAt
        : instr.kind == InstrKind::Backward ? stageOps.backwardAt
                                            : stageOps.weightsAt;
    if (at[instr.microbatch] != kNone) {
      report(d, i,
             prefix(d) + opAt(d, i) + " duplicates op #" +
                 std::to_string(at[instr.microbatch]));
      valid[i] = 0;
      continue;
    }
    at[instr.microbatch] = i;
  }

  if (!runsCompute) {
    if (numMicrobatches > 0)
      report(d, 0,
             "device " + std::to_string(d) +
                 " runs no stage: it has no forward or backward");
  } else {
    for (unsigned v = 0; v < numLocal; ++v) {
      const StageOps &stageOps = ops[v];
      std::string stagePrefix =
          prefix(d) + "stage " + std::to_string(stageOf(d, v)) + " has no ";
      for (unsigned m = 0; m < numMicrobatches; ++m) {
        std::size_t forward = stageOps.forwardAt[m],
                    backward = stageOps.backwardAt[m];
        if (forward == kNone)
          report(d, backward != kNone ? backward : lastIndex,
                 stagePrefix + "forward for micro-batch " + std::to_string(m));
        if (backward == kNone)
          report(d, forward != kNone ? forward : lastIndex,
                 stagePrefix + "backward for micro-batch " + std::to_string(m));
        if (forward != kNone && backward != kNone && backward < forward)
          report(d, backward,
                 prefix(d) + opAt(d, backward) +
                     " runs before its forward (op #" +
                     std::to_string(forward) + ")");
        if (!splitsBackward)
          continue;
        std::size_t weights = stageOps.weightsAt[m];
        if (weights == kNone)
          report(d, backward != kNone ? backward : lastIndex,
                 stagePrefix + "weight-gradient backward for micro-batch " +
                     std::to_string(m) +
                     " (the device splits its backwards, so each needs one)");
        else if (backward != kNone && weights < backward)
          report(d, weights,
                 prefix(d) + opAt(d, weights) +
                     " runs before its backward (op #" +
                     std::to_string(backward) + ")");
      }
    }
  }

  // Second pass: data dependences within the device. A missing Forward or
  // Backward was reported above, so ops that depend on it are skipped.
  for (std::size_t i = 0, e = instrs.size(); i != e; ++i) {
    const Instr &instr = instrs[i];
    if (!valid[i])
      continue;
    const StageOps &stageOps = ops[*localStage(d, instr.stage)];
    bool isActivation = instr.direction == Direction::Activation;
    switch (instr.kind) {
    case InstrKind::LoadInput:
    case InstrKind::Recv: {
      bool feedsForward = instr.kind == InstrKind::LoadInput || isActivation;
      std::size_t consumer = feedsForward
                                 ? stageOps.forwardAt[instr.microbatch]
                                 : stageOps.backwardAt[instr.microbatch];
      if (consumer != kNone && consumer < i)
        report(d, consumer,
               prefix(d) + opAt(d, consumer) + " runs before " + opAt(d, i) +
                   (feedsForward ? " delivers its input"
                                 : " delivers its gradient"));
      break;
    }
    case InstrKind::Send: {
      std::size_t producer = isActivation
                                 ? stageOps.forwardAt[instr.microbatch]
                                 : stageOps.backwardAt[instr.microbatch];
      if (producer != kNone && producer > i)
        report(d, i,
               prefix(d) + opAt(d, i) + " runs before " + opAt(d, producer) +
                   " produces it");
      break;
    }
    default:
      break;
    }
  }

  if (steps.empty())
    report(d, lastIndex,
           "device " + std::to_string(d) + " has no optimizer step");
  // One report per misplaced step, naming the last Backward it precedes.
  for (std::size_t step : steps)
    if (lastBackward != kNone && step < lastBackward)
      report(d, step,
             prefix(d) + opAt(d, step) + " runs before " +
                 opAt(d, lastBackward));
}

bool ScheduleVerifier::checkTransfers() {
  const std::size_t numDevices = program.devices.size();
  bool allPaired = true;
  std::size_t numTransfers = 0;
  partner.resize(numDevices);
  for (std::size_t d = 0; d != numDevices; ++d) {
    const std::vector<Instr> &instrs = program.devices[d].instrs;
    partner[d].assign(instrs.size(), kNone);
    numTransfers += std::count_if(instrs.begin(), instrs.end(), isTransfer);
  }

  // Returns the key of a well-formed Send/Recv; reports a bad peer.
  auto keyOf = [&](unsigned d, std::size_t i,
                   bool reportErrors) -> std::optional<TransferKey> {
    const Instr &instr = instrAt(d, i);
    if (instr.peer >= numDevices) {
      if (reportErrors)
        report(d, i,
               prefix(d) + opAt(d, i) + " names device " +
                   std::to_string(instr.peer) + ", but the program has " +
                   countOf(numDevices, "device", "devices"));
      return std::nullopt;
    }
    if (instr.peer == d) {
      if (reportErrors)
        report(d, i, prefix(d) + opAt(d, i) + " has its own device as peer");
      return std::nullopt;
    }
    if (!localStage(d, instr.stage))
      return std::nullopt; // checkDevice reports it
    bool isSend = instr.kind == InstrKind::Send;
    // The stage at the other end: the next one for what goes forward from
    // here or comes back to here, the previous one otherwise.
    bool towardsNext = isSend == (instr.direction == Direction::Activation);
    const unsigned numStages = numDevices * numLocalStages();
    if (towardsNext ? instr.stage + 1 >= numStages : instr.stage == 0) {
      if (reportErrors)
        report(d, i,
               prefix(d) + opAt(d, i) + " of stage " +
                   std::to_string(instr.stage) + " has no stage " +
                   (towardsNext ? "after" : "before") + " it");
      return std::nullopt;
    }
    // A peer that does not run the other stage finds no counterpart.
    unsigned other = towardsNext ? instr.stage + 1 : instr.stage - 1;
    return TransferKey{instr.direction,         isSend ? d : instr.peer,
                       isSend ? instr.peer : d, instr.microbatch,
                       instr.channel,           std::min(instr.stage, other)};
  };

  // First pass: register every Send and Recv under its key; a second one
  // with the same key is a duplicate.
  TransferTable transfers(numTransfers);
  for (unsigned d = 0; d != numDevices; ++d) {
    const std::vector<Instr> &instrs = program.devices[d].instrs;
    for (std::size_t i = 0, e = instrs.size(); i != e; ++i) {
      if (!isTransfer(instrs[i]))
        continue;
      std::optional<TransferKey> key = keyOf(d, i, /*reportErrors=*/true);
      if (!key) {
        allPaired = false;
        continue;
      }
      bool isSend = instrs[i].kind == InstrKind::Send;
      TransferEnds &ends = transfers[*key];
      std::size_t &slot = isSend ? ends.send : ends.recv;
      if (slot != kNone) {
        report(d, i,
               prefix(d) + opAt(d, i) +
                   (isSend ? " is sent twice" : " is received twice") +
                   " (also op #" + std::to_string(slot) + ")");
        allPaired = false;
        continue;
      }
      slot = i;
    }
  }

  // Second pass, in program order so that reports are deterministic: pair
  // each registered op with its counterpart and compare the tensors.
  for (unsigned d = 0; d != numDevices; ++d) {
    const std::vector<Instr> &instrs = program.devices[d].instrs;
    for (std::size_t i = 0, e = instrs.size(); i != e; ++i) {
      const Instr &instr = instrs[i];
      if (!isTransfer(instr))
        continue;
      std::optional<TransferKey> key = keyOf(d, i, /*reportErrors=*/false);
      if (!key)
        continue;
      bool isSend = instr.kind == InstrKind::Send;
      const TransferEnds &ends = transfers[*key];
      if ((isSend ? ends.send : ends.recv) != i)
        continue; // A duplicate, reported above.
      std::size_t other = isSend ? ends.recv : ends.send;
      if (other == kNone) {
        report(d, i,
               prefix(d) + opAt(d, i) + " has no matching " +
                   (isSend ? "recv" : "send") + " on device " +
                   std::to_string(instr.peer));
        allPaired = false;
        continue;
      }
      partner[d][i] = other;
      if (isSend)
        continue; // Tensors are compared once, from the Recv side.
      const Instr &send = instrAt(instr.peer, other);
      if (send.shape != instr.shape || send.elementType != instr.elementType)
        report(d, i,
               prefix(d) + opAt(d, i) + " expects " +
                   formatTensor(instr.shape, instr.elementType) +
                   " but the matching send on device " +
                   std::to_string(instr.peer) + " (op #" +
                   std::to_string(other) + ") sends " +
                   formatTensor(send.shape, send.elementType));
    }
  }
  return allPaired;
}

bool ScheduleVerifier::checkWaits(unsigned d) {
  const std::vector<Instr> &instrs = program.devices[d].instrs;
  sendOfWait.resize(program.devices.size());
  sendOfWait[d].assign(instrs.size(), kNone);
  const unsigned window = program.sendWindow;
  // A send, as its wait names it.
  using SendKey = std::tuple<Direction, unsigned, unsigned, unsigned, unsigned>;
  auto keyOf = [](const Instr &instr) {
    return SendKey{instr.direction, instr.stage, instr.microbatch,
                   instr.channel, instr.peer};
  };
  std::map<SendKey, std::size_t> pending; // send -> its index, until awaited
  std::map<unsigned, unsigned> inFlight;  // peer -> sends not yet awaited
  bool complete = true;
  std::size_t step = kNone;
  for (std::size_t i = 0, e = instrs.size(); i != e; ++i) {
    const Instr &instr = instrs[i];
    if (instr.kind == InstrKind::OptimizerStep && step == kNone)
      step = i;
    if (instr.kind == InstrKind::Send && window > 0) {
      pending[keyOf(instr)] = i;
      unsigned count = ++inFlight[instr.peer];
      if (count > window)
        report(d, i,
               prefix(d) + opAt(d, i) + " has " + std::to_string(count) +
                   " sends to device " + std::to_string(instr.peer) +
                   " in flight, more than the send window of " +
                   std::to_string(window) + " the program was planned for");
      continue;
    }
    if (instr.kind != InstrKind::WaitSend)
      continue;
    if (window == 0) {
      complete = false;
      report(d, i,
             prefix(d) + opAt(d, i) +
                 " waits for a send, but the program's sends complete as "
                 "they are issued (it has no send window)");
      continue;
    }
    auto it = pending.find(keyOf(instr));
    if (it == pending.end()) {
      complete = false;
      report(d, i,
             prefix(d) + opAt(d, i) +
                 " has no send before it that it has not already waited for");
      continue;
    }
    sendOfWait[d][i] = it->second;
    pending.erase(it);
    --inFlight[instr.peer];
    if (step != kNone && step < i)
      report(d, i,
             prefix(d) + opAt(d, i) + " runs after " + opAt(d, step) +
                 ", which needs every send complete");
  }
  for (const auto &[key, send] : pending) {
    report(d, send,
           prefix(d) + opAt(d, send) + " is never waited for: with a send "
                                       "window, each send needs a wait_send "
                                       "after it, before the optimizer step");
    complete = false;
  }
  return complete;
}

void ScheduleVerifier::checkDeadlock() {
  // Simulates all devices under rendezvous semantics. A device runs until it
  // reaches a Send/Recv whose counterpart is not the peer's current op; the
  // peer completes the rendezvous when it gets there and wakes the device.
  // Each rendezvous pushes one device, so this is linear in the program.
  const std::size_t numDevices = program.devices.size();
  std::vector<std::size_t> pc(numDevices, 0);
  std::vector<unsigned> worklist;
  worklist.reserve(numDevices);
  for (std::size_t d = numDevices; d-- > 0;)
    worklist.push_back(static_cast<unsigned>(d));
  while (!worklist.empty()) {
    unsigned d = worklist.back();
    worklist.pop_back();
    const std::vector<Instr> &instrs = program.devices[d].instrs;
    while (pc[d] < instrs.size()) {
      const Instr &instr = instrs[pc[d]];
      if (!isTransfer(instr)) {
        ++pc[d];
        continue;
      }
      unsigned peer = instr.peer;
      if (pc[peer] != partner[d][pc[d]])
        break; // Blocked until the peer reaches the counterpart.
      ++pc[d];
      ++pc[peer];
      worklist.push_back(peer);
    }
  }

  reportBlocked(pc);
}

void ScheduleVerifier::checkDeadlockBuffered() {
  // Sends never block; a Recv waits until its Send has run, a WaitSend until
  // the Recv of its Send has. Both conditions only become true as the peer
  // advances, so running each device as far as it goes, and waking a peer
  // whenever a transfer may have unblocked it, reaches every reachable
  // point; linear in the program.
  const std::size_t numDevices = program.devices.size();
  std::vector<std::size_t> pc(numDevices, 0);
  auto blocked = [&](unsigned d) {
    const Instr &instr = instrAt(d, pc[d]);
    if (instr.kind == InstrKind::Recv)
      return pc[instr.peer] <= partner[d][pc[d]];
    if (instr.kind == InstrKind::WaitSend)
      return pc[instr.peer] <= partner[d][sendOfWait[d][pc[d]]];
    return false;
  };
  std::vector<unsigned> worklist;
  for (std::size_t d = numDevices; d-- > 0;)
    worklist.push_back(static_cast<unsigned>(d));
  while (!worklist.empty()) {
    unsigned d = worklist.back();
    worklist.pop_back();
    const std::size_t size = program.devices[d].instrs.size();
    while (pc[d] < size && !blocked(d)) {
      const Instr &instr = instrAt(d, pc[d]++);
      if (instr.kind == InstrKind::Send || instr.kind == InstrKind::Recv)
        worklist.push_back(instr.peer);
    }
  }
  reportBlocked(pc);
}

void ScheduleVerifier::reportBlocked(const std::vector<std::size_t> &pc) {
  for (unsigned d = 0; d != numDevices(); ++d) {
    if (pc[d] >= program.devices[d].instrs.size())
      continue;
    unsigned peer = instrAt(d, pc[d]).peer;
    std::string message = "deadlock: device " + std::to_string(d) +
                          " waits at op #" + std::to_string(pc[d]) + " (" +
                          describe(instrAt(d, pc[d])) + ") while device " +
                          std::to_string(peer);
    // With every transfer paired a peer cannot finish while a device still
    // waits on it, but say so rather than index past its program.
    if (pc[peer] >= program.devices[peer].instrs.size())
      message += " has finished its program";
    else
      message += " waits at op #" + std::to_string(pc[peer]) + " (" +
                 describe(instrAt(peer, pc[peer])) + ")";
    report(d, pc[d], std::move(message));
  }
}

std::vector<Violation> ScheduleVerifier::run() {
  for (std::size_t d = 0, e = program.devices.size(); d != e; ++d)
    checkDevice(static_cast<unsigned>(d));
  // Unpaired programs deadlock trivially; only simulate paired ones so that
  // a missing op is reported once.
  bool waited = true;
  for (std::size_t d = 0, e = program.devices.size(); d != e; ++d)
    waited &= checkWaits(static_cast<unsigned>(d));
  if (checkTransfers() && waited) {
    if (program.sendWindow == 0)
      checkDeadlock();
    else
      checkDeadlockBuffered();
  }
  std::stable_sort(violations.begin(), violations.end(),
                   [](const Violation &lhs, const Violation &rhs) {
                     return std::make_pair(lhs.device, lhs.instrIndex) <
                            std::make_pair(rhs.device, rhs.instrIndex);
                   });
  return std::move(violations);
}

std::vector<Violation> schedule::verifySchedule(const Program &program) {
  return ScheduleVerifier(program).run();
}
