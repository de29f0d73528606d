#!/usr/bin/env bash
# Regenerates docs/generated/ (dialect, op and pass reference) from the TableGen sources.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/build.sh" mlir-doc
cp "${GPIPE_BUILD_DIR:-$root/build}"/docs/gpipe/*.md "$root/docs/generated/"
