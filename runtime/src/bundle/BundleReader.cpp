//===- BundleReader.cpp - Reads program bundles --------------------------===//
//
// The reader walks the parsed JSON document once, in document order, and
// stops at the first error, which names the JSON location ("stages[1].
// forward[3]") and says what was expected and what was found. Only fixed
// depths of the document are visited, so no recursion depends on the input
// (nlohmann's parser itself is iterative). The typed field getters and the
// checksum's check are in BundleJson.cpp, the device programs' in
// BundleProgramReader.cpp, the memory plan's in BundlePlanReader.cpp, the
// generated code's in BundleCodeReader.cpp, the writer in BundleWriter.cpp.
//
//===----------------------------------------------------------------------===//

#include "gpipe/runtime/bundle/BundleReader.h"
#include "bundle/BundleJson.h"
#include "gpipe/runtime/bundle/BackwardSplit.h"
#include "gpipe/runtime/bundle/BundleChecksum.h"
#include "gpipe/runtime/base/FileRead.h"

#include <nlohmann/json.hpp>

#include <climits>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <new>
#include <optional>
#include <set>
#include <string_view>

using namespace gpipe::runtime;

using namespace gpipe::runtime::bundlejson;

//===----------------------------------------------------------------------===//
// Sections
//===----------------------------------------------------------------------===//

bool Reader::read(const Json &root, std::string_view text, Bundle &bundle) {
  if (!root.is_object())
    return fail("", "expected a JSON object at the top level, found " +
                        describe(root));

  // The format and version come first: a newer file may have other keys.
  const Json *format;
  if (!lookup(root, "", "format", false, format))
    return false;
  if (!format)
    return fail("", "missing key 'format' (expected \"gpipe-bundle\")");
  if (!format->is_string() || format->get<std::string>() != "gpipe-bundle")
    return fail("", "'format' must be \"gpipe-bundle\", found " +
                        shortText(*format));
  int64_t version;
  if (!getInt(root, "", "version", version))
    return false;
  if (version != kBundleFormatVersion)
    return fail("", "unsupported bundle version " + std::to_string(version) +
                        " (this runtime reads " +
                        std::to_string(kBundleFormatVersion) + "); " +
                        (version < kBundleFormatVersion
                             ? "recompile it with gpipe-translate"
                             : "use the runtime that came with the compiler "
                               "that wrote it"));
  if (!checkKeys(root, "",
                 {"format", "version", "model", "batch", "microbatch_rows",
                  "remat", "inputs", "params", "weights", "stages", "programs",
                  "send_window", "precision", "memory_plan", "code",
                  "checksum"}) ||
      !verifyChecksum(root, text))
    return false;

  if (!getString(root, "", "model", bundle.model) ||
      !getInt(root, "", "batch", bundle.batch) ||
      !getString(root, "", "weights", bundle.weights, /*required=*/false))
    return false;
  if (bundle.batch < 1)
    return fail("", "expected a positive 'batch', found " +
                        std::to_string(bundle.batch));

  if (!getIntArray(root, "", "microbatch_rows", bundle.microbatchRows))
    return false;
  if (bundle.microbatchRows.empty())
    return fail(
        "", "'microbatch_rows' is empty; expected at least one micro-batch");
  int64_t total = 0;
  bool overflow = false;
  for (size_t m = 0; m < bundle.microbatchRows.size(); ++m) {
    int64_t rows = bundle.microbatchRows[m];
    if (rows < 1)
      return fail(indexPath("microbatch_rows", m),
                  "expected a positive row count, found " +
                      std::to_string(rows));
    overflow |= __builtin_add_overflow(total, rows, &total);
  }
  if (overflow || total != bundle.batch)
    return fail("", "'microbatch_rows' sum to " +
                        (overflow ? std::string("more than 2^63")
                                  : std::to_string(total)) +
                        ", expected the batch " + std::to_string(bundle.batch));

  std::string remat;
  if (!getString(root, "", "remat", remat))
    return false;
  bool knownRemat = false;
  for (const auto &[policy, name] : kRemats)
    if (remat == name) {
      bundle.remat = policy;
      knownRemat = true;
    }
  if (!knownRemat)
    return fail("", "unknown remat policy '" + remat + "'; expected one of " +
                        namesOf(kRemats));

  if (!readModelInputs(root, bundle))
    return false;

  const Json *stages, *programs;
  if (!getArray(root, "", "stages", stages) ||
      !getArray(root, "", "programs", programs))
    return false;
  if (programs->empty() || stages->size() % programs->size() != 0)
    return fail("", "expected one program per device, the devices running "
                    "the stages round-robin (a number of programs that "
                    "divides the stages): " +
                        plural(stages->size(), "stage") + ", found " +
                        plural(programs->size(), "program"));

  if (!readParams(root, stages->size(), bundle) || !readCode(root, bundle.code))
    return false;

  bundle.stages.assign(stages->size(), StageProgram());
  for (size_t s = 0; s < stages->size(); ++s)
    if (!readStage((*stages)[s], indexPath("stages", s), unsigned(s),
                   bundle.stages[s]))
      return false;

  // Optional: a bundle without it waits for no send.
  int64_t window = 0;
  if (root.contains("send_window")) {
    if (!getInt(root, "", "send_window", window))
      return false;
    if (window < 1 || window > int64_t(1) << 30)
      return fail("", "expected a 'send_window' of at least 1 (or none, for "
                      "sends that complete as they are issued), found " +
                          std::to_string(window));
  }
  bundle.sendWindow = unsigned(window);
  // Optional: a bundle without it leaves the precision to the backend.
  if (root.contains("precision")) {
    std::string name;
    if (!getString(root, "", "precision", name))
      return false;
    bundle.precision = parsePrecision(name);
    if (!bundle.precision)
      return fail("", "expected a 'precision' of f32, tf32 or bf16, found '" +
                          name + "'");
  }
  bundle.programs.assign(programs->size(), {});
  for (size_t d = 0; d < programs->size(); ++d)
    if (!readProgram((*programs)[d], indexPath("programs", d), unsigned(d),
                     bundle, bundle.programs[d]))
      return false;
  return readMemoryPlan(root, bundle);
}

