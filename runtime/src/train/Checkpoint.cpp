//===- Checkpoint.cpp - Saving and resuming training ----------------------===//

#include "gpipe/runtime/train/Checkpoint.h"

#include "gpipe/runtime/base/FileRead.h"
#include "gpipe/runtime/kernels/Optimizers.h"
#include "gpipe/runtime/bundle/SafeTensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>
#include <vector>

using namespace gpipe::runtime;
using Json = nlohmann::json;

namespace {

constexpr const char *kFormat = "gpipe-checkpoint";
constexpr int kVersion = 1;
constexpr const char *kTensors = "tensors.safetensors";
constexpr const char *kState = "state.json";
constexpr const char *kLatest = "latest";

Status ioError(const std::string &what, const std::string &path) {
  return Status(StatusCode::Io,
                what + " '" + path + "': " + std::strerror(errno));
}

/// Writes `bytes` to `path` and fsyncs it.
Status writeDurably(const std::string &path, const std::string &bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return ioError("cannot create", path);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      Status status = ioError("cannot write", path);
      ::close(fd);
      return status;
    }
    done += size_t(n);
  }
  if (::fsync(fd) != 0) {
    Status status = ioError("cannot fsync", path);
    ::close(fd);
    return status;
  }
  if (::close(fd) != 0)
    return ioError("cannot close", path);
  return {};
}

/// fsyncs a directory, so that a rename inside it is durable.
Status syncDirectory(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return ioError("cannot open directory", dir);
  int rc = ::fsync(fd);
  ::close(fd);
  return rc == 0 ? Status() : ioError("cannot fsync directory", dir);
}

/// Removes `path` and, if a directory, what it holds (one level: a
/// checkpoint's files).
void removeTree(const std::string &path) {
  if (DIR *d = ::opendir(path.c_str())) {
    while (dirent *entry = ::readdir(d)) {
      std::string name = entry->d_name;
      if (name != "." && name != "..")
        ::unlink((path + "/" + name).c_str());
    }
    ::closedir(d);
  }
  ::rmdir(path.c_str());
}

/// The bytes of a checkpoint's file, refused past `maxBytes` (Checkpoint.h).
StatusOr<std::string> readFile(const std::string &path, uint64_t maxBytes,
                               const char *what) {
  return readRegularFile(path, maxBytes, what);
}

std::string stepName(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%010lld",
                static_cast<long long>(step));
  return name;
}

std::string slotTensorName(unsigned slot, const std::string &param) {
  return "optimizer." + std::to_string(slot) + "/" + param;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

/// The shortest decimal text that reads back as `value`, so that state.json
/// and messages say 0.01, not 0.009999999776482582.
std::string shortestText(float value) {
  char text[32];
  for (int digits = 1; digits <= 9; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, double(value));
    if (float(std::strtod(text, nullptr)) == value)
      break;
  }
  return text;
}

/// The hyper-parameters a resumed run must share with the saved one for its
/// steps to be the uninterrupted run's: those `kind`'s update rule reads,
/// with the weight decay and the clipping norm, as state.json names them.
std::vector<std::pair<const char *, float>>
updateRuleFields(const OptimizerConfig &config) {
  std::vector<std::pair<const char *, float>> fields;
  const OptimizerKind kind = config.kind;
  if (kind == OptimizerKind::Momentum || kind == OptimizerKind::RmsProp)
    fields.push_back({"momentum", config.momentum});
  if (kind == OptimizerKind::RmsProp)
    fields.push_back({"decay", config.decay});
  if (kind == OptimizerKind::Adam || kind == OptimizerKind::AdamW) {
    fields.push_back({"beta1", config.beta1});
    fields.push_back({"beta2", config.beta2});
  }
  if (kind != OptimizerKind::Sgd && kind != OptimizerKind::Momentum)
    fields.push_back({"epsilon", config.epsilon});
  fields.push_back({"weight_decay", config.weightDecay});
  fields.push_back({"clip_grad_norm", config.clipGradNorm});
  return fields;
}

} // namespace

