#!/bin/sh
# Times import plus compile of each real-model fixture (test/Import/Onnx/Inputs/models), as a
# user runs them: gpipe-translate --import-onnx, gpipe-opt --gpipe-compile at K = 4, and
# gpipe-translate --gpipe-to-bundle (which generates the kernels). Each round is a fresh
# process, so nothing is cached between rounds; prints each step's median over the rounds.
#
#   scripts/onnx/time-fixtures.sh [ROUNDS] [FIXTURE...]   (BIN=build/bin, default 3 rounds)
set -eu
BIN=${BIN:-build/bin}
ROUNDS=${1:-3}
[ $# -gt 0 ] && shift
MODELS=test/Import/Onnx/Inputs/models
[ $# -gt 0 ] || set -- $(cd "$MODELS" && ls *.onnx | sed 's/\.onnx$//')
for tool in gpipe-translate gpipe-opt; do
  [ -x "$BIN/$tool" ] || { echo "time-fixtures.sh: $BIN/$tool is not built" >&2; exit 1; }
done
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

now() { date +%s.%N; }
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

printf '%-28s %8s %8s %8s %8s\n' fixture import compile bundle total
for fixture in "$@"; do
  : > "$WORK/times"
  for round in $(seq "$ROUNDS"); do
    t0=$(now)
    "$BIN/gpipe-translate" --import-onnx "$MODELS/$fixture.onnx" -o "$WORK/m.mlir" \
      --loss softmax-cross-entropy
    t1=$(now)
    batch=$(sed -n 's/.*gpipe\.model @[^ ]* batch \([0-9]*\).*/\1/p' "$WORK/m.mlir" | head -n 1)
    m=$([ "${batch:-1}" -ge 2 ] && echo 2 || echo 1)
    "$BIN/gpipe-opt" "$WORK/m.mlir" --gpipe-compile="stages=4 microbatches=$m" \
      -o "$WORK/c.mlir"
    t2=$(now)
    "$BIN/gpipe-translate" --gpipe-to-bundle "$WORK/c.mlir" -o "$WORK/b.json"
    t3=$(now)
    echo "$t0 $t1 $t2 $t3" >> "$WORK/times"
  done
  col() { awk "{printf \"%.3f\\n\", $1}" "$WORK/times" | median; }
  printf '%-28s %8s %8s %8s %8s\n' "$fixture" "$(col '$2-$1')" "$(col '$3-$2')" \
    "$(col '$4-$3')" "$(col '$4-$1')"
done
