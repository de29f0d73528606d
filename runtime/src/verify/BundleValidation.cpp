//===- BundleValidation.cpp - What a bundle must be before it runs --------===//
//
// validateBundle: every op's operand and result counts (the op table), types,
// shapes and definition order, the stages' channels, each device's
// instruction stream, the compiler's placement (PlacementVerifier.h) and the
// schedule's progress (ScheduleVerifier.h). Errors say where, what was
// expected and what was found.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/verify/BundleValidation.h"

#include "verify/ValidationText.h"
#include "gpipe/runtime/verify/PlacementVerifier.h"
#include "gpipe/runtime/verify/ProgramAnalysis.h"
#include "gpipe/runtime/verify/ScheduleVerifier.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

using namespace gpipe::runtime;
using namespace gpipe::runtime::detail;

/// "stage 1", or "stages 1, 3" for a device that runs several.
static std::string stagesOf(const Bundle &bundle, unsigned device) {
  std::string text = bundle.stagesPerDevice() == 1 ? "stage " : "stages ";
  for (unsigned s = device; s < bundle.stages.size(); s += bundle.numDevices())
    text += (s == device ? "" : ", ") + std::to_string(s);
  return text;
}

static std::string validateProgram(const Bundle &bundle, unsigned device) {
  const std::vector<Instr> &program = bundle.programs[device];
  const unsigned numStages = bundle.stages.size();
  const unsigned numLocal = bundle.stagesPerDevice();
  const unsigned numMicrobatches = bundle.microbatchRows.size();
  // [local stage][micro-batch]
  std::vector<std::vector<int>> forwards(numLocal,
                                         std::vector<int>(numMicrobatches, 0)),
      backwards = forwards, weights = forwards;
  bool splits = false;
  unsigned optimizerSteps = 0;
  for (size_t i = 0; i < program.size(); ++i) {
    const Instr &instr = program[i];
    std::string prefix = "device " + std::to_string(device) + ": op #" +
                         std::to_string(i) + " (" +
                         describeInstruction(instr, device) + "): ";
    if (instr.kind == InstrKind::OptimizerStep) {
      if (++optimizerSteps > 1)
        return prefix + "expects exactly one optimizer step per device";
      if (i + 1 != program.size())
        return prefix + "the optimizer step must be the last instruction";
      continue;
    }
    if (instr.microbatch >= numMicrobatches)
      return prefix + "micro-batch " + std::to_string(instr.microbatch) +
             " is outside [0, " + std::to_string(numMicrobatches) + ")";
    if (instr.stage >= numStages || bundle.deviceOfStage(instr.stage) != device)
      return prefix + "device " + std::to_string(device) + " runs " +
             stagesOf(bundle, device) + ", got stage " +
             std::to_string(instr.stage);
    const unsigned s = instr.stage, v = bundle.localStage(s);
    const StageProgram &stage = bundle.stages[s];
    size_t numChannels = 0;
    for (const StageInput &input : stage.inputs)
      numChannels += input.fromChannel;
    // Activations go to the next stage, gradients to the previous one.
    auto expectPeer = [&](int otherStage) -> std::string {
      if (otherStage < 0 || otherStage >= static_cast<int>(numStages))
        return prefix + "stage " + std::to_string(s) +
               " has no neighbour in that direction";
      unsigned peer = bundle.deviceOfStage(unsigned(otherStage));
      if (instr.peer != peer)
        return prefix + "expects peer device " + std::to_string(peer) +
               ", got " + std::to_string(instr.peer);
      return {};
    };
    auto expectChannel = [&](size_t count) -> std::string {
      if (instr.channel >= count)
        return prefix + "channel " + std::to_string(instr.channel) +
               " is outside [0, " + std::to_string(count) + ")";
      return {};
    };
    std::string error;
    switch (instr.kind) {
    case InstrKind::LoadInput: {
      bool found = false;
      for (const StageInput &input : stage.inputs)
        found |= !input.fromChannel && input.inputName == instr.inputName;
      if (!found)
        return prefix + "stage " + std::to_string(s) +
               " reads no model input '" + instr.inputName + "'";
      break;
    }
    case InstrKind::Forward:
    case InstrKind::Backward: {
      bool forward = instr.kind == InstrKind::Forward;
      int &count = (forward ? forwards : backwards)[v][instr.microbatch];
      if (++count > 1)
        return prefix + "runs twice";
      if (!forward && forwards[v][instr.microbatch] == 0)
        return prefix + "comes before the forward of its micro-batch";
      break;
    }
    case InstrKind::BackwardWeights:
      if (++weights[v][instr.microbatch] > 1)
        return prefix + "runs twice";
      if (backwards[v][instr.microbatch] == 0)
        return prefix + "comes before the backward of its micro-batch";
      splits = true;
      break;
    case InstrKind::SendActivation:
    case InstrKind::WaitSendActivation:
      if ((error = expectPeer(int(s) + 1)).empty())
        error = expectChannel(stage.outputs.size());
      break;
    case InstrKind::RecvActivation:
      if ((error = expectPeer(int(s) - 1)).empty())
        error = expectChannel(numChannels);
      break;
    case InstrKind::SendGradient:
    case InstrKind::WaitSendGradient:
      if ((error = expectPeer(int(s) - 1)).empty())
        error = expectChannel(stage.inputGrads.size());
      break;
    case InstrKind::RecvGradient:
      if ((error = expectPeer(int(s) + 1)).empty())
        error = expectChannel(stage.outputGrads.size());
      break;
    case InstrKind::OptimizerStep:
      break;
    }
    if (!error.empty())
      return error;
  }
  for (unsigned v = 0; v < numLocal; ++v) {
    std::string prefix = "device " + std::to_string(device) + ": ";
    if (numLocal > 1)
      prefix +=
          "stage " + std::to_string(device + v * bundle.numDevices()) + ": ";
    for (unsigned m = 0; m < numMicrobatches; ++m)
      if (forwards[v][m] != 1 || backwards[v][m] != 1)
        return prefix + "micro-batch " + std::to_string(m) +
               " needs one forward and one backward, got " +
               std::to_string(forwards[v][m]) + " and " +
               std::to_string(backwards[v][m]);
    for (unsigned m = 0; m < numMicrobatches && splits; ++m)
      if (weights[v][m] != 1)
        return prefix + "splits its backwards, but micro-batch " +
               std::to_string(m) + " has no weight-gradient backward";
  }
  if (optimizerSteps != 1)
    return "device " + std::to_string(device) +
           ": expects exactly one optimizer step, got none";
  return {};
}