Status gpipe::runtime::createSaveDirectory(const std::string &dir) {
  // Each missing ancestor in turn, as mkdir -p.
  for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    std::string prefix = dir.substr(0, slash);
    if (!prefix.empty() && ::mkdir(prefix.c_str(), 0755) != 0 &&
        errno != EEXIST)
      return ioError("cannot create the checkpoint directory", prefix);
    if (slash == std::string::npos)
      break;
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    errno = ENOTDIR; // mkdir's EEXIST hid it; access would say EACCES
    return ioError("cannot create the checkpoint directory", dir);
  }
  // Writable: a save must not fail after hours of training.
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return ioError("cannot write checkpoints into", dir);
  return {};
}

StatusOr<std::string>
gpipe::runtime::saveCheckpoint(Engine &engine, const std::string &dir,
                               const std::string &loopState, unsigned keep) {
  Json loop = Json::parse(loopState, nullptr, /*allow_exceptions=*/false);
  if (!loop.is_object())
    return Status(
        StatusCode::InvalidArgument,
        "the loop state of a checkpoint must be a JSON object, got '" +
            loopState + "'");
  if (engine.leads())
    if (Status status = createSaveDirectory(dir); !status.ok())
      return status;

  // Across processes each reads every tensor (collective calls), and only
  // the first writes.
  const Bundle &bundle = engine.bundle();
  const unsigned slots = optimizerSlots(engine.optimizerKind());
  std::vector<NamedTensor> tensors;
  for (const ParamSpec &spec : bundle.params) {
    NamedTensor param{spec.name, spec.shape, {}};
    if (Status status = engine.parameter(spec.name, param.data); !status.ok())
      return status;
    tensors.push_back(std::move(param));
    for (unsigned slot = 0; slot < slots; ++slot) {
      NamedTensor state{slotTensorName(slot, spec.name), spec.shape, {}};
      if (Status status = engine.optimizerState(spec.name, slot, state.data);
          !status.ok())
        return status;
      tensors.push_back(std::move(state));
    }
  }
  const int64_t step = engine.stepsDone();
  if (!engine.leads())
    return dir + "/" + stepName(step);
  Json hyperParameters = Json::object();
  for (const auto &[key, value] : updateRuleFields(engine.optimizerConfig()))
    hyperParameters[key] = std::strtod(shortestText(value).c_str(), nullptr);
  Json state = {{"format", kFormat},
                {"version", kVersion},
                {"step", step},
                {"model", bundle.model},
                {"optimizer", optimizerKindName(engine.optimizerKind())},
                {"optimizer_config", hyperParameters},
                {"loop", loop}};

  // A second save of one step (an application's) gets a name of its own:
  // replacing the first in place would leave `latest` naming nothing for a
  // moment.
  std::string name = stepName(step);
  struct stat existing;
  for (int copy = 2; ::stat((dir + "/" + name).c_str(), &existing) == 0; ++copy)
    name = stepName(step) + "-" + std::to_string(copy);
  const std::string temp =
      dir + "/.tmp-" + name + "-" + std::to_string(::getpid());
  removeTree(temp);
  if (::mkdir(temp.c_str(), 0755) != 0)
    return ioError("cannot create", temp);
  Status status = writeDurably(
      temp + "/" + kTensors, encodeSafeTensors(tensors, {{"format", kFormat}}));
  if (status.ok())
    status = writeDurably(temp + "/" + kState, state.dump(2) + "\n");
  if (status.ok())
    status = syncDirectory(temp);
  const std::string final = dir + "/" + name;
  if (status.ok() && ::rename(temp.c_str(), final.c_str()) != 0)
    status = ioError("cannot rename the checkpoint into", final);
  if (!status.ok()) {
    removeTree(temp);
    return status;
  }
  // `latest` names the new checkpoint only once it is complete and durable.
  const std::string latestTemp =
      dir + "/.tmp-latest-" + std::to_string(::getpid());
  status = syncDirectory(dir);
  if (status.ok())
    status = writeDurably(latestTemp, name + "\n");
  if (status.ok() &&
      ::rename(latestTemp.c_str(), (dir + "/" + kLatest).c_str()) != 0)
    status = ioError("cannot rename into", dir + "/" + kLatest);
  if (status.ok())
    status = syncDirectory(dir);
  if (!status.ok())
    return status;

  if (keep > 0) {
    std::vector<std::string> saved;
    if (DIR *d = ::opendir(dir.c_str())) {
      while (dirent *entry = ::readdir(d)) {
        std::string entryName = entry->d_name;
        if (entryName.rfind("step-", 0) == 0)
          saved.push_back(entryName);
      }
      ::closedir(d);
    }
    std::sort(saved.begin(), saved.end()); // zero-padded: oldest first
    for (size_t i = 0; i + keep < saved.size(); ++i)
      if (saved[i] != name)
        removeTree(dir + "/" + saved[i]);
  }
  return final;
}

