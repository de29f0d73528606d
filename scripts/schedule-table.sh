#!/usr/bin/env bash
# Measures every schedule side by side on the CPU backend: for each
# (K, schedule, remat) it trains the MLP example for a few steps with
# gpipe-run and prints one markdown row: the ideal bubble ((K-1)/(M+K-1),
# (K-1)/(3M+K-1) for zb-h1 when F, B and W cost alike, (K-1)/(VM+K-1) for
# interleaved with V = 2 stages per device), the
# bubble gpipe-run measured, and each device's measured peak memory against
# the compiler's plan. The table of docs/Schedules.md comes from here.
#   scripts/schedule-table.sh [--batch-size B] [--microbatches M] [--steps N]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
batch=512 microbatches=8 steps=10
while [[ $# -gt 0 ]]; do
  case "$1" in
    --batch-size) batch="$2"; shift 2 ;;
    --microbatches) microbatches="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    *) echo "schedule-table.sh: unknown option '$1' (expected --batch-size, --microbatches or --steps)" >&2; exit 1 ;;
  esac
done
"$root/scripts/build.sh" gpipe-run >/dev/null
build="${GPIPE_BUILD_DIR:-$root/build}"
echo "| K | schedule | remat | ideal bubble | measured bubble | measured peak per device (MiB) | planned (MiB) |"
echo "|---|---|---|---|---|---|---|"
for k in 2 4; do
  for schedule in gpipe 1f1b zb-h1 interleaved; do
    virtual=1
    [[ $schedule == interleaved ]] && virtual=2
    for remat in none full; do
      out=$("$build/bin/gpipe-run" "$root/python-free-examples/mlp/mlp.mlir" \
        --stages "$k" --microbatches "$microbatches" --batch-size "$batch" \
        --remat "$remat" --schedule "$schedule" --virtual-stages "$virtual" \
        --epochs 1 --max-steps "$steps" 2>&1)
      ideal=$(sed -n 's/.*ideal bubble ([^=]*) = \([0-9.]*\).*/\1/p' <<<"$out")
      bubble=$(sed -n 's/.*, bubble \([0-9.]*\), peak memory.*/\1/p' <<<"$out")
      line=$(grep 'against the plan' <<<"$out")
      measured=$(sed 's/.*arena \[//; s/\]: .*//; s/ MiB (planned [0-9.]* MiB)//g' <<<"$line")
      planned=$(grep -o 'planned [0-9.]*' <<<"$line" | cut -d' ' -f2 | paste -sd, | sed 's/,/, /g')
      label=$schedule
      if [[ $virtual -gt 1 ]]; then label="$schedule V=$virtual"; fi
      echo "| $k | $label | $remat | $ideal | $bubble | $measured | $planned |"
    done
  done
done
