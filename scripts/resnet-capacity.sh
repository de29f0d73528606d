#!/usr/bin/env bash
# The GPipe paper's Table 1 question for ResNets on one device: the deepest
# ResNet-(6n+2) (resnet_model, width 16, batch 128, Fashion-MNIST images)
# whose compiled pipeline fits a per-device memory cap, with and without
# rematerialisation (K = 1, M micro-batches, GPipe's schedule), decided by the
# compiler's memory planner (gpipe-opt --gpipe-compile with memory-cap: a
# model that does not fit is a compile error). Then each deepest model trains
# one step with gpipe-run on a 256-image slice of Fashion-MNIST, and the
# device memory it measured is printed beside the plan.
#   scripts/resnet-capacity.sh [--cap SIZE] [--microbatches M] [--most N]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cap=256MiB microbatches=8 most=64
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cap) cap="$2"; shift 2 ;;
    --microbatches) microbatches="$2"; shift 2 ;;
    --most) most="$2"; shift 2 ;;
    *) echo "resnet-capacity.sh: unknown option '$1' (expected --cap, --microbatches or --most)" >&2; exit 2 ;;
  esac
done
"$root/scripts/build.sh" gpipe-opt gpipe-run resnet_model >/dev/null
build="${GPIPE_BUILD_DIR:-$root/build}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# A 256-image slice of each Fashion-MNIST file: a step and an evaluation
# that take seconds, whatever the depth.
data=/usr/share/datasets/fashion-mnist
mkdir -p "$work/data"
slice() ( # file, header bytes, bytes per item
  set +o pipefail # head closes zcat's pipe early
  out="$work/data/${1%.gz}"
  zcat "$data/$1" | head -c "$2" >"$out.header"
  perl -e 'my $h = do { local $/; <STDIN> }; substr($h, 4, 4) = pack("N", 256); print $h' \
    <"$out.header" >"$out"
  zcat "$data/$1" | tail -c +"$(( $2 + 1 ))" | head -c "$(( 256 * $3 ))" >>"$out"
  rm "$out.header"
)
for set in train t10k; do
  slice "$set-images-idx3-ubyte.gz" 16 784
  slice "$set-labels-idx1-ubyte.gz" 8 1
done

fits() { # blocks, remat
  "$build/bin/resnet_model" --blocks "$1" -o "$work/r.mlir"
  "$build/bin/gpipe-opt" "$work/r.mlir" -o /dev/null \
    --gpipe-compile="stages=1 microbatches=$microbatches remat=$2 memory-cap=$cap" 2>/dev/null
}

echo "| remat | deepest fitting | planned peak | measured (resident + arena) | next depth needs |"
echo "|---|---|---|---|---|"
for remat in none full; do
  # Exponential, then binary search for the largest n that fits.
  low=0 high=1
  while [[ $high -le $most ]] && fits "$high" "$remat"; do low=$high; high=$(( high * 2 )); done
  [[ $high -gt $most ]] && high=$(( most + 1 ))
  while [[ $(( high - low )) -gt 1 ]]; do
    mid=$(( (low + high) / 2 ))
    if fits "$mid" "$remat"; then low=$mid; else high=$mid; fi
  done
  if [[ $low -eq 0 ]]; then
    echo "| $remat | none (ResNet-8 does not fit $cap) | | | |"
    continue
  fi
  next=""
  if [[ $high -le $most ]]; then
    "$build/bin/resnet_model" --blocks "$high" -o "$work/r.mlir"
    next=$("$build/bin/gpipe-opt" "$work/r.mlir" -o /dev/null \
      --gpipe-compile="stages=1 microbatches=$microbatches remat=$remat memory-cap=$cap" 2>&1 |
      sed -n 's/.*the best split needs \([0-9.]* [KMG]iB\).*/\1/p' | head -1 || true)
    next="ResNet-$(( 6 * high + 2 )): $next"
  fi
  "$build/bin/resnet_model" --blocks "$low" -o "$work/r.mlir"
  out=$("$build/bin/gpipe-run" "$work/r.mlir" --data "$work/data" --stages 1 \
    --microbatches "$microbatches" --remat "$remat" --memory-cap "$cap" \
    --epochs 1 --max-steps 1 2>&1)
  line=$(grep 'against the plan' <<<"$out")
  measured=$(sed 's/.*arena \[\([0-9.]* MiB\) (planned \([0-9.]* MiB\))\].*/\1/' <<<"$line")
  planned=$(sed 's/.*arena \[\([0-9.]* MiB\) (planned \([0-9.]* MiB\))\].*/\2/' <<<"$line")
  echo "| $remat | ResNet-$(( 6 * low + 2 )) (n = $low) | $planned | $measured | $next |"
done
echo
echo "cap $cap per device, K = 1, M = $microbatches, batch 128, width 16, GPipe schedule"
