//===- BundleProgramReader.cpp - Reads a bundle's device programs ---------===//
//
// Each device's program: its instructions, each with the fields its kind
// has (InstrInfo), range-checked against the bundle's stages, devices,
// micro-batches and model inputs. The rest of the bundle is read by
// BundleReader.cpp.
//
//===----------------------------------------------------------------------===//

#include "bundle/BundleJson.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

using namespace gpipe::runtime;
using namespace gpipe::runtime::bundlejson;

bool Reader::readProgram(const Json &json, const std::string &path,
                         unsigned device, const Bundle &bundle,
                         std::vector<Instr> &out) {
  if (!json.is_array())
    return fail(path,
                "expected an array of instructions, found " + describe(json));
  out.assign(json.size(), Instr());
  for (size_t i = 0; i < json.size(); ++i)
    if (!readInstr(json[i], indexPath(path, i), device, bundle, out[i]))
      return false;
  return true;
}

bool Reader::readInstr(const Json &json, const std::string &path,
                       unsigned device, const Bundle &bundle, Instr &instr) {
  if (!expectObject(json, path))
    return false;
  std::string name;
  if (!getString(json, path, "op", name))
    return false;
  const InstrInfo *info = nullptr;
  std::string allNames;
  for (const InstrInfo &candidate : kInstrs) {
    allNames += (allNames.empty() ? "" : ", ") + std::string(candidate.name);
    if (name == candidate.name)
      info = &candidate;
  }
  if (!info)
    return fail(path, "unknown instruction '" + name + "'; expected one of " +
                          allNames);
  instr.kind = info->kind;

  std::vector<const char *> keys = {"op"};
  if (info->fields & NameField)
    keys.push_back("name");
  if (info->fields & (StageField | ServedStageField))
    keys.push_back("stage");
  if (info->fields & PeerField)
    keys.push_back("peer");
  if (info->fields & MbField)
    keys.push_back("mb");
  if (info->fields & ChannelField)
    keys.push_back("channel");
  if (!checkKeys(json, path, keys, "instruction '" + name + "'"))
    return false;

  if (info->fields & NameField) {
    if (!getString(json, path, "name", instr.inputName))
      return false;
    if (!modelInputs.count(instr.inputName))
      return fail(path, "unknown model input '" + instr.inputName +
                            "'; expected one of " + quotedList(modelInputs));
  }
  // Without interleaving a load or transfer serves its device's one stage.
  const bool servedStageNamed =
      (info->fields & ServedStageField) &&
      (json.contains("stage") || bundle.stages.size() > bundle.programs.size());
  if ((info->fields & ServedStageField) && !servedStageNamed)
    instr.stage = device;
  if ((info->fields & StageField) || servedStageNamed) {
    if (!getIndex(json, path, "stage", instr.stage))
      return false;
    if (instr.stage >= bundle.stages.size())
      return fail(path, "stage " + std::to_string(instr.stage) +
                            " out of range: the bundle has " +
                            plural(bundle.stages.size(), "stage"));
  }
  if (info->fields & PeerField) {
    if (!getIndex(json, path, "peer", instr.peer))
      return false;
    if (instr.peer >= bundle.programs.size())
      return fail(path, "peer " + std::to_string(instr.peer) +
                            " out of range: the bundle has " +
                            plural(bundle.programs.size(), "device"));
  }
  if (info->fields & MbField) {
    if (!getIndex(json, path, "mb", instr.microbatch))
      return false;
    if (instr.microbatch >= bundle.microbatchRows.size())
      return fail(path, "micro-batch " + std::to_string(instr.microbatch) +
                            " out of range: the bundle has " +
                            plural(bundle.microbatchRows.size(), "micro-batch",
                                   "micro-batches"));
  }
  if ((info->fields & ChannelField) &&
      !getIndex(json, path, "channel", instr.channel))
    return false;
  return true;
}
