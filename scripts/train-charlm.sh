#!/usr/bin/env bash
# The language-model job: compiles the character-level Transformer
# (python-free-examples/charlm/charlm.mlir) into K=4 pipeline stages with M=4
# micro-batches and trains it with 4 CPU devices on the Debian fortunes
# corpus (/usr/share/games/fortunes), printing every 100 steps the training
# loss and the validation loss in nats and bits per character next to the
# corpus's unigram entropy (docs/LanguageModel.md).
#   scripts/train-charlm.sh [extra gpipe-run options, e.g. --max-steps 400]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/build.sh" gpipe-run >/dev/null
build="${GPIPE_BUILD_DIR:-$root/build}"
exec "$build/bin/gpipe-run" "$root/python-free-examples/charlm/charlm.mlir" \
  --stages 4 --microbatches 4 --max-steps 1500 --eval-every 100 \
  --eval-batches 8 --optimizer adam --lr 0.002 --seed 1 \
  --corpus /usr/share/games/fortunes \
  --trace "$build/charlm.trace.json" "$@"
