#!/usr/bin/env bash
# Trains the MLP example with gpipe-run --report, opens the HTML page in
# headless Chromium (Debian's chromium-headless-shell, which scripts/setup.sh
# installs), takes a screenshot and checks that it shows every chart
# (scripts/check-screenshot.py).
#
#   scripts/report-screenshot.sh                 # docs/images/report.png: K=4, M=8, one epoch
#   scripts/report-screenshot.sh --quick OUT.png # a 20-step run (the ctest report-in-browser)
#
# Exit status 77 (ctest's skip) when no headless Chromium is installed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${GPIPE_BUILD_DIR:-$root/build}"
quick=0
if [ "${1:-}" = --quick ]; then quick=1; shift; fi
out="${1:-$root/docs/images/report.png}"
width=1000 height=2000

browser=""
for candidate in chromium-headless-shell chromium; do
  if command -v "$candidate" > /dev/null; then browser="$candidate"; break; fi
done
if [ -z "$browser" ]; then
  echo "report-screenshot: no headless Chromium here: apt-get install chromium-headless-shell (scripts/setup.sh does)" >&2
  exit 77
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if [ "$quick" = 1 ]; then
  run=(--stages 2 --microbatches 4 --epochs 1 --max-steps 20)
else
  run=(--stages 4 --microbatches 8 --epochs 1)
fi
"$build/bin/gpipe-run" "$root/python-free-examples/mlp/mlp.mlir" "${run[@]}" \
  ${GPIPE_FASHION_MNIST_DIR:+--data "$GPIPE_FASHION_MNIST_DIR"} \
  --report "$work/report.html" > "$work/run.log"
# As root (CI, containers) Chromium runs only without its sandbox; the page
# has no script and fetches nothing.
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
  --window-size="$width,$height" --screenshot="$work/report.png" \
  "file://$work/report.html" > "$work/browser.log" 2>&1 || {
  cat "$work/browser.log" >&2
  exit 1
}
python3 "$root/scripts/check-screenshot.py" "$work/report.png" "$width" "$height"
mkdir -p "$(dirname "$out")"
cp "$work/report.png" "$out"
echo "report-screenshot: $out"
