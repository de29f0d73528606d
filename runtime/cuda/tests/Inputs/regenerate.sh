#!/bin/sh
# Regenerates the bundles CudaGeneratedKernelsTest runs, each a model on 2
# stages and 2 micro-batches compiled with --gpipe-codegen=native
# --gpipe-ptx:
#  - broadcast-ptx.json: test/Target/bundle-broadcast.mlir's model (a
#    broadcast add, RMSNorm's mean over the features, a max over the
#    positions, a sum, and their gradients: 15 generated kernels);
#  - slices-ptx.json: gpipe-differentiate-slice-concat.mlir's (slices with
#    offsets and steps, a concat, their gradients: windows read and written);
#  - rows-ptx.json: test/Target/bundle-row-kernels.mlir's (row kernels: a
#    softmax's and an RMSNorm's gradients led by their row sums);
#  - gather-ptx.json: gpipe-differentiate-gather.mlir's (gathers with
#    constant and per-example indices, a table's rows, their gradients).
# Only the baseline x86-64 CPU variant is
# kept (the CPU backend's reference runs on any x86-64), then the bundle is
# sealed again. Needs a build with the compiler: BIN=<build>/bin.
set -eu
BIN=${BIN:-build/bin}
HERE=$(dirname "$0")
ROOT=$HERE/../../../..
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
seal() { # $1: the model, $2: the bundle written
"$BIN/gpipe-opt" "$1" \
  -gpipe-compile="num-stages=2 num-microbatches=2" -o "$TMP/model.mlir"
"$BIN/gpipe-translate" --gpipe-to-bundle --gpipe-codegen=native --gpipe-ptx \
  "$TMP/model.mlir" -o "$TMP/full.json"
python3 - "$TMP/full.json" "$2" <<'PY'
import json, sys, zlib
bundle = json.load(open(sys.argv[1]))
bundle["code"]["cpu"] = [v for v in bundle["code"]["cpu"] if v["isa"] == "x86-64"]
del bundle["checksum"]
text = json.dumps(bundle, indent=2)
sealed = text[: text.rindex("}")].rstrip() + ",\n  "
sealed += '"checksum": "crc32:%08x"\n}\n' % (zlib.crc32(sealed.encode()) & 0xFFFFFFFF)
open(sys.argv[2], "w").write(sealed)
PY
}
seal "$ROOT/test/Target/bundle-broadcast.mlir" "$HERE/broadcast-ptx.json"
seal "$ROOT/test/Dialect/GPipe/Transforms/gpipe-differentiate-slice-concat.mlir" \
  "$HERE/slices-ptx.json"
seal "$ROOT/test/Target/bundle-row-kernels.mlir" "$HERE/rows-ptx.json"
seal "$ROOT/test/Dialect/GPipe/Transforms/gpipe-differentiate-gather.mlir" \
  "$HERE/gather-ptx.json"
