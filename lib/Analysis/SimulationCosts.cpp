//===- SimulationCosts.cpp - Where the simulator's costs come from --------===//

#include "gpipe/Analysis/SimulationCosts.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

using namespace gpipe;
namespace json = llvm::json;

schedule::SimulationCosts
gpipe::costsFromModel(llvm::ArrayRef<uint64_t> forwardFlops, int64_t batch,
                      const MachineModel &machine) {
  schedule::SimulationCosts costs;
  double flopsPerUs = machine.deviceGflops * 1e3;
  for (uint64_t flops : forwardFlops) {
    schedule::StageCosts &device = costs.stages.emplace_back();
    device.forwardPerRow =
        batch > 0 ? double(flops) / double(batch) / flopsPerUs : 0.0;
    device.backwardPerRow = 2 * device.forwardPerRow;
    device.recomputePerRow = device.forwardPerRow;
    device.sendPerByte = 1.0 / (machine.linkGBPerSecond * 1e3);
  }
  costs.latency = machine.linkLatencyUs;
  return costs;
}

std::string gpipe::readProfile(llvm::StringRef text, unsigned numStages,
                               schedule::SimulationCosts &costs) {
  llvm::Expected<json::Value> parsed = json::parse(text);
  if (!parsed)
    return "not JSON: " + llvm::toString(parsed.takeError());
  const json::Object *root = parsed->getAsObject();
  if (!root || root->getString("format") != "gpipe-profile")
    return "expected an object with \"format\": \"gpipe-profile\"";
  if (root->getInteger("version") != 1)
    return "expected \"version\": 1";
  const json::Array *devices = root->getArray("devices");
  if (!devices)
    return "expected an array 'devices'";
  if (devices->size() != numStages)
    return "the profile has " + std::to_string(devices->size()) +
           " stage(s) but the schedule has " + std::to_string(numStages) +
           ": profile the same number of stages";

  auto number = [](const json::Object &object, llvm::StringRef key,
                   double &out) -> bool {
    std::optional<double> value = object.getNumber(key);
    if (!value || *value < 0)
      return false;
    out = *value;
    return true;
  };
  double step = 0, makespan = 0;
  if (!number(*root, "step_us", step) ||
      !number(*root, "makespan_us", makespan))
    return "expected non-negative numbers 'step_us' and 'makespan_us'";
  costs.stages.assign(numStages, {});
  costs.latency = 0;
  costs.stepOverhead = std::max(0.0, step - makespan);
  for (unsigned d = 0; d < numStages; ++d) {
    const json::Object *device = (*devices)[d].getAsObject();
    schedule::StageCosts &out = costs.stages[d];
    std::pair<const char *, double *> fields[] = {
        {"forward_us_per_row", &out.forwardPerRow},
        {"backward_us_per_row", &out.backwardPerRow},
        {"recompute_us_per_row", &out.recomputePerRow},
        {"load_us_per_row", &out.loadPerRow},
        {"optimizer_us", &out.optimizerStep},
        {"send_us", &out.sendFixed},
        {"recv_us", &out.recvFixed},
    };
    for (auto [key, field] : fields)
      if (!device || !number(*device, key, *field))
        return "devices[" + std::to_string(d) +
               "]: expected a non-negative number '" + key + "'";
    // Optional: measured where the program split its backwards (ZB-H1).
    if (device->get("weight_share") &&
        (!number(*device, "weight_share", out.weightShare) ||
         out.weightShare > 1))
      return "devices[" + std::to_string(d) +
             "]: expected 'weight_share' between 0 and 1";
  }
  return "";
}
