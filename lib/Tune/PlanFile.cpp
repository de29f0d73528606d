//===- PlanFile.cpp - The compile options gpipe-tune chose ----------------===//

#include "gpipe/Tune/PlanFile.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

using namespace gpipe;
namespace json = llvm::json;

static const char *objectiveName(PartitionObjective objective) {
  return objective == PartitionObjective::Variance ? "variance" : "bottleneck";
}

std::string gpipe::writePlanFile(const PlanFile &file) {
  const Plan &plan = file.plan;
  json::Object object{
      {"format", "gpipe-plan"},
      {"version", 1},
      {"stages", int64_t(plan.stages)},
      {"data_parallel", int64_t(plan.replicas)},
      {"microbatches", int64_t(plan.microbatches)},
      {"schedule", schedule::scheduleKindName(plan.schedule)},
      {"virtual_stages", int64_t(plan.virtualStages)},
      {"remat", stringifyRematPolicy(plan.remat)},
      {"objective", objectiveName(plan.objective)},
      {"batch_size", plan.batchSize},
      {"memory_cap", file.memoryCap},
      {"predicted_step_us", file.predictedStepUs},
  };
  return llvm::formatv("{0:2}", json::Value(std::move(object))).str() + "\n";
}

std::string gpipe::readPlanFile(llvm::StringRef text, PlanFile &file) {
  llvm::Expected<json::Value> parsed = json::parse(text);
  if (!parsed)
    return "not JSON: " + llvm::toString(parsed.takeError());
  const json::Object *root = parsed->getAsObject();
  if (!root || root->getString("format") != "gpipe-plan" ||
      root->getInteger("version") != 1)
    return "expected an object with \"format\": \"gpipe-plan\" and "
           "\"version\": 1 (a plan written by gpipe-tune)";
  auto count = [&](llvm::StringRef key, unsigned &out) -> std::string {
    std::optional<int64_t> value = root->getInteger(key);
    if (!value || *value < 1 || *value > (1 << 30))
      return "expected a positive integer '" + key.str() + "'";
    out = unsigned(*value);
    return "";
  };
  Plan &plan = file.plan;
  for (auto [key, field] :
       {std::pair<const char *, unsigned *>{"stages", &plan.stages},
        {"data_parallel", &plan.replicas},
        {"microbatches", &plan.microbatches}})
    if (std::string error = count(key, *field); !error.empty())
      return error;
  std::optional<int64_t> batch = root->getInteger("batch_size");
  if (!batch || *batch < 1)
    return "expected a positive integer 'batch_size'";
  plan.batchSize = *batch;

  std::optional<llvm::StringRef> kind = root->getString("schedule");
  std::optional<schedule::ScheduleKind> parsedKind =
      kind ? schedule::parseScheduleKind(kind->str()) : std::nullopt;
  if (!parsedKind)
    return "expected 'schedule' to be gpipe, 1f1b, zb-h1 or interleaved";
  plan.schedule = *parsedKind;
  // Plans written before interleaving have none: one stage per device.
  plan.virtualStages = 1;
  if (root->get("virtual_stages"))
    if (std::string error = count("virtual_stages", plan.virtualStages);
        !error.empty())
      return error;
  if (std::string error = schedule::checkVirtualStages(
          plan.schedule, plan.stages * plan.virtualStages, plan.virtualStages);
      !error.empty())
    return "the plan's schedule cannot run: " + error;
  std::optional<llvm::StringRef> remat = root->getString("remat");
  if (remat == "none")
    plan.remat = RematPolicy::None;
  else if (remat == "full")
    plan.remat = RematPolicy::Full;
  else if (remat == "except-last")
    plan.remat = RematPolicy::ExceptLast;
  else if (remat == "selective")
    plan.remat = RematPolicy::Selective;
  else
    return "expected 'remat' to be none, full, except-last or selective";
  std::optional<llvm::StringRef> objective = root->getString("objective");
  if (objective == "variance")
    plan.objective = PartitionObjective::Variance;
  else if (objective == "bottleneck")
    plan.objective = PartitionObjective::Bottleneck;
  else
    return "expected 'objective' to be variance or bottleneck";
  file.memoryCap = root->getString("memory_cap").value_or("").str();
  file.predictedStepUs = root->getNumber("predicted_step_us").value_or(0);
  return "";
}

void gpipe::applyPlanFile(const PlanFile &file,
                          CompilePipelineOptions &options) {
  applyPlan(file.plan, options);
  options.memoryCap = file.memoryCap;
}
