#!/usr/bin/env bash
# The main job: compiles the example models into K pipeline stages and M
# micro-batches and prints their partition and schedule reports.
#   scripts/compile-example.sh [MODEL.mlir] [K] [M]
# With no model, compiles the MLP (K=4, M=8) and the Transformer (K=4, M=8).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/build.sh" gpipe-opt >/dev/null
build="${GPIPE_BUILD_DIR:-$root/build}"
out="$build/compiled"
mkdir -p "$out"

compile() {
  local model="$1" stages="$2" microbatches="$3"
  local name
  name="$(basename "$model" .mlir)"
  echo "== $model: $stages stages, $microbatches micro-batches"
  "$build/bin/gpipe-opt" "$model" \
    --gpipe-compile="stages=$stages microbatches=$microbatches" \
    --gpipe-report="output=$out/$name.report.json format=json" \
    --gpipe-report \
    -o "$out/$name.compiled.mlir"
  echo "(compiled IR: $out/$name.compiled.mlir, JSON report: $out/$name.report.json)"
  echo
}

if [ $# -ge 1 ]; then
  compile "$1" "${2:-4}" "${3:-8}"
else
  compile "$root/python-free-examples/mlp/mlp.mlir" 4 8
  if [ -f "$root/python-free-examples/transformer/transformer.mlir" ]; then
    compile "$root/python-free-examples/transformer/transformer.mlir" 4 8
  fi
fi