static bool parseType(const std::string &name, ElementType &out) {
  for (const auto &[type, typeName] : kTypes)
    if (name == typeName) {
      out = type;
      return true;
    }
  return false;
}

bool Reader::readModelInputs(const Json &root, Bundle &bundle) {
  const Json *inputs;
  if (!getArray(root, "", "inputs", inputs))
    return false;
  bundle.inputs.assign(inputs->size(), ModelInputSpec());
  for (size_t i = 0; i < inputs->size(); ++i) {
    const Json &json = (*inputs)[i];
    std::string path = indexPath("inputs", i);
    ModelInputSpec &input = bundle.inputs[i];
    std::string type;
    if (!expectObject(json, path) ||
        !checkKeys(json, path, {"name", "shape", "type"}) ||
        !getString(json, path, "name", input.name) ||
        !getIntArray(json, path, "shape", input.shape) ||
        !getString(json, path, "type", type))
      return false;
    if (!parseType(type, input.type))
      return fail(path, "unknown element type '" + type +
                            "'; expected one of " + namesOf(kTypes));
    if (!modelInputs.insert(input.name).second)
      return fail(path, "model input '" + input.name + "' is declared twice");
  }
  return true;
}

bool Reader::readParams(const Json &root, size_t numStages, Bundle &bundle) {
  const Json *params;
  if (!getArray(root, "", "params", params))
    return false;
  bundle.params.assign(params->size(), ParamSpec());
  for (size_t i = 0; i < params->size(); ++i) {
    const Json &json = (*params)[i];
    std::string path = indexPath("params", i);
    ParamSpec &param = bundle.params[i];
    std::string init;
    if (!expectObject(json, path) ||
        !checkKeys(json, path,
                   {"name", "shape", "init", "scale", "stage", "frozen",
                    "tied"}) ||
        !getString(json, path, "name", param.name) ||
        !getIntArray(json, path, "shape", param.shape) ||
        !getString(json, path, "init", init) ||
        !getNumber(json, path, "scale", param.scale, /*required=*/false) ||
        !getIndex(json, path, "stage", param.stage) ||
        !getBool(json, path, "frozen", param.frozen, /*required=*/false) ||
        !getString(json, path, "tied", param.tied, /*required=*/false))
      return false;
    if (param.name.empty())
      return fail(path, "expected a non-empty 'name'");
    bool knownInit = false;
    for (const auto &[kind, name] : kInits)
      if (init == name) {
        param.init = kind;
        knownInit = true;
      }
    if (!knownInit)
      return fail(path, "unknown init '" + init + "'; expected one of " +
                            namesOf(kInits));
    if (param.stage >= numStages)
      return fail(path, "stage " + std::to_string(param.stage) +
                            " out of range: the bundle has " +
                            plural(numStages, "stage"));
    if (!paramNames.insert(param.name).second)
      return fail(path, "parameter '" + param.name + "' is declared twice");
    if (!param.tied.empty()) {
      const ParamSpec *root = nullptr;
      for (size_t j = 0; j < i; ++j)
        if (bundle.params[j].name == param.tied)
          root = &bundle.params[j];
      if (!root || !root->tied.empty())
        return fail(path, "parameter '" + param.name + "' is tied to '" +
                              param.tied +
                              "', which is no untied parameter declared "
                              "before it");
      if (root->shape != param.shape || root->init != param.init ||
          root->scale != param.scale || root->frozen != param.frozen)
        return fail(path, "parameter '" + param.name + "' is tied to '" +
                              param.tied +
                              "' but declared otherwise (shape, init, scale "
                              "or frozen)");
    }
  }
  return true;
}

