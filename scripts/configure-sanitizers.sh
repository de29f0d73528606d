#!/usr/bin/env bash
# Configures (once) the one AddressSanitizer + UndefinedBehaviorSanitizer
# build that scripts/sanitize.sh (the runtime's tests and fuzzers) and
# scripts/fuzz-compiler.sh (the compiler's fuzzers) share, so that the runtime
# is compiled under ASan once: clang-22 (the compiler of LLVM/MLIR 22; LLVM and
# MLIR themselves are Debian's, uninstrumented) in $1.
#
# Everything, the tests' own sources included, is at -O1 with line tables:
# what the sanitizers' stack traces need, at 15-20% less compile time than
# -O2 -g. (The tests at -O0 compile in half the time, but the linker keeps
# their unoptimized copies of the templates they share with the libraries --
# libstdc++'s, nlohmann-json's -- and the bundle reader's tests ran 8x
# slower.) The tests' own sources keep ASan but go without UBSan and without
# the fuzzers' coverage counters: the code they test has both, and a test TU
# compiles in 45% less time. Each test binary runs as four processes
# (GPIPE_TEST_SHARDS), not one per test: an ASan process costs 0.12 s to start
# and end. The C sources (the C API's C client, the stand-in generated
# kernels' shared objects) are not instrumented: LLVM's options link shared
# objects with -z defs, which the sanitizers' runtime symbols would fail.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$1"
[ -f "$build/build.ninja" ] && exit 0
optimize="-O1 -gline-tables-only -DNDEBUG"
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -fsanitize=fuzzer-no-link"
CC=clang-22 CXX=clang++-22 cmake -G Ninja -S "$root" -B "$build" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="$optimize" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$optimize" \
  -DGPIPE_TEST_COMPILE_OPTIONS="-fno-sanitize=undefined;-fno-sanitize=fuzzer-no-link" \
  -DGPIPE_TEST_SHARDS=4 \
  -DLLVM_USE_LINKER=lld \
  -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
  -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
  -DGPIPE_BUILD_CUDA=OFF -DGPIPE_BUILD_BENCHMARKS=OFF \
  -DGPIPE_BUILD_FUZZERS=ON \
  -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined"
