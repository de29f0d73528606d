//===- KeptForwardValues.h - Which micro-batches skip recomputation -*- C++
//-*-===//
//
// Under rematerialisation a stage's backward recomputes its forward, unless
// the forward's values were kept. A micro-batch whose backward is the next
// compute instruction of its device after its own forward keeps them under
// every policy: between the two the device computes nothing else, so the
// values it keeps are the ones the recompute would rebuild at once, and no
// peak grows (GPipe's order: the last micro-batch of every device; 1F1B and
// ZB-H1: every micro-batch of the last device). Except-last also keeps the
// micro-batch each stage forwards last, wherever its backward runs.
//
// The runtime, the compiler's memory plan and the schedule simulator each
// have their own instruction type, and must agree exactly: the plan places
// the buffers the runtime fills. So the rule is written once, here, over any
// of them.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_KEPTFORWARDVALUES_H
#define GPIPE_RUNTIME_KEPTFORWARDVALUES_H

#include <cstddef>
#include <vector>

namespace gpipe::runtime {

/// What the rule needs to know of one instruction.
struct ComputeRole {
  enum Kind {
    NotCompute, ///< transfers, loads: they compute nothing
    Forward,
    Backward,
    OtherCompute, ///< a split backward's W, an optimizer step
  } kind = NotCompute;
  unsigned stage = 0; ///< in the caller's numbering, below numStages
  unsigned microbatch = 0;
};

/// Which forward values a policy keeps for the backward, besides the
/// adjacent micro-batches every policy keeps.
enum class KeptBeyondAdjacent {
  Nothing,     ///< remat full
  LastForward, ///< remat except-last
  Everything,  ///< no remat
};

/// kept[stage][microbatch]: whether that backward finds its forward values
/// (else it recomputes them), for one device's `instrs`; `roleOf(instr)`
/// says what each instruction is. Stages or micro-batches out of range are
/// ignored: the callers' validation reports them.
template <typename Instr, typename RoleOf>
std::vector<std::vector<char>>
keptForwardValues(const std::vector<Instr> &instrs, unsigned numStages,
                  unsigned numMicrobatches, KeptBeyondAdjacent beyond,
                  RoleOf roleOf) {
  std::vector<std::vector<char>> kept(
      numStages,
      std::vector<char>(numMicrobatches,
                        beyond == KeptBeyondAdjacent::Everything ? 1 : 0));
  auto inRange = [&](const ComputeRole &role) {
    return role.stage < numStages && role.microbatch < numMicrobatches;
  };
  // The forward the device ran last, while nothing has been computed since.
  bool pending = false;
  ComputeRole last;
  std::vector<int> lastForward(numStages, -1);
  for (const Instr &instr : instrs) {
    ComputeRole role = roleOf(instr);
    if (role.kind == ComputeRole::NotCompute)
      continue;
    if (role.kind == ComputeRole::Backward && pending &&
        role.stage == last.stage && role.microbatch == last.microbatch &&
        inRange(role))
      kept[role.stage][role.microbatch] = 1;
    pending = role.kind == ComputeRole::Forward;
    last = role;
    if (pending && role.stage < numStages)
      lastForward[role.stage] = int(role.microbatch);
  }
  if (beyond == KeptBeyondAdjacent::LastForward)
    for (unsigned s = 0; s < numStages; ++s)
      if (lastForward[s] >= 0 && unsigned(lastForward[s]) < numMicrobatches)
        kept[s][lastForward[s]] = 1;
  return kept;
}

/// Per instruction of one device: whether it is a gradient receive
/// (`isGradientRecv`) followed by the backward of the same stage and
/// micro-batch, with nothing between but that backward's other gradient
/// receives, and that backward recomputes (`kept` from keptForwardValues).
/// Its device then recomputes while the gradient is on its way: it issues
/// the recompute first and waits for the gradient after it. The buffers stay
/// where the plan put them: the received one is allocated at the receive,
/// only written later. No receive moves past another transfer: under
/// rendezvous sends (NCCL) that could make two devices wait on each other; a
/// recompute waits on nobody.
template <typename Instr, typename RoleOf, typename IsGradientRecv>
std::vector<char>
recomputesWhileReceiving(const std::vector<Instr> &instrs,
                         const std::vector<std::vector<char>> &kept,
                         RoleOf roleOf, IsGradientRecv isGradientRecv) {
  std::vector<char> defers(instrs.size(), 0);
  // The recomputing backward the instructions scanned since lead to, if
  // only its gradient receives came between.
  bool open = false;
  ComputeRole backward;
  for (std::size_t i = instrs.size(); i-- > 0;) {
    ComputeRole role = roleOf(instrs[i]);
    if (role.kind == ComputeRole::Backward) {
      backward = role;
      open = role.stage < kept.size() &&
             role.microbatch < kept[role.stage].size() &&
             !kept[role.stage][role.microbatch];
      continue;
    }
    defers[i] = open && isGradientRecv(instrs[i]) &&
                role.stage == backward.stage &&
                role.microbatch == backward.microbatch;
    open = defers[i];
  }
  return defers;
}

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_KEPTFORWARDVALUES_H