/// The generated kernels the kernel ops run (the reader checks the same of
/// a bundle file; this, of one built in memory).
static std::string validateCode(const GeneratedCode &code) {
  for (size_t k = 0; k < code.kernels.size(); ++k) {
    const GeneratedKernelSpec &kernel = code.kernels[k];
    if (kernel.symbol.empty())
      return "generated kernel " + std::to_string(k) + " has no symbol";
    if (kernel.inputs < 1 || kernel.inputs > kMaxKernelInputs)
      return "generated kernel " + std::to_string(k) + " ('" + kernel.symbol +
             "') takes " + std::to_string(kernel.inputs) +
             " inputs; expected 1 to " + std::to_string(kMaxKernelInputs);
    if (std::string error = checkKernelDims(kernel); !error.empty())
      return "generated kernel " + std::to_string(k) + " ('" + kernel.symbol +
             "'): " + error;
  }
  if (!code.kernels.empty() && code.cpu.empty())
    return "the bundle has " + std::to_string(code.kernels.size()) +
           " generated kernels but no CPU code variant to run them";
  if (code.cuda)
    if (std::string error = checkCudaCode(*code.cuda, code.kernels);
        !error.empty())
      return "the generated kernels' CUDA code: " + error;
  return {};
}

std::string gpipe::runtime::validateBundle(const Bundle &bundle) {
  if (bundle.batch < 1)
    return "expects a batch of at least 1 row, got " +
           std::to_string(bundle.batch);
  if (bundle.microbatchRows.empty())
    return "expects at least 1 micro-batch, got 0";
  int64_t total = 0;
  for (size_t m = 0; m < bundle.microbatchRows.size(); ++m) {
    if (bundle.microbatchRows[m] < 1)
      return "micro-batch " + std::to_string(m) + " has " +
             std::to_string(bundle.microbatchRows[m]) +
             " rows; expected at least 1";
    total += bundle.microbatchRows[m];
  }
  if (total != bundle.batch)
    return "micro-batch rows sum to " + std::to_string(total) +
           ", expected the batch " + std::to_string(bundle.batch);
  if (bundle.stages.empty())
    return "expects at least one stage, got 0";
  if (bundle.programs.empty() ||
      bundle.stages.size() % bundle.programs.size() != 0)
    return "expects one program per device, the devices running the " +
           std::to_string(bundle.stages.size()) +
           " stages round-robin (a number of programs that divides " +
           std::to_string(bundle.stages.size()) + "), got " +
           std::to_string(bundle.programs.size());
  if (bundle.stagesPerDevice() > 1 && bundle.numDevices() < 2)
    return "expects at least 2 devices for " +
           std::to_string(bundle.stages.size()) +
           " stages on fewer programs (interleaving), got " +
           std::to_string(bundle.numDevices()) + " program";
  std::set<std::string> names;
  for (const ModelInputSpec &input : bundle.inputs) {
    if (!names.insert(input.name).second)
      return "model input '" + input.name + "' is declared twice";
    if (input.shape.empty() || input.shape[0] != bundle.batch)
      return "model input '" + input.name + "' has shape " +
             shapeString(input.shape) + "; expected the batch " +
             std::to_string(bundle.batch) + " as dimension 0";
    for (int64_t dim : input.shape)
      if (dim < 1)
        return "model input '" + input.name + "' has shape " +
               shapeString(input.shape) + "; every dimension must be >= 1";
  }
  names.clear();
  for (const ParamSpec &param : bundle.params) {
    if (param.name.empty())
      return "a parameter has an empty name";
    if (!names.insert(param.name).second)
      return "parameter '" + param.name + "' is declared twice";
    if (param.stage >= bundle.stages.size())
      return "parameter '" + param.name + "' is on stage " +
             std::to_string(param.stage) + ", outside [0, " +
             std::to_string(bundle.stages.size()) + ")";
    for (int64_t dim : param.shape)
      if (dim < 1)
        return "parameter '" + param.name + "' has shape " +
               shapeString(param.shape) + "; every dimension must be >= 1";
    if (param.init == InitKind::Pretrained && bundle.weights.empty())
      return "parameter '" + param.name +
             "' is pretrained, but the bundle names no weights file "
             "('weights')";
  }
  if (std::string error = validateCode(bundle.code); !error.empty())
    return error;
  for (unsigned s = 0; s < bundle.stages.size(); ++s) {
    std::string error = validateStage(bundle, s);
    if (!error.empty())
      return error;
  }
  for (unsigned d = 0; d < bundle.programs.size(); ++d) {
    std::string error = validateProgram(bundle, d);
    if (!error.empty())
      return error;
  }
  if (bundle.memoryPlan.devices.size() != bundle.programs.size())
    return "the bundle places buffers for " +
           std::to_string(bundle.memoryPlan.devices.size()) + " of its " +
           std::to_string(bundle.programs.size()) +
           " devices (memory_plan.devices); the runtime runs only what the "
           "compiler placed: recompile it with gpipe-translate";
  for (unsigned d = 0; d < bundle.memoryPlan.devices.size(); ++d) {
    std::string error = verifyPlacement(bundle.memoryPlan.devices[d], d);
    if (!error.empty())
      return error;
  }
  return verifySchedule(bundle);
}

