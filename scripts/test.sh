#!/usr/bin/env bash
# Builds everything and runs every test: the lit suite (dialect, passes,
# examples, tools) and the GoogleTest unit tests, all through ctest; then the
# runtime under ASan and UBSan with its fuzz targets and the C API's contract
# tests under TSan (scripts/sanitize.sh), and the compiler's fuzz target
# (scripts/fuzz-compiler.sh); GPIPE_SKIP_SANITIZE=1 skips both.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/build.sh"
build="${GPIPE_BUILD_DIR:-$root/build}"
(cd "$build" && ctest --output-on-failure -j2)
if [ "${GPIPE_SKIP_SANITIZE:-0}" != 1 ]; then
  "$root/scripts/sanitize.sh"
  "$root/scripts/fuzz-compiler.sh"
fi
