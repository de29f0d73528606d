//===- TestPlacement.cpp - The compiler's placement for test bundles ------===//

#include "TestPlacement.h"

#include "gpipe/Analysis/MemoryPlanner.h"
#include "gpipe/runtime/bundle/OpTable.h"
#include "gpipe/runtime/verify/ProgramAnalysis.h"

#include <cstdio>
#include <cstdlib>

using namespace gpipe::runtime;

namespace {

constexpr unsigned kOptimizerSlots = 2;

int64_t elementsOf(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t dim : shape)
    n *= dim;
  return n;
}

/// `bytes` at the full batch, per row when the value is per example.
gpipe::ByteSize sizeOf(int64_t bytes, bool batched, int64_t batch) {
  return batched ? gpipe::ByteSize{0, bytes / batch}
                 : gpipe::ByteSize{bytes, 0};
}

gpipe::PlannedStage describeStage(const Bundle &bundle, unsigned s) {
  const StageProgram &program = bundle.stages[s];
  const GradientFusion fusion = fuseGradientAccumulation(program);
  gpipe::PlannedStage stage;
  for (const ValueSpec &value : program.values)
    stage.values.push_back(
        sizeOf(elementsOf(value.shape) * 4, value.batched, bundle.batch));
  // The state an op saves with its result 0, and its scratch, scale with its
  // first operand's rows (as in the runtime and in StageMemoryDescription).
  auto describe = [&](const Op &op, const std::vector<std::string> *fused) {
    gpipe::PlannedOp planned;
    planned.name = opKindName(op.kind);
    planned.operands = op.operands;
    if (op.kind == OpKind::Param) {
      // A view of the resident parameter: defined, with no bytes of its own.
      planned.results = op.results;
      stage.values[op.results[0]] = gpipe::ByteSize();
      return planned;
    }
    for (size_t r = 0; r < op.results.size(); ++r)
      if (op.results[r] >= 0 && !(fused && !(*fused)[r].empty()))
        planned.results.push_back(op.results[r]);
    if (op.operands.empty())
      return planned;
    const ValueSpec &first = program.values[op.operands[0]];
    SavedState saved =
        savedStateOf(op.kind, first.shape.data(), first.shape.size(), op.heads);
    if (!planned.results.empty() && planned.results[0] == op.results[0]) {
      gpipe::ByteSize extra =
          sizeOf(saved.total(), first.batched && saved.perRow, bundle.batch);
      stage.values[op.results[0]].fixed += extra.fixed;
      stage.values[op.results[0]].perRow += extra.perRow;
    }
    planned.scratch =
        sizeOf(scratchBytesOf(op, program.values), first.batched, bundle.batch);
    return planned;
  };
  // Values are sized once, by the forward; the recompute repeats its ops.
  for (const Op &op : program.forward)
    stage.forward.push_back(describe(op, nullptr));
  for (const Op &op : program.recompute) {
    gpipe::PlannedOp planned;
    planned.name = opKindName(op.kind);
    planned.operands = op.operands;
    for (int id : op.results)
      if (id >= 0)
        planned.results.push_back(id);
    // A recompute needs the forward's scratch again (conv2d's patches).
    if (!op.operands.empty())
      planned.scratch =
          sizeOf(scratchBytesOf(op, program.values),
                 program.values[op.operands[0]].batched, bundle.batch);
    stage.recompute.push_back(planned);
  }
  // A fused pair's kernel reads the first op's operands until the second
  // is done (the compiler's rule, StageMemoryDescription).
  for (auto [ops, planned] : {std::pair(&program.forward, &stage.forward),
                              std::pair(&program.recompute, &stage.recompute)})
    for (size_t k = 0; k + 1 < ops->size(); ++k)
      if ((*ops)[k].fusion != FusionKind::None)
        (*planned)[k + 1].operands.insert((*planned)[k + 1].operands.end(),
                                          (*ops)[k].operands.begin(),
                                          (*ops)[k].operands.end());
  for (size_t k = 0; k < program.backward.size(); ++k)
    if (!fusion.skip[k])
      (k < program.inputGradientEnd() ? stage.backward : stage.backwardWeights)
          .push_back(describe(program.backward[k], &fusion.accumulatesInto[k]));
  for (const StageInput &input : program.inputs) {
    stage.inputs.push_back(input.value);
    stage.inputChannels.push_back(input.fromChannel ? input.channel : ~0u);
    stage.inputNames.push_back(input.fromChannel ? "" : input.inputName);
  }
  stage.outputs = program.outputs;
  stage.loss = program.loss;
  stage.outputGrads = program.outputGrads;
  stage.inputGrads = program.inputGrads;
  for (const ParamSpec &param : bundle.params)
    if (param.stage == s)
      stage.residentBytes +=
          elementsOf(param.shape) * 4 * (2 + int64_t(kOptimizerSlots));
  return stage;
}

