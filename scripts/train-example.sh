#!/usr/bin/env bash
# The main job: compiles the MLP example into K=4 pipeline stages with M=8
# micro-batches and trains it on the real Fashion-MNIST with 4 CPU devices,
# reporting per epoch the training loss, test accuracy, samples/s, the
# measured bubble fraction and each device's peak memory.
#   scripts/train-example.sh [extra gpipe-run options, e.g. --epochs 3]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/build.sh" gpipe-run >/dev/null
build="${GPIPE_BUILD_DIR:-$root/build}"
exec "$build/bin/gpipe-run" "$root/python-free-examples/mlp/mlp.mlir" \
  --stages 4 --microbatches 8 --epochs 10 \
  --trace "$build/mlp.trace.json" "$@"