bool Reader::readValueRef(const Json &object, const std::string &path,
                          const char *key, const StageContext &context,
                          const char *what, int &out) {
  int64_t id;
  if (!getInt(object, path, key, id))
    return false;
  if (id < 0 || uint64_t(id) >= context.numValues)
    return fail(path, std::string(what) + " " + std::to_string(id) +
                          " out of range: stage " +
                          std::to_string(context.index) + " has " +
                          plural(context.numValues, "value"));
  out = int(id);
  return true;
}

bool Reader::readValueList(const Json &object, const std::string &path,
                           const char *key, const StageContext &context,
                           std::vector<int> &out) {
  std::vector<int64_t> ids;
  if (!getIntArray(object, path, key, ids))
    return false;
  out.assign(ids.size(), -1);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || uint64_t(ids[i]) >= context.numValues)
      return fail(indexPath(keyPath(path, key), i),
                  "value " + std::to_string(ids[i]) + " out of range: stage " +
                      std::to_string(context.index) + " has " +
                      plural(context.numValues, "value"));
    out[i] = int(ids[i]);
  }
  return true;
}

bool Reader::readStage(const Json &json, const std::string &path,
                       unsigned index, StageProgram &stage) {
  if (!expectObject(json, path) ||
      !checkKeys(json, path,
                 {"values", "inputs", "outputs", "loss", "forward", "recompute",
                  "backward", "weights_from", "output_grads", "input_grads"}))
    return false;

  // Values.
  const Json *values;
  if (!getArray(json, path, "values", values))
    return false;
  stage.values.assign(values->size(), ValueSpec());
  for (size_t v = 0; v < values->size(); ++v) {
    const Json &value = (*values)[v];
    std::string valuePath = indexPath(keyPath(path, "values"), v);
    ValueSpec &spec = stage.values[v];
    std::string type;
    if (!expectObject(value, valuePath) ||
        !checkKeys(value, valuePath, {"shape", "type", "batched"}) ||
        !getIntArray(value, valuePath, "shape", spec.shape) ||
        !getString(value, valuePath, "type", type) ||
        !getBool(value, valuePath, "batched", spec.batched))
      return false;
    if (!parseType(type, spec.type))
      return fail(valuePath, "unknown element type '" + type +
                                 "'; expected one of " + namesOf(kTypes));
  }
  if (values->size() > size_t(INT_MAX))
    return fail(path, "too many values: " + std::to_string(values->size()));
  StageContext context{index, values->size()};

  // Inputs: model inputs by name, channels numbered 0..n-1.
  const Json *inputs;
  if (!getArray(json, path, "inputs", inputs))
    return false;
  stage.inputs.assign(inputs->size(), StageInput());
  std::set<unsigned> channels;
  for (size_t i = 0; i < inputs->size(); ++i) {
    const Json &input = (*inputs)[i];
    std::string inputPath = indexPath(keyPath(path, "inputs"), i);
    StageInput &spec = stage.inputs[i];
    if (!expectObject(input, inputPath) ||
        !checkKeys(input, inputPath, {"value", "input", "channel"}) ||
        !readValueRef(input, inputPath, "value", context, "value", spec.value))
      return false;
    bool hasInput = input.contains("input"),
         hasChannel = input.contains("channel");
    if (hasInput == hasChannel)
      return fail(inputPath,
                  std::string("expected exactly one of 'input' (a model "
                              "input) or 'channel', found ") +
                      (hasInput ? "both" : "neither"));
    spec.fromChannel = hasChannel;
    if (hasChannel) {
      if (!getIndex(input, inputPath, "channel", spec.channel))
        return false;
      if (!channels.insert(spec.channel).second)
        return fail(inputPath, "channel " + std::to_string(spec.channel) +
                                   " is bound twice");
      continue;
    }
    if (!getString(input, inputPath, "input", spec.inputName))
      return false;
    if (!modelInputs.count(spec.inputName))
      return fail(inputPath, "unknown model input '" + spec.inputName +
                                 "'; expected one of " +
                                 quotedList(modelInputs));
  }
  if (!channels.empty() && *channels.rbegin() >= channels.size()) {
    unsigned missing = 0;
    while (channels.count(missing))
      ++missing;
    return fail(keyPath(path, "inputs"),
                "channels must be numbered from 0 consecutively: found "
                "channel " +
                    std::to_string(*channels.rbegin()) + " but no channel " +
                    std::to_string(missing));
  }

  if (!readValueList(json, path, "outputs", context, stage.outputs))
    return false;
  int64_t loss;
  if (!getInt(json, path, "loss", loss))
    return false;
  if (loss < -1 || (loss >= 0 && uint64_t(loss) >= context.numValues))
    return fail(path, "loss value " + std::to_string(loss) +
                          " out of range: stage " + std::to_string(index) +
                          " has " + plural(context.numValues, "value") +
                          " (-1: no loss)");
  stage.loss = int(loss);

  if (!readOps(json, path, "forward", context, stage.forward) ||
      !readOps(json, path, "recompute", context, stage.recompute) ||
      !readOps(json, path, "backward", context, stage.backward) ||
      !readValueList(json, path, "output_grads", context, stage.outputGrads) ||
      !readValueList(json, path, "input_grads", context, stage.inputGrads))
    return false;
  // Optional: a backward split for zero-bubble schedules (BackwardSplit.h).
  if (json.contains("weights_from")) {
    int64_t from = 0;
    if (!getInt(json, path, "weights_from", from))
      return false;
    if (from < 0 || uint64_t(from) > stage.backward.size())
      return fail(path, "weights_from " + std::to_string(from) +
                            " out of range: the backward has " +
                            plural(stage.backward.size(), "op"));
    stage.weightsFrom = size_t(from);
  }
  for (size_t k = 0; k < stage.backward.size(); ++k)
    for (size_t r = 1; r < stage.backward[k].results.size(); ++r)
      if (stage.backward[k].results[r] == -1 &&
          (stage.weightsFrom == StageProgram::kNotSplit ||
           k >= stage.weightsFrom))
        return fail(path + ".backward[" + std::to_string(k) + "]",
                    "result " + std::to_string(r) +
                        " is -1: only a dense or layer-norm gradient before "
                        "a split backward's weights_from may leave its "
                        "parameter gradients to a later op");
  return true;
}

