#!/usr/bin/env bash
# The compiler under AddressSanitizer and UndefinedBehaviorSanitizer, fuzzed:
# builds tools/fuzz/FuzzCompile with clang-22 (the compiler of LLVM/MLIR 22)
# in build-fuzz-compiler/ -- only the libraries it needs; LLVM and MLIR
# themselves are Debian's, uninstrumented -- and runs it for
# GPIPE_FUZZ_SECONDS seconds (default 60) from the lit tests' models and the
# examples, printing how long it ran; alongside it (each one thread),
# FuzzOnnxImport, the ONNX importer's core, for GPIPE_FUZZ_ONNX_SECONDS
# (default 30) from the ONNX fixtures. A crash, or a bundle the compiler writes
# that the runtime refuses, fails the script and leaves the input in
# build-fuzz-compiler/fuzz/.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
build="${GPIPE_FUZZ_BUILD_DIR:-$root/build-fuzz-compiler}"
seconds="${GPIPE_FUZZ_SECONDS:-60}"
# -O1 with line tables: what the sanitizers' stack traces need, and about
# 15-20% less compile time than -O2 -g (the sanitizer builds are most of CI's).
optimize="-O1 -gline-tables-only -DNDEBUG"
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -fsanitize=fuzzer-no-link"
if [ ! -f "$build/build.ninja" ]; then
  CC=clang-22 CXX=clang++-22 cmake -G Ninja -S "$root" -B "$build" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="$optimize" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$optimize" \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    -DGPIPE_BUILD_CUDA=OFF -DGPIPE_BUILD_BENCHMARKS=OFF \
    -DGPIPE_BUILD_FUZZERS=ON \
    -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined"
fi
ninja -C "$build" -j"${GPIPE_JOBS:-2}" FuzzCompile FuzzOnnxImport

work="$build/fuzz"
rm -rf "$work" && mkdir -p "$work/corpus"
# Seeds: every model the lit tests and the examples hold, valid or not.
find "$root/test" "$root/python-free-examples" -name '*.mlir' -size -64k |
  while read -r f; do cp "$f" "$work/corpus/$(echo "$f" | md5sum | cut -c1-16).mlir"; done
# LLVM's allocators poison their free slab space when the code that inlines
# them is built with ASan, as ours is, and unpoison what they hand out; the
# uninstrumented LLVM/MLIR libraries hand out from the same slabs without
# unpoisoning. Manual poisoning is therefore off: ASan still checks every
# heap, stack and global access of our code.
export ASAN_OPTIONS="allow_user_poisoning=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
fuzz_compile() {
  local start runs
  start=$(date +%s)
  (cd "$work" && "$build/tools/fuzz/FuzzCompile" -max_total_time="$seconds" \
     -timeout=30 -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 corpus \
     > log.txt 2>&1) || {
    tail -60 "$work/log.txt"
    echo "fuzz-compiler: FuzzCompile crashed; the input is in $work" >&2
    return 1
  }
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/log.txt" | grep -o '[0-9]*$' || echo '?')
  echo "fuzz-compiler: FuzzCompile ran $(( $(date +%s) - start )) s, $runs inputs, no crash"
}

# The ONNX importer, from the fixtures and a few of ONNX's own test models.
onnx_seconds="${GPIPE_FUZZ_ONNX_SECONDS:-30}"
mkdir -p "$work/onnx"
cp "$root"/test/Import/Onnx/Inputs/*.onnx "$work/onnx/"
# The real models within the fuzzer's input length (their folding and
# general ops), the dynamo exports too: at opset 20, IR 10, libonnx's
# checker does not run and the importer's own checks stand alone.
for f in "$root"/test/Import/Onnx/Inputs/models/*.onnx; do
  [ "$(stat -c %s "$f")" -le 300000 ] && cp "$f" "$work/onnx/model-$(basename "$f")"
done
# PyTorch's attention modules: values whose batch a Transpose moved.
for d in "$root"/test/Import/Onnx/Inputs/attention-suite/node/*/; do
  [ "$(stat -c %s "$d/model.onnx")" -le 300000 ] &&
    cp "$d/model.onnx" "$work/onnx/attention-$(basename "$d").onnx"
done
for d in /usr/share/libonnx-testdata/data/pytorch-converted/test_Conv2d* \
         /usr/share/libonnx-testdata/data/node/test_gemm_* \
         /usr/share/libonnx-testdata/data/node/test_maxpool_2d_* \
         /usr/share/libonnx-testdata/data/node/test_reshape_* \
         /usr/share/libonnx-testdata/data/node/test_slice* \
         /usr/share/libonnx-testdata/data/node/test_unsqueeze* \
         /usr/share/libonnx-testdata/data/node/test_expand* \
         /usr/share/libonnx-testdata/data/node/test_where* \
         /usr/share/libonnx-testdata/data/node/test_range* \
         /usr/share/libonnx-testdata/data/node/test_gather_* \
         /usr/share/libonnx-testdata/data/node/test_reduce_mean_*; do
  [ -f "$d/model.onnx" ] && cp "$d/model.onnx" "$work/onnx/$(basename "$d").onnx"
done
fuzz_onnx_import() {
  local start runs
  start=$(date +%s)
  (cd "$work" && "$build/tools/fuzz/FuzzOnnxImport" -max_total_time="$onnx_seconds" \
     -timeout=30 -rss_limit_mb=4096 -max_len=300000 -print_final_stats=1 onnx \
     > onnx-log.txt 2>&1) || {
    tail -60 "$work/onnx-log.txt"
    echo "fuzz-compiler: FuzzOnnxImport crashed; the input is in $work" >&2
    return 1
  }
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/onnx-log.txt" | grep -o '[0-9]*$' || echo '?')
  echo "fuzz-compiler: FuzzOnnxImport ran $(( $(date +%s) - start )) s, $runs inputs, no crash"
}

# The two at once (each is one thread and runs its full time).
fuzz_compile & compile_pid=$!
fuzz_onnx_import & onnx_pid=$!
crashed=0
wait "$compile_pid" || crashed=1
wait "$onnx_pid" || crashed=1
exit "$crashed"