Status gpipe::runtime::loadCheckpoint(Engine &engine, const std::string &path,
                                      CheckpointInfo *info) {
  // A save directory: follow `latest`.
  std::string checkpoint = path;
  struct stat st;
  if (::stat((path + "/" + kState).c_str(), &st) != 0) {
    StatusOr<std::string> latest = readFile(
        path + "/" + kLatest, kMaxCheckpointLatestBytes, "a 'latest' file");
    // A `latest` that is there but unreadable (a FIFO, too large) says so.
    if (!latest.ok() && ::lstat((path + "/" + kLatest).c_str(), &st) == 0)
      return latest.status();
    if (!latest.ok())
      return Status(StatusCode::Io,
                    "'" + path + "' is neither a checkpoint (no " + kState +
                        ") nor a save directory (no " + kLatest + ")");
    std::string name = *latest;
    while (!name.empty() && (name.back() == '\n' || name.back() == ' '))
      name.pop_back();
    checkpoint = path + "/" + name;
  }

  StatusOr<std::string> stateText =
      readFile(checkpoint + "/" + kState, kMaxCheckpointStateBytes,
               "a checkpoint state");
  if (!stateText.ok())
    return stateText.status();
  Json state = Json::parse(*stateText, nullptr, /*allow_exceptions=*/false);
  if (!state.is_object() || state.value("format", "") != kFormat ||
      !state.contains("step") || !state["step"].is_number_integer() ||
      !state.contains("optimizer") || !state["optimizer"].is_string())
    return Status(StatusCode::InvalidArgument,
                  "'" + checkpoint + "/" + kState +
                      "' is not a gpipe checkpoint's state");
  // nlohmann reads 2^64 - 1 as an unsigned: compared as such, not as -1.
  const Json &stepValue = state["step"];
  const bool stepInRange =
      stepValue.is_number_unsigned()
          ? stepValue.get<uint64_t>() <= uint64_t(kMaxStepsDone)
          : checkStepsDone(stepValue.get<int64_t>()).empty();
  if (!stepInRange)
    return Status(StatusCode::InvalidArgument,
                  "'" + checkpoint + "/" + kState + "': step " +
                      stepValue.dump() + " is not a count of steps done " +
                      "(expected 0 to " + std::to_string(kMaxStepsDone) + ")");
  const int64_t step = stepValue.get<int64_t>();
  if (state.value("version", 0) != kVersion)
    return Status(StatusCode::InvalidArgument,
                  "'" + checkpoint + "': unsupported checkpoint version " +
                      state.value("version", Json(0)).dump() +
                      " (this runtime reads " + std::to_string(kVersion) + ")");
  const std::string optimizer = state["optimizer"].get<std::string>();
  if (optimizer != optimizerKindName(engine.optimizerKind()))
    return Status(StatusCode::InvalidArgument,
                  "'" + checkpoint + "' holds " + optimizer +
                      " state, the run uses " +
                      optimizerKindName(engine.optimizerKind()));
  // The update rule's hyper-parameters; a checkpoint saved before they were
  // recorded (or without one of them) leaves it unchecked.
  const Json saved = state.contains("optimizer_config") &&
                             state["optimizer_config"].is_object()
                         ? state["optimizer_config"]
                         : Json::object();
  for (const auto &[key, value] : updateRuleFields(engine.optimizerConfig())) {
    if (!saved.contains(key) || !saved[key].is_number())
      continue;
    const float had = float(saved[key].get<double>());
    if (had != value)
      return Status(StatusCode::InvalidArgument,
                    "'" + checkpoint + "' was saved with " + key + " " +
                        shortestText(had) + " (optimizer " + optimizer +
                        "), the run uses " + shortestText(value));
  }

  StatusOr<std::string> bytes =
      readFile(checkpoint + "/" + kTensors, kMaxCheckpointTensorsBytes,
               "a checkpoint's tensors file");
  if (!bytes.ok())
    return bytes.status();
  StatusOr<std::vector<NamedTensor>> tensors =
      decodeSafeTensors(*bytes, checkpoint + "/" + kTensors);
  if (!tensors.ok())
    return tensors.status();
  std::map<std::string, const NamedTensor *> byName;
  for (const NamedTensor &tensor : *tensors)
    byName[tensor.name] = &tensor;

  // Every check first, so that a refused checkpoint changes nothing.
  const Bundle &bundle = engine.bundle();
  const unsigned slots = optimizerSlots(engine.optimizerKind());
  struct Load {
    const NamedTensor *tensor;
    const std::string *param;
    unsigned slot; ///< 0: the parameter, k: optimizer state k - 1
  };
  std::vector<Load> loads;
  for (const ParamSpec &spec : bundle.params) {
    for (unsigned slot = 0; slot <= slots; ++slot) {
      std::string name =
          slot == 0 ? spec.name : slotTensorName(slot - 1, spec.name);
      auto it = byName.find(name);
      if (it == byName.end())
        return Status(StatusCode::NotFound, "'" + checkpoint +
                                                "' has no tensor '" + name +
                                                "', which the model needs");
      if (it->second->shape != spec.shape)
        return Status(StatusCode::InvalidArgument,
                      "checkpoint has " + name + " " +
                          shapeText(it->second->shape) + ", model expects " +
                          shapeText(spec.shape));
      // What set_parameter and set_optimizer_state refuse, a checkpoint
      // cannot bring in either.
      const std::vector<float> &data = it->second->data;
      if (std::string error = checkStateValues(
              engine.optimizerKind(), int(slot) - 1, data.data(), data.size());
          !error.empty())
        return Status(StatusCode::InvalidArgument,
                      "'" + checkpoint + "': tensor '" + name + "': " + error);
      loads.push_back({it->second, &spec.name, slot});
      byName.erase(it);
    }
  }
  if (!byName.empty())
    return Status(StatusCode::InvalidArgument,
                  "'" + checkpoint + "' has tensor '" + byName.begin()->first +
                      "', which is not a parameter of model '" + bundle.model +
                      "' or its optimizer state");

  for (const Load &load : loads) {
    Status status = load.slot == 0
                        ? engine.setParameter(*load.param, load.tensor->data)
                        : engine.setOptimizerState(*load.param, load.slot - 1,
                                                   load.tensor->data);
    if (!status.ok())
      return status;
  }
  engine.setStepsDone(step);
  if (info) {
    info->step = step;
    info->model = state.value("model", "");
    info->optimizer = optimizer;
    info->loopState = state.contains("loop") ? state["loop"].dump() : "{}";
  }
  return {};
}