bool Reader::readOps(const Json &object, const std::string &path,
                     const char *key, const StageContext &context,
                     std::vector<Op> &out) {
  const Json *ops;
  if (!getArray(object, path, key, ops))
    return false;
  out.assign(ops->size(), Op());
  for (size_t i = 0; i < ops->size(); ++i)
    if (!readOp((*ops)[i], indexPath(keyPath(path, key), i), context, out[i]))
      return false;
  return true;
}

static std::string countText(unsigned min, unsigned max, const char *noun) {
  std::string text = std::to_string(min);
  if (max != min)
    text += " or " + std::to_string(max);
  return text + " " + noun + (max == 1 ? "" : "s");
}

bool Reader::readOp(const Json &json, const std::string &path,
                    const StageContext &context, Op &op) {
  if (!expectObject(json, path))
    return false;
  std::string name;
  if (!getString(json, path, "op", name))
    return false;
  std::optional<OpKind> kind = opKindNamed(name);
  if (!kind) {
    std::string allNames;
    for (const OpInfo &info : kOpTable)
      allNames += (allNames.empty() ? "" : ", ") + std::string(info.name);
    return fail(path, "unknown op '" + name + "'; expected one of " + allNames);
  }
  op.kind = *kind;
  const OpInfo &info = opInfo(op.kind);

  std::vector<const char *> keys = {"op", "operands", "results", "fuse"};
  if (info.attrs & NameAttr)
    keys.push_back("name");
  if (info.attrs & EpsilonAttr)
    keys.push_back("epsilon");
  if (info.attrs & MomentumAttr)
    keys.push_back("momentum");
  if (info.attrs & DropoutAttrs)
    keys.insert(keys.end(), {"rate", "seed"});
  if (info.attrs & AttentionAttrs)
    keys.insert(keys.end(), {"heads", "causal"});
  if (info.attrs & PoolAttrs)
    keys.push_back("window");
  if (info.attrs & (ConvAttrs | PoolAttrs))
    keys.insert(keys.end(), {"stride", "padding"});
  if (info.attrs & ConvAttrs)
    keys.push_back("groups");
  if (info.attrs & KernelAttr)
    keys.insert(keys.end(), {"kernel", "space", "batched"});
  if (info.attrs & MatmulAttrs)
    keys.insert(keys.end(), {"transpose_a", "transpose_b"});
  if (!checkKeys(json, path, keys, "op '" + name + "'"))
    return false;

  std::vector<int64_t> operands, results;
  if (!getIntArray(json, path, "operands", operands, /*required=*/false) ||
      !getIntArray(json, path, "results", results, /*required=*/false))
    return false;
  if (operands.size() < info.minOperands || operands.size() > info.maxOperands)
    return fail(path,
                "op '" + name + "' expects " +
                    countText(info.minOperands, info.maxOperands, "operand") +
                    ", found " + std::to_string(operands.size()));
  const unsigned expectedResults = resultCountOf(info, operands.size());
  if (results.size() != expectedResults)
    return fail(path,
                "op '" + name + "' expects " +
                    countText(expectedResults, expectedResults, "result") +
                    ", found " + std::to_string(results.size()));
  auto outOfRange = [&](const char *what, int64_t id) {
    return fail(path, std::string(what) + " " + std::to_string(id) +
                          " out of range: stage " +
                          std::to_string(context.index) + " has " +
                          plural(context.numValues, "value"));
  };
  op.operands.assign(operands.size(), -1);
  for (size_t i = 0; i < operands.size(); ++i) {
    if (operands[i] < 0 || uint64_t(operands[i]) >= context.numValues)
      return outOfRange("operand", operands[i]);
    op.operands[i] = int(operands[i]);
  }
  op.results.assign(results.size(), -1);
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i] == -1 && i == 0 && info.has(DropsFirstResult))
      continue; // the input gradient is not needed
    // The B half of a split backward's dense or layer-norm gradient.
    if (results[i] == -1 && i > 0 && separatesWeightGradients(op.kind))
      continue;
    if (results[i] < 0 || uint64_t(results[i]) >= context.numValues)
      return outOfRange("result", results[i]);
    op.results[i] = int(results[i]);
  }

  if (info.attrs & NameAttr) {
    if (!getString(json, path, "name", op.name))
      return false;
    if (!paramNames.count(op.name))
      return fail(path, "unknown parameter '" + op.name + "'");
  }
  if ((info.attrs & EpsilonAttr) &&
      !getFloat(json, path, "epsilon", op.epsilon, /*required=*/false))
    return false;
  if ((info.attrs & MomentumAttr) &&
      !getFloat(json, path, "momentum", op.momentum, /*required=*/false))
    return false;
  if ((info.attrs & DropoutAttrs) &&
      (!getFloat(json, path, "rate", op.rate, /*required=*/false) ||
       !getSeed(json, path, "seed", op.seed, /*required=*/false)))
    return false;
  if ((info.attrs & AttentionAttrs) &&
      (!getInt(json, path, "heads", op.heads, /*required=*/false) ||
       !getBool(json, path, "causal", op.causal, /*required=*/false)))
    return false;
  if ((info.attrs & MatmulAttrs) &&
      (!getBool(json, path, "transpose_a", op.transposeA, /*required=*/false) ||
       !getBool(json, path, "transpose_b", op.transposeB, /*required=*/false)))
    return false;
  if ((info.attrs & PoolAttrs) &&
      !readPair(json, path, "window", 1, op.window.window))
    return false;
  if ((info.attrs & (ConvAttrs | PoolAttrs)) &&
      (!readPair(json, path, "stride", 1, op.window.stride) ||
       !readPair(json, path, "padding", 0, op.window.padding)))
    return false;
  if (info.attrs & ConvAttrs) {
    if (!getInt(json, path, "groups", op.window.groups, /*required=*/false))
      return false;
    if (op.window.groups < 1)
      return fail(path, "expected groups >= 1, found " +
                            std::to_string(op.window.groups));
  }
  if ((info.attrs & KernelAttr) && !readKernelOp(json, path, op))
    return false;
  std::string fusion;
  if (!getString(json, path, "fuse", fusion, /*required=*/false))
    return false;
  if (!fusion.empty()) {
    std::optional<FusionKind> kind = fusionNamed(fusion);
    if (!kind)
      return fail(path, "unknown fusion '" + fusion +
                            "'; expected dense_activation or add_layer_norm");
    op.fusion = *kind;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

StatusOr<Bundle> gpipe::runtime::parseBundle(const std::string &text,
                                             const std::string &sourceName) {
  std::string prefix = "'" + sourceName + "': ";
  try {
    Json root;
    try {
      root = Json::parse(text);
    } catch (const Json::parse_error &e) {
      // "[json.exception.parse_error.101] parse error at line 1, column 5:
      // ..." without the exception id.
      std::string message = e.what();
      size_t end = message.find("] ");
      if (message.rfind("[json.exception.", 0) == 0 && end != std::string::npos)
        message = message.substr(end + 2);
      return Status(StatusCode::InvalidBundle,
                    prefix + "malformed JSON: " + message);
    }
    Reader reader(sourceName);
    Bundle bundle;
    if (!reader.read(root, text, bundle))
      return Status(StatusCode::InvalidBundle, reader.error);
    return bundle;
  } catch (const std::bad_alloc &) {
    return Status(StatusCode::OutOfMemory,
                  prefix + "out of memory while reading the bundle");
  } catch (const std::exception &e) {
    return Status(StatusCode::InvalidBundle,
                  prefix +
                      "unexpected error while reading the bundle: " + e.what());
  }
}

StatusOr<Bundle> gpipe::runtime::loadBundle(const std::string &path) {
  StatusOr<std::string> text =
      readRegularFile(path, kMaxBundleBytes, "a bundle");
  if (!text.ok())
    return text.status();
  StatusOr<Bundle> bundle = parseBundle(*text, path);
  // The compiler writes the weights beside the bundle: a relative path is
  // relative to the bundle's directory, not to the working directory.
  size_t slash = path.rfind('/');
  if (bundle.ok() && !bundle->weights.empty() && bundle->weights[0] != '/' &&
      slash != std::string::npos)
    bundle->weights.insert(0, path, 0, slash + 1);
  return bundle;
}
