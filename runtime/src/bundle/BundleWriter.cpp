//===- BundleWriter.cpp - Writes program bundles --------------------------===//
//
// The JSON text of a Bundle in the documented key order, short objects and
// arrays on one line, floats with the fewest digits that read back, sealed
// with its checksum.
//
//===----------------------------------------------------------------------===//

#include "bundle/BundleJson.h"
#include "gpipe/runtime/bundle/Base64.h"
#include "gpipe/runtime/bundle/BundleChecksum.h"
#include "gpipe/runtime/bundle/BundleReader.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

using namespace gpipe::runtime;
using namespace gpipe::runtime::bundlejson;

namespace {

/// `value` as a JSON number that reads back as the same float, written with
/// the fewest digits that do (1e-05, not 9.99999974737875e-06).
Json floatJson(float value) {
  if (!std::isfinite(value))
    return nullptr;
  for (int precision = 6; precision <= 9; ++precision) {
    std::ostringstream text;
    text.imbue(std::locale::classic());
    text.precision(precision);
    text << value;
    std::istringstream in(text.str());
    in.imbue(std::locale::classic());
    double shortest = 0.0;
    in >> shortest;
    if (in && static_cast<float>(shortest) == value)
      return shortest;
  }
  return double(value);
}

Json doubleJson(double value) {
  if (!std::isfinite(value))
    return nullptr;
  return value;
}

Json intArray(const std::vector<int64_t> &values) {
  Json out = Json::array();
  for (int64_t value : values)
    out.push_back(value);
  return out;
}

Json intArray(const std::vector<int> &values) {
  Json out = Json::array();
  for (int value : values)
    out.push_back(value);
  return out;
}

Json opJson(const Op &op) {
  const OpInfo &info = opInfo(op.kind);
  Json out = Json::object();
  out["op"] = info.name;
  if (info.attrs & KernelAttr) {
    out["kernel"] = op.kernel;
    out["space"] = intArray(op.space);
    out["batched"] = op.spaceBatched;
  }
  if (info.maxOperands > 0 || !op.operands.empty())
    out["operands"] = intArray(op.operands);
  if (info.results > 0 || !op.results.empty())
    out["results"] = intArray(op.results);
  if (info.attrs & NameAttr)
    out["name"] = op.name;
  if (info.attrs & EpsilonAttr)
    out["epsilon"] = floatJson(op.epsilon);
  if (info.attrs & MomentumAttr)
    out["momentum"] = floatJson(op.momentum);
  if (info.attrs & DropoutAttrs) {
    out["rate"] = floatJson(op.rate);
    out["seed"] = op.seed;
  }
  if (info.attrs & AttentionAttrs) {
    out["heads"] = op.heads;
    out["causal"] = op.causal;
  }
  // Only when set, so that bundles without them keep their bytes.
  if ((info.attrs & MatmulAttrs) && op.transposeA)
    out["transpose_a"] = true;
  if ((info.attrs & MatmulAttrs) && op.transposeB)
    out["transpose_b"] = true;
  auto pair = [](const int64_t(&values)[2]) {
    return intArray(std::vector<int64_t>{values[0], values[1]});
  };
  if (info.attrs & PoolAttrs)
    out["window"] = pair(op.window.window);
  if (info.attrs & (ConvAttrs | PoolAttrs)) {
    out["stride"] = pair(op.window.stride);
    out["padding"] = pair(op.window.padding);
  }
  if (info.attrs & ConvAttrs)
    out["groups"] = op.window.groups;
  if (op.fusion != FusionKind::None)
    out["fuse"] = fusionName(op.fusion);
  return out;
}

Json opsJson(const std::vector<Op> &ops) {
  Json out = Json::array();
  for (const Op &op : ops)
    out.push_back(opJson(op));
  return out;
}

Json stageJson(const StageProgram &stage) {
  Json values = Json::array();
  for (const ValueSpec &value : stage.values)
    values.push_back({{"shape", intArray(value.shape)},
                      {"type", nameIn(kTypes, value.type)},
                      {"batched", value.batched}});
  Json inputs = Json::array();
  for (const StageInput &input : stage.inputs) {
    Json entry = {{"value", input.value}};
    if (input.fromChannel)
      entry["channel"] = input.channel;
    else
      entry["input"] = input.inputName;
    inputs.push_back(std::move(entry));
  }
  Json out = Json::object();
  out["values"] = std::move(values);
  out["inputs"] = std::move(inputs);
  out["outputs"] = intArray(stage.outputs);
  out["loss"] = stage.loss;
  out["forward"] = opsJson(stage.forward);
  out["recompute"] = opsJson(stage.recompute);
  out["backward"] = opsJson(stage.backward);
  if (stage.weightsFrom != StageProgram::kNotSplit)
    out["weights_from"] = stage.weightsFrom;
  out["output_grads"] = intArray(stage.outputGrads);
  out["input_grads"] = intArray(stage.inputGrads);
  return out;
}

Json codeJson(const GeneratedCode &code) {
  Json kernels = Json::array();
  for (const GeneratedKernelSpec &kernel : code.kernels) {
    Json inputDims = Json::array();
    for (const std::vector<unsigned> &dims : kernel.inputDims)
      inputDims.push_back(dims);
    Json item = {{"symbol", kernel.symbol},
                 {"inputs", kernel.inputs},
                 {"ops", kernel.ops},
                 {"rank", kernel.rank},
                 {"inputDims", std::move(inputDims)},
                 {"outputDims", kernel.outputDims}};
    // Only where some memref has them: other bundles keep their bytes.
    if (!kernel.extents.empty()) {
      Json extents = Json::array();
      for (const std::vector<int64_t> &sizes : kernel.extents)
        extents.push_back(sizes);
      item["extents"] = std::move(extents);
    }
    // Likewise only where some memref is not f32, after the extents.
    if (std::any_of(
            kernel.types.begin(), kernel.types.end(),
            [](ElementType type) { return type != ElementType::F32; })) {
      Json types = Json::array();
      for (ElementType type : kernel.types)
        types.push_back(nameIn(kTypes, type));
      item["types"] = std::move(types);
    }
    // And the indices' bounds only where some input holds indices.
    if (std::any_of(kernel.indexBounds.begin(), kernel.indexBounds.end(),
                    [](int64_t bound) { return bound > 0; }))
      item["indexBounds"] = kernel.indexBounds;
    kernels.push_back(std::move(item));
  }
  Json cpu = Json::array();
  for (const CodeVariant &variant : code.cpu)
    cpu.push_back({{"isa", variant.isa}, {"elf", encodeBase64(variant.bytes)}});
  Json out = Json::object();
  out["kernels"] = std::move(kernels);
  out["cpu"] = std::move(cpu);
  if (code.cuda)
    out["cuda"] = {{"arch", code.cuda->arch}, {"ptx", code.cuda->ptx}};
  return out;
}

/// `interleaved`: devices run several stages, so loads and transfers name
/// theirs.
Json instrJson(const Instr &instr, bool interleaved) {
  const InstrInfo &info = instrInfo(instr.kind);
  Json out = Json::object();
  out["op"] = info.name;
  if (info.fields & NameField)
    out["name"] = instr.inputName;
  if ((info.fields & StageField) ||
      ((info.fields & ServedStageField) && interleaved))
    out["stage"] = instr.stage;
  if (info.fields & PeerField)
    out["peer"] = instr.peer;
  if (info.fields & MbField)
    out["mb"] = instr.microbatch;
  if (info.fields & ChannelField)
    out["channel"] = instr.channel;
  return out;
}

constexpr size_t kLineWidth = 100;

/// Appends `value` on one line ("[1, 2]", {"a": 1}); false (with `out` cut
/// short) once `out` grows past `budget`. The writer's documents have a fixed
/// depth, so the recursion is bounded.
bool appendInline(const Json &value, std::string &out, size_t budget) {
  if (!value.is_structured()) {
    out += dumpJson(value);
    return out.size() <= budget;
  }
  bool object = value.is_object();
  out += object ? '{' : '[';
  bool first = true;
  for (auto it = value.begin(); it != value.end(); ++it) {
    if (!first)
      out += ", ";
    first = false;
    if (object) {
      out += dumpJson(Json(it.key()));
      out += ": ";
    }
    if (!appendInline(it.value(), out, budget))
      return false;
  }
  out += object ? '}' : ']';
  return out.size() <= budget;
}

/// Appends `value` indented: on one line if it fits in kLineWidth columns,
/// else one element per line.
void appendPretty(const Json &value, size_t column, size_t indent,
                  std::string &out) {
  std::string flat;
  size_t budget = kLineWidth > column ? kLineWidth - column : 0;
  if (!value.is_structured() || value.empty() ||
      appendInline(value, flat, budget)) {
    if (flat.empty())
      appendInline(value, flat, SIZE_MAX);
    out += flat;
    return;
  }
  bool object = value.is_object();
  out += object ? "{\n" : "[\n";
  size_t remaining = value.size();
  for (auto it = value.begin(); it != value.end(); ++it) {
    out.append(indent + 2, ' ');
    size_t lineStart = out.size() - indent - 2;
    if (object) {
      out += dumpJson(Json(it.key()));
      out += ": ";
    }
    appendPretty(it.value(), out.size() - lineStart, indent + 2, out);
    if (--remaining)
      out += ',';
    out += '\n';
  }
  out.append(indent, ' ');
  out += object ? '}' : ']';
}

} // namespace

