//===- PretrainedWeights.h - Values of pretrained parameters ----*- C++ -*-===//
//
// Private to runtime/src/device: where the executor finds the values of
// InitKind::Pretrained parameters, the bundle's weights file (safetensors),
// read and decoded at most once per executor, and only when a parameter that
// the process holds needs it. Only a regular file of at most
// kMaxWeightsFileBytes is read: a FIFO, a device or a directory in its place,
// or a larger file, fails the executor's creation before it is read.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_SRC_DEVICE_PRETRAINEDWEIGHTS_H
#define GPIPE_RUNTIME_SRC_DEVICE_PRETRAINEDWEIGHTS_H

#include "gpipe/runtime/bundle/Bundle.h"
#include "gpipe/runtime/bundle/SafeTensors.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gpipe::runtime::device::detail {

/// The largest weights file, 256 GiB, as kMaxCheckpointTensorsBytes
/// (Checkpoint.h): a checkpoint's tensors file is a weights file too.
constexpr uint64_t kMaxWeightsFileBytes = uint64_t(256) << 30;

class PretrainedWeights {
public:
  explicit PretrainedWeights(std::string path) : path(std::move(path)) {}

  /// Moves into `out` the values of the pretrained parameter `spec`: the
  /// file's tensor of the same name, bit for bit, which must have the
  /// parameter's shape. Reads the file on the first call. Returns "" or the
  /// error, which names the file and the parameter.
  std::string take(const ParamSpec &spec, std::vector<float> &out);
  /// Copies into `out` what take() gives `spec` and keeps it: the values of
  /// a tied parameter's root, for a copy held where the root is not.
  std::string copy(const ParamSpec &spec, std::vector<float> &out);

private:
  std::string load(const std::string &forParam);

  std::string path;
  bool loaded = false;
  std::map<std::string, NamedTensor> tensors;
};

} // namespace gpipe::runtime::device::detail

#endif // GPIPE_RUNTIME_SRC_DEVICE_PRETRAINEDWEIGHTS_H
