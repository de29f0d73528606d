#!/usr/bin/env bash
# The compiler under AddressSanitizer and UndefinedBehaviorSanitizer, fuzzed:
# builds tools/fuzz/FuzzCompile in the sanitizer build scripts/sanitize.sh
# shares (build-sanitize/, scripts/configure-sanitizers.sh; only the libraries
# it needs) and runs it for GPIPE_FUZZ_SECONDS seconds (default 60) from the
# lit tests' models and the examples, printing how long it ran; alongside it
# (each one thread), FuzzOnnxImport, the ONNX importer's core, for
# GPIPE_FUZZ_ONNX_SECONDS (default 30) from the ONNX fixtures. A crash, or a
# bundle the compiler writes that the runtime refuses, fails the script and
# leaves the input in build-sanitize/fuzz/.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
build="${GPIPE_SANITIZE_BUILD_DIR:-$root/build-sanitize}"
seconds="${GPIPE_FUZZ_SECONDS:-60}"
"$root/scripts/configure-sanitizers.sh" "$build"
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
