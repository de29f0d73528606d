//===- Checkpoint.h - Saving and resuming training --------------*- C++ -*-===//
//
// A checkpoint is a directory `<dir>/step-<N>` holding
//   - tensors.safetensors: every parameter under its name and every
//     optimizer state tensor as "optimizer.<slot>/<name>" (SafeTensors.h,
//     each with its CRC-32);
//   - state.json: the format, the step, the model, the optimizer, the
//     hyper-parameters of its update rule (weight decay, clipping norm,
//     momentum, betas, ...) and the training loop's own state (data cursor,
//     seeds, options) as JSON.
// Tensors are keyed by parameter names, not by device, so a run resumes on
// any number of pipeline devices. `<dir>/latest` names the newest.
//
// Saving is atomic: both files are written into a temporary directory and
// fsynced, the directory is renamed into place and its parent fsynced, then
// `latest` is replaced the same way. A process killed at any point leaves
// the previous checkpoint and `latest` loadable.
//
// Loading reads only regular files, each up to a limit (the constants
// below): a FIFO, a device or a directory in a file's place, or a file over
// its limit, is an Io error naming it, refused before it is read.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_CHECKPOINT_H
#define GPIPE_RUNTIME_CHECKPOINT_H

#include "gpipe/runtime/exec/Engine.h"
#include "gpipe/runtime/base/Status.h"

#include <cstdint>
#include <string>

namespace gpipe::runtime {

/// The largest `latest` loadCheckpoint reads: it names one step directory.
constexpr uint64_t kMaxCheckpointLatestBytes = 4096;
/// The largest state.json: a few fields and the training loop's small state.
constexpr uint64_t kMaxCheckpointStateBytes = uint64_t(64) << 20;
/// The largest tensors.safetensors, 256 GiB: the parameters and Adam's two
/// moments (12 bytes a parameter) of a model of some twenty billion
/// parameters, which the host holds whole as it loads them anyway.
constexpr uint64_t kMaxCheckpointTensorsBytes = uint64_t(256) << 30;

/// What state.json holds beside the tensors.
struct CheckpointInfo {
  int64_t step = 0;      ///< training steps done
  std::string model;     ///< the bundle's model name
  std::string optimizer; ///< optimizerKindName
  /// The training loop's state, a JSON object as text (e.g. the epoch, the
  /// data cursor, the shuffling seed); "{}" when it keeps none.
  std::string loopState = "{}";
};

/// Creates `dir` and its missing parents and checks that it can be written:
/// what a run checks before training, so that its first save cannot fail.
Status createSaveDirectory(const std::string &dir);

/// Saves `engine`'s parameters, optimizer state and steps done with
/// `loopState` as `<dir>/step-<N>` (creating `dir`), points `<dir>/latest`
/// at it and deletes all but the newest `keep` checkpoints (0: none).
/// Returns the checkpoint's path.
StatusOr<std::string> saveCheckpoint(Engine &engine, const std::string &dir,
                                     const std::string &loopState = "{}",
                                     unsigned keep = 0);

/// Loads a checkpoint into `engine` (any device kind): `path` is a checkpoint
/// directory or a save directory whose `latest` names one. Every parameter and
/// optimizer state tensor must be there with the model's shape; checksums are
/// verified; the optimizer and the hyper-parameters its update rule reads
/// (with the weight decay and the clipping norm) must be the run's,
/// InvalidArgument naming both values otherwise; one the checkpoint does not
/// record (saved before they were) is not checked. Then stepsDone is the
/// checkpoint's. Nothing is changed when an error is returned.
Status loadCheckpoint(Engine &engine, const std::string &path,
                      CheckpointInfo *info = nullptr);

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_CHECKPOINT_H
