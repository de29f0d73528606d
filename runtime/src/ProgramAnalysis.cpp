//===- ProgramAnalysis.cpp - What the executors derive from a bundle -----===//

#include "gpipe/runtime/ProgramAnalysis.h"

using namespace gpipe::runtime;

const char *gpipe::runtime::instructionName(InstrKind kind) {
  switch (kind) {
  case InstrKind::LoadInput:
    return "load input";
  case InstrKind::Forward:
    return "forward";
  case InstrKind::Backward:
    return "backward";
  case InstrKind::SendActivation:
    return "send activation";
  case InstrKind::RecvActivation:
    return "recv activation";
  case InstrKind::SendGradient:
    return "send gradient";
  case InstrKind::RecvGradient:
    return "recv gradient";
  case InstrKind::OptimizerStep:
    return "optimizer step";
  }
  return "unknown";
}

static const char *directionWord(InstrKind kind) {
  return kind == InstrKind::SendActivation || kind == InstrKind::RecvActivation
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
    return "forward of stage " + std::to_string(device) + mb;
  case InstrKind::Backward:
    return "backward of stage " + std::to_string(device) + mb;
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

bool gpipe::runtime::keepsForwardValues(RematPolicy remat, unsigned microbatch,
                                        unsigned lastForward) {
  switch (remat) {
  case RematPolicy::None:
    return true;
  case RematPolicy::Full:
    return false;
  case RematPolicy::ExceptLast:
    return microbatch == lastForward;
  }
  return false;
}

/// Per op of `ops`, the values whose last use or definition in the whole
/// sequence `lists` is that op, except those `keep` holds. Ops marked in
/// `skip` (the last list's) neither use nor define anything.
static std::vector<std::vector<std::vector<int>>>
lastUses(const std::vector<const std::vector<Op> *> &lists,
         const std::vector<char> *skip, size_t numValues,
         const std::vector<char> &keep) {
  std::vector<std::pair<int, int>> last(numValues, {-1, -1});
  std::vector<std::vector<std::vector<int>>> free(lists.size());
  for (size_t l = 0; l < lists.size(); ++l) {
    free[l].resize(lists[l]->size());
    for (size_t k = 0; k < lists[l]->size(); ++k) {
      if (skip && l + 1 == lists.size() && (*skip)[k])
        continue;
      const Op &op = (*lists[l])[k];
      for (int id : op.operands)
        last[id] = {int(l), int(k)};
      for (int id : op.results)
        if (id >= 0)
          last[id] = {int(l), int(k)};
    }
  }
  for (size_t id = 0; id < numValues; ++id)
    if (last[id].first >= 0 && !keep[id])
      free[last[id].first][last[id].second].push_back(int(id));
  return free;
}

StageLiveness gpipe::runtime::computeLiveness(const StageProgram &program,
                                     const std::vector<char> &skipBackward) {
  const size_t n = program.values.size();
  StageLiveness live;
  live.keptForBackward.assign(n, 0);
  live.stashed.assign(n, 0);
  std::vector<char> isInput(n, 0);
  for (const StageInput &input : program.inputs)
    isInput[input.value] = 1;
  for (size_t k = 0; k < program.backward.size(); ++k)
    if (!skipBackward[k])
      for (int id : program.backward[k].operands) {
        live.keptForBackward[id] = 1;
        live.stashed[id] |= isInput[id];
      }
  for (const Op &op : program.recompute)
    for (int id : op.operands)
      live.stashed[id] |= isInput[id];

  for (int kept = 0; kept < 2; ++kept) {
    std::vector<char> keep = kept ? live.keptForBackward : live.stashed;
    for (int id : program.outputs)
      keep[id] = 1;
    if (program.loss >= 0)
      keep[program.loss] = 1; // read when the forward ends
    live.forwardFree[kept] =
        lastUses({&program.forward}, nullptr, n, keep).front();
  }
  std::vector<char> keep(n, 0);
  for (int id : program.inputGrads)
    keep[id] = 1;
  live.backwardFree[1] =
      lastUses({&program.backward}, &skipBackward, n, keep).front();
  auto both =
      lastUses({&program.recompute, &program.backward}, &skipBackward, n, keep);
  live.recomputeFree = std::move(both[0]);
  live.backwardFree[0] = std::move(both[1]);
  return live;
}

