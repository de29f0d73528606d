#!/usr/bin/env bash
# Builds everything and runs every test: the lit suite (dialect, passes,
# examples, tools) and the GoogleTest unit tests, all through ctest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/build.sh"
build="${GPIPE_BUILD_DIR:-$root/build}"
cd "$build"
ctest --output-on-failure -j2