/// `instr` of a device of `numDevices` (its stage's index among the
/// device's: Bundle.h's round-robin).
gpipe::PlannedInstr describeInstr(const Instr &instr, unsigned numDevices) {
  static const gpipe::PlannedInstrKind kinds[] = {
      gpipe::PlannedInstrKind::LoadInput,
      gpipe::PlannedInstrKind::Forward,
      gpipe::PlannedInstrKind::Backward,
      gpipe::PlannedInstrKind::SendActivation,
      gpipe::PlannedInstrKind::RecvActivation,
      gpipe::PlannedInstrKind::SendGradient,
      gpipe::PlannedInstrKind::RecvGradient,
      gpipe::PlannedInstrKind::OptimizerStep,
      gpipe::PlannedInstrKind::BackwardWeights,
      gpipe::PlannedInstrKind::WaitSendActivation,
      gpipe::PlannedInstrKind::WaitSendGradient};
  return {kinds[int(instr.kind)], instr.stage / numDevices, instr.microbatch,
          instr.channel, instr.inputName};
}

gpipe::KeepPolicy keepPolicyOf(RematPolicy remat) {
  switch (remat) {
  case RematPolicy::None:
    return gpipe::KeepPolicy::All;
  case RematPolicy::ExceptLast:
    return gpipe::KeepPolicy::Last;
  case RematPolicy::Full:
  case RematPolicy::Selective:
    return gpipe::KeepPolicy::None;
  }
  return gpipe::KeepPolicy::None;
}

} // namespace

void gpipe::runtime::testing::placeBundle(Bundle &bundle) {
  bundle.memoryPlan = MemoryPlan();
  bundle.memoryPlan.optimizerSlots = kOptimizerSlots;
  for (unsigned d = 0; d < bundle.programs.size(); ++d) {
    gpipe::DeviceProgram program;
    const unsigned numDevices = bundle.programs.size();
    for (unsigned s = d; s < bundle.stages.size(); s += numDevices)
      program.stages.push_back(describeStage(bundle, s));
    for (const Instr &instr : bundle.programs[d])
      program.instrs.push_back(describeInstr(instr, numDevices));
    program.microbatchRows = bundle.microbatchRows;
    program.keep = keepPolicyOf(bundle.remat);
    gpipe::DeviceMemoryPlan plan;
    std::string error = gpipe::planDeviceMemory(program, plan);
    if (!error.empty()) {
      std::fprintf(stderr, "placeBundle: device %u: %s\n", d, error.c_str());
      std::abort();
    }
    PlannedDeviceMemory device;
    device.residentBytes = plan.residentBytes;
    device.peakBytes = plan.peakBytes;
    device.arenaBytes = plan.arenaBytes;
    for (const gpipe::PlannedBuffer &buffer : plan.buffers)
      device.buffers.push_back({buffer.bytes, buffer.offset, buffer.start,
                                buffer.end, buffer.instr, buffer.microbatch,
                                buffer.value});
    bundle.memoryPlan.devices.push_back(std::move(device));
  }
}
