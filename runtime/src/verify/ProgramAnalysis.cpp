//===- ProgramAnalysis.cpp - What the executors derive from a bundle -----===//

#include "gpipe/runtime/verify/ProgramAnalysis.h"
#include "gpipe/runtime/verify/KeptForwardValues.h"

using namespace gpipe::runtime;

const char *gpipe::runtime::instructionName(InstrKind kind) {
  switch (kind) {
  case InstrKind::LoadInput:
    return "load input";
  case InstrKind::Forward:
    return "forward";
  case InstrKind::Backward:
    return "backward";
  case InstrKind::BackwardWeights:
    return "backward weights";
  case InstrKind::SendActivation:
    return "send activation";
  case InstrKind::RecvActivation:
    return "recv activation";
  case InstrKind::SendGradient:
    return "send gradient";
  case InstrKind::RecvGradient:
    return "recv gradient";
  case InstrKind::WaitSendActivation:
    return "wait send activation";
  case InstrKind::WaitSendGradient:
    return "wait send gradient";
  case InstrKind::OptimizerStep:
    return "optimizer step";
  }
  return "unknown";
}

static const char *directionWord(InstrKind kind) {
  return kind == InstrKind::SendActivation ||
                 kind == InstrKind::RecvActivation ||
                 kind == InstrKind::WaitSendActivation
             ? "activation"
             : "gradient";
}

std::string gpipe::runtime::describeInstruction(const Instr &instr,
                                            unsigned device) {
  std::string mb = ", micro-batch " + std::to_string(instr.microbatch);
  switch (instr.kind) {
  case InstrKind::LoadInput:
    return "load input '" + instr.inputName + "'" + mb;
  case InstrKind::Forward:
    return "forward of stage " + std::to_string(instr.stage) + mb;
  case InstrKind::Backward:
    return "backward of stage " + std::to_string(instr.stage) + mb;
  case InstrKind::BackwardWeights:
    return "weight-gradient backward of stage " + std::to_string(instr.stage) +
           mb;
  case InstrKind::SendActivation:
  case InstrKind::SendGradient:
    return std::string("send ") + directionWord(instr.kind) + " to device " +
           std::to_string(instr.peer) + mb + ", channel " +
           std::to_string(instr.channel);
  case InstrKind::RecvActivation:
  case InstrKind::RecvGradient:
    return std::string("recv ") + directionWord(instr.kind) + " from device " +
           std::to_string(instr.peer) + mb + ", channel " +
           std::to_string(instr.channel);
  case InstrKind::WaitSendActivation:
  case InstrKind::WaitSendGradient:
    return std::string("wait for the ") + directionWord(instr.kind) +
           " sent to device " + std::to_string(instr.peer) + mb +
           ", channel " + std::to_string(instr.channel);
  case InstrKind::OptimizerStep:
    return "optimizer step";
  }
  return "unknown instruction";
}

GradientFusion gpipe::runtime::fuseGradientAccumulation(const StageProgram &stage) {
  const std::vector<Op> &ops = stage.backward;
  std::vector<int> uses(stage.values.size(), 0),
      accumulator(stage.values.size(), -1);
  for (size_t k = 0; k < ops.size(); ++k)
    for (int id : ops[k].operands) {
      ++uses[id];
      if (ops[k].kind == OpKind::AccumulateGrad)
        accumulator[id] = int(k);
    }
  for (int id : stage.inputGrads)
    ++uses[id];
  GradientFusion fusion;
  fusion.accumulatesInto.resize(ops.size());
  fusion.skip.assign(ops.size(), 0);
  for (size_t k = 0; k < ops.size(); ++k) {
    fusion.accumulatesInto[k].assign(ops[k].results.size(), "");
    const OpInfo &info = opInfo(ops[k].kind);
    bool accumulates = info.has(AccumulatesParam);
    for (size_t r = 0; r < ops[k].results.size() && accumulates; ++r) {
      int id = ops[k].results[r];
      if (info.has(DropsFirstResult) && r == 0)
        continue; // the input gradient is overwritten, not accumulated
      if (id < 0 || uses[id] != 1 || accumulator[id] < 0)
        continue;
      fusion.accumulatesInto[k][r] = ops[accumulator[id]].name;
      fusion.skip[accumulator[id]] = 1;
    }
  }
  return fusion;
}

