#!/usr/bin/env bash
# Trains python-free-examples/resnet/resnet.mlir (ResNet-8, batch norm, width
# 16) on the real Fashion-MNIST with gpipe-run on CPU devices, then checks the
# final test accuracy against a floor. The figures of docs/ConvNets.md come
# from here (K = 4, M = 8 by default; --microbatches 1 for the comparison of
# batch-norm statistics over micro-batches with those over the whole batch).
#   scripts/train-resnet.sh [--stages K] [--microbatches M] [--epochs E]
#                           [--remat P] [--floor PERCENT] [--log FILE]
# Exit codes: 0 reached the floor, 1 did not, 2 usage, else gpipe-run's.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
stages=4 microbatches=8 epochs=10 remat=full floor=92 log=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --stages) stages="$2"; shift 2 ;;
    --microbatches) microbatches="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --remat) remat="$2"; shift 2 ;;
    --floor) floor="$2"; shift 2 ;;
    --log) log="$2"; shift 2 ;;
    *) echo "train-resnet.sh: unknown option '$1' (expected --stages, --microbatches, --epochs, --remat, --floor or --log)" >&2; exit 2 ;;
  esac
done
"$root/scripts/build.sh" gpipe-run >/dev/null
build="${GPIPE_BUILD_DIR:-$root/build}"
log="${log:-$(mktemp)}"
start=$(date +%s)
# SGD with momentum 0.9 and a cosine decay from 0.05: the usual recipe for
# batch-normalised ResNets.
"$build/bin/gpipe-run" "$root/python-free-examples/resnet/resnet.mlir" \
  --stages "$stages" --microbatches "$microbatches" --remat "$remat" \
  --epochs "$epochs" --optimizer momentum --lr 0.05 --lr-schedule cosine \
  2>&1 | tee "$log"
elapsed=$(( $(date +%s) - start ))
accuracy=$(sed -n 's/.*test accuracy \([0-9.]*\)%.*/\1/p' "$log" | tail -1)
echo "train-resnet.sh: K=$stages M=$microbatches remat=$remat, $epochs epochs in ${elapsed} s: test accuracy ${accuracy}% (floor ${floor}%)"
awk -v a="$accuracy" -v f="$floor" 'BEGIN { exit !(a >= f) }'
