#!/usr/bin/env bash
# Configures (once) and builds gpipe in build/. Extra arguments are ninja targets.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"

build="${GPIPE_BUILD_DIR:-$root/build}"
# clang-22 (LLVM/MLIR 22's own compiler) with lld: the whole build in about
# three quarters of gcc's time, and the steps as fast (docs/Reliability.md,
# "CI's time"). CC/CXX given in the environment win, with the compiler's own
# linker unless GPIPE_LINKER names one (gcc finds no ld.lld-22).
if [ ! -f "$build/build.ninja" ]; then
  linker=lld
  [ -n "${CXX:-}" ] && linker=""
  CC="${CC:-clang-22}" CXX="${CXX:-clang++-22}" cmake -G Ninja -S "$root" -B "$build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DLLVM_USE_LINKER="${GPIPE_LINKER-$linker}" \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit
fi
ninja -C "$build" -j"${GPIPE_JOBS:-2}" "$@"
