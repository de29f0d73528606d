//===- BundlePlanReader.cpp - Reads a bundle's memory plan ----------------===//
//
// The compiler's memory plan: per device, the totals and every buffer of a
// training step (offset, lifetime, defining instruction, value), range-checked
// against the arena, the device's program and its stage's values. The rest
// of the bundle is read by BundleReader.cpp.
//
//===----------------------------------------------------------------------===//

#include "bundle/BundleJson.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include <string>

using namespace gpipe::runtime;
using namespace gpipe::runtime::bundlejson;

bool Reader::readPlacement(const Json &json, const std::string &path,
                           const std::vector<Instr> &program, int64_t numValues,
                           PlannedDeviceMemory &device) {
  const Json *buffers;
  if (!lookup(json, path, "buffers", true, buffers))
    return false;
  std::string at = keyPath(path, "buffers");
  static const char *kFields =
      "[bytes, offset, start, end, instr, microbatch, value]";
  if (!buffers->is_array())
    return fail(at, std::string("expected an array of ") + kFields +
                        ", found " + describe(*buffers));
  const int64_t room = device.arenaBytes - device.residentBytes;
  device.buffers.resize(buffers->size());
  for (size_t i = 0; i < buffers->size(); ++i) {
    std::string entry = indexPath(at, i);
    const Json &item = (*buffers)[i];
    if (!item.is_array() || item.size() != 7)
      return fail(entry, std::string("expected ") + kFields + ", found " +
                             describe(item));
    int64_t fields[7];
    for (size_t k = 0; k < 7; ++k)
      if (!integerValue(item[k], indexPath(entry, k), "an integer", fields[k]))
        return false;
    PlacedBuffer &buffer = device.buffers[i];
    buffer = {fields[0], fields[1], fields[2], fields[3],
              fields[4], fields[5], fields[6]};
    if (buffer.bytes < 0 || buffer.offset < 0 ||
        buffer.offset > room - buffer.bytes)
      return fail(entry, "expected a buffer inside the arena's " +
                             std::to_string(room) +
                             " bytes after the resident block, found " +
                             std::to_string(buffer.bytes) + " bytes at " +
                             std::to_string(buffer.offset));
    if (buffer.offset % kPlacedBufferGranule != 0 ||
        buffer.bytes % kPlacedBufferGranule != 0)
      return fail(entry, "expected an offset and size that are multiples of " +
                             std::to_string(kPlacedBufferGranule) +
                             " bytes, found " + std::to_string(buffer.bytes) +
                             " bytes at " + std::to_string(buffer.offset));
    if (buffer.start < 0 || buffer.end < buffer.start)
      return fail(entry, "expected 0 <= start <= end, found " +
                             std::to_string(buffer.start) + " and " +
                             std::to_string(buffer.end));
    if (buffer.instr < 0 || buffer.instr >= int64_t(program.size()))
      return fail(indexPath(entry, 4),
                  "expected an instruction of the device's program (0 to " +
                      std::to_string(int64_t(program.size()) - 1) +
                      "), found " + std::to_string(buffer.instr));
    const Instr &defining = program[buffer.instr];
    if (buffer.microbatch != -1 &&
        (defining.kind == InstrKind::OptimizerStep ||
         buffer.microbatch != int64_t(defining.microbatch)))
      return fail(indexPath(entry, 5),
                  "expected -1 or the micro-batch of instruction " +
                      std::to_string(buffer.instr) + ", found " +
                      std::to_string(buffer.microbatch));
    if (buffer.value < -1 || buffer.value >= numValues)
      return fail(indexPath(entry, 6),
                  "expected -1 or a value id of the device's stage (0 to " +
                      std::to_string(numValues - 1) + "), found " +
                      std::to_string(buffer.value));
  }
  return true;
}

bool Reader::readMemoryPlan(const Json &root, Bundle &bundle) {
  const Json *plan;
  if (!lookup(root, "", "memory_plan", true, plan))
    return false;
  const std::string path = "memory_plan";
  int64_t slots;
  const Json *devices;
  if (!expectObject(*plan, path) ||
      !checkKeys(*plan, path, {"optimizer_slots", "devices"}) ||
      !getInt(*plan, path, "optimizer_slots", slots) ||
      !getArray(*plan, path, "devices", devices))
    return false;
  if (slots < 0 || slots > 8)
    return fail(keyPath(path, "optimizer_slots"),
                "expected 0 to 8 optimizer slots, found " +
                    std::to_string(slots));
  if (devices->size() != bundle.programs.size())
    return fail(keyPath(path, "devices"),
                "expected one entry per device (" +
                    plural(bundle.programs.size(), "device") + "), found " +
                    std::to_string(devices->size()));
  bundle.memoryPlan.optimizerSlots = unsigned(slots);
  for (size_t d = 0; d < devices->size(); ++d) {
    std::string at = indexPath(keyPath(path, "devices"), d);
    PlannedDeviceMemory device;
    if (!expectObject((*devices)[d], at) ||
        !checkKeys(
            (*devices)[d], at,
            {"resident_bytes", "peak_bytes", "arena_bytes", "buffers"}) ||
        !getInt((*devices)[d], at, "resident_bytes", device.residentBytes) ||
        !getInt((*devices)[d], at, "peak_bytes", device.peakBytes) ||
        !getInt((*devices)[d], at, "arena_bytes", device.arenaBytes))
      return false;
    if (device.residentBytes < 0 || device.peakBytes < device.residentBytes ||
        device.arenaBytes < device.peakBytes)
      return fail(at, "expected 0 <= resident_bytes <= peak_bytes <= "
                      "arena_bytes, found " +
                          std::to_string(device.residentBytes) + ", " +
                          std::to_string(device.peakBytes) + ", " +
                          std::to_string(device.arenaBytes));
    // Value ids of any of the device's stages.
    size_t numValues = 0;
    for (size_t s = d; s < bundle.stages.size(); s += devices->size())
      numValues = std::max(numValues, bundle.stages[s].values.size());
    if (!readPlacement((*devices)[d], at, bundle.programs[d],
                       int64_t(numValues), device))
      return false;
    bundle.memoryPlan.devices.push_back(device);
  }
  return true;
}