/// What the recompute rule (KeptForwardValues.h) needs of an instruction.
static ComputeRole computeRole(const Instr &instr) {
  ComputeRole role;
  role.stage = instr.stage;
  role.microbatch = instr.microbatch;
  switch (instr.kind) {
  case InstrKind::Forward:
    role.kind = ComputeRole::Forward;
    break;
  case InstrKind::Backward:
    role.kind = ComputeRole::Backward;
    break;
  case InstrKind::BackwardWeights:
  case InstrKind::OptimizerStep:
    role.kind = ComputeRole::OtherCompute;
    break;
  default:
    break;
  }
  return role;
}

std::vector<std::vector<char>>
gpipe::runtime::keptForwardValuesOf(const Bundle &bundle) {
  const unsigned numStages = unsigned(bundle.stages.size());
  const unsigned numMicrobatches = unsigned(bundle.microbatchRows.size());
  KeptBeyondAdjacent beyond = bundle.remat == RematPolicy::None
                                  ? KeptBeyondAdjacent::Everything
                              : bundle.remat == RematPolicy::ExceptLast
                                  ? KeptBeyondAdjacent::LastForward
                                  : KeptBeyondAdjacent::Nothing;
  std::vector<std::vector<char>> kept(numStages,
                                      std::vector<char>(numMicrobatches, 0));
  for (unsigned d = 0; d < bundle.numDevices(); ++d) {
    auto ofDevice = keptForwardValues(bundle.programs[d], numStages,
                                      numMicrobatches, beyond, computeRole);
    // Each stage runs on one device: only its own program sets its flags.
    for (unsigned s = 0; s < numStages; ++s)
      if (bundle.deviceOfStage(s) == d)
        kept[s] = std::move(ofDevice[s]);
  }
  return kept;
}

std::vector<std::vector<char>> gpipe::runtime::recomputesWhileReceivingOf(
    const Bundle &bundle, const std::vector<std::vector<char>> &kept) {
  std::vector<std::vector<char>> defers;
  for (const std::vector<Instr> &program : bundle.programs)
    defers.push_back(recomputesWhileReceiving(
        program, kept, computeRole, [](const Instr &instr) {
          return instr.kind == InstrKind::RecvGradient;
        }));
  return defers;
}

int64_t gpipe::runtime::scratchBytesOf(const Op &op,
                                       const std::vector<ValueSpec> &values) {
  std::vector<const int64_t *> shapes;
  std::vector<size_t> ranks;
  for (int id : op.operands) {
    shapes.push_back(values[id].shape.data());
    ranks.push_back(values[id].shape.size());
  }
  return scratchBytesOf(op.kind, shapes.data(), ranks.data(), shapes.size(),
                        op.window);
}

std::string gpipe::runtime::paramDefining(const StageProgram &stage, int id) {
  for (const Op &op : stage.forward)
    if (op.kind == OpKind::Param && !op.results.empty() && op.results[0] == id)
      return op.name;
  return {};
}

std::vector<RunningStatistics>
gpipe::runtime::runningStatisticsOf(const Bundle &bundle) {
  std::vector<RunningStatistics> all;
  for (unsigned s = 0; s < bundle.stages.size(); ++s) {
    const StageProgram &stage = bundle.stages[s];
    for (const Op &op : stage.forward) {
      if (op.kind != OpKind::BatchNorm || op.operands.size() != 5)
        continue;
      RunningStatistics stats;
      stats.stage = s;
      stats.mean = paramDefining(stage, op.operands[3]);
      stats.variance = paramDefining(stage, op.operands[4]);
      const std::vector<int64_t> &x = stage.values[op.operands[0]].shape;
      stats.count = 1;
      for (size_t i = 0; i + 1 < x.size(); ++i)
        stats.count *= x[i];
      stats.momentum = op.momentum;
      all.push_back(stats);
    }
  }
  return all;
}