const char *gpipe::runtime::rematPolicyName(RematPolicy policy) {
  return nameIn(kRemats, policy);
}

std::string gpipe::runtime::writeBundle(const Bundle &bundle) {
  Json inputs = Json::array();
  for (const ModelInputSpec &input : bundle.inputs)
    inputs.push_back({{"name", input.name},
                      {"shape", intArray(input.shape)},
                      {"type", nameIn(kTypes, input.type)}});
  Json params = Json::array();
  for (const ParamSpec &param : bundle.params) {
    Json json = {{"name", param.name},
                 {"shape", intArray(param.shape)},
                 {"init", nameIn(kInits, param.init)},
                 {"scale", doubleJson(param.scale)},
                 {"stage", param.stage}};
    if (param.frozen)
      json["frozen"] = true;
    if (!param.tied.empty())
      json["tied"] = param.tied;
    params.push_back(std::move(json));
  }
  Json stages = Json::array();
  for (const StageProgram &stage : bundle.stages)
    stages.push_back(stageJson(stage));
  Json programs = Json::array();
  for (const std::vector<Instr> &program : bundle.programs) {
    Json instrs = Json::array();
    for (const Instr &instr : program)
      instrs.push_back(instrJson(instr, bundle.stagesPerDevice() > 1));
    programs.push_back(std::move(instrs));
  }

  Json root = Json::object();
  root["format"] = "gpipe-bundle";
  root["version"] = kBundleFormatVersion;
  root["model"] = bundle.model;
  root["batch"] = bundle.batch;
  root["microbatch_rows"] = intArray(bundle.microbatchRows);
  root["remat"] = nameIn(kRemats, bundle.remat);
  root["inputs"] = std::move(inputs);
  root["params"] = std::move(params);
  if (!bundle.weights.empty()) // optional: older bundles stay byte-identical
    root["weights"] = bundle.weights;
  root["stages"] = std::move(stages);
  root["programs"] = std::move(programs);
  if (bundle.sendWindow > 0) // optional: older bundles stay byte-identical
    root["send_window"] = bundle.sendWindow;
  if (bundle.precision)
    root["precision"] = precisionName(*bundle.precision);
  // Written even when empty: the reader then names what is missing.
  Json devices = Json::array();
  for (const PlannedDeviceMemory &device : bundle.memoryPlan.devices) {
    Json entry = Json::object();
    entry["resident_bytes"] = device.residentBytes;
    entry["peak_bytes"] = device.peakBytes;
    entry["arena_bytes"] = device.arenaBytes;
    Json buffers = Json::array();
    for (const PlacedBuffer &b : device.buffers)
      buffers.push_back(
          {b.bytes, b.offset, b.start, b.end, b.instr, b.microbatch, b.value});
    entry["buffers"] = std::move(buffers);
    devices.push_back(std::move(entry));
  }
  Json plan = Json::object();
  plan["optimizer_slots"] = bundle.memoryPlan.optimizerSlots;
  plan["devices"] = std::move(devices);
  root["memory_plan"] = std::move(plan);
  // Optional, and last: the native code's base64 after what a reader reads.
  if (!bundle.code.empty())
    root["code"] = codeJson(bundle.code);

  std::string text;
  appendPretty(root, 0, 0, text);
  return sealBundleText(text);
}
