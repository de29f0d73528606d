#!/usr/bin/env bash
# The runtime under AddressSanitizer and UndefinedBehaviorSanitizer, in the
# sanitizer build scripts/fuzz-compiler.sh shares (build-sanitize/,
# scripts/configure-sanitizers.sh): builds what runtime/ holds and runs its
# tests (any report fails them: UBSan does not recover, ASan and
# LeakSanitizer exit non-zero), then each libFuzzer target (runtime/fuzz) for
# GPIPE_FUZZ_SECONDS seconds (default 60) from its seed corpus, two at a time,
# printing how long each ran. A crash fails the script and leaves the input in
# build-sanitize/fuzz-<target>/. Then the C API's contract tests (the
# conformance table and the concurrent readers) under ThreadSanitizer, built
# alone in build-tsan/.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
build="${GPIPE_SANITIZE_BUILD_DIR:-$root/build-sanitize}"
seconds="${GPIPE_FUZZ_SECONDS:-60}"
"$root/scripts/configure-sanitizers.sh" "$build"
ninja -C "$build" -j"${GPIPE_JOBS:-2}" runtime/all
# A device allocation that cannot be met must come back as an error (a
# test asks for 2^61 bytes), as it does without ASan.
export ASAN_OPTIONS="allocator_may_return_null=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
(cd "$build/runtime" && ctest --output-on-failure -j2)

# One target for $seconds seconds; 1 if it crashed.
fuzz_target() {
  local target=$1 seeds
  case $target in
    FuzzBundle) seeds=bundle ;;
    FuzzIdx) seeds=idx ;;
    FuzzCorpus) seeds=corpus ;;
    FuzzRunReport) seeds=report ;;
    FuzzCApi) seeds=capi ;;
  esac
  local work="$build/fuzz-$target"
  rm -rf "$work" && mkdir -p "$work/corpus"
  cp "$root/runtime/fuzz/corpus/$seeds"/* "$work/corpus/"
  local start
  start=$(date +%s)
  (cd "$work" && "$build/runtime/fuzz/$target" -max_total_time="$seconds" \
     -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 corpus \
     > log.txt 2>&1) || {
    tail -40 "$work/log.txt"
    echo "sanitize: $target crashed; the input is in $work" >&2
    return 1
  }
  local runs
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/log.txt" | grep -o '[0-9]*$' || echo '?')
  echo "sanitize: $target ran $(( $(date +%s) - start )) s, $runs inputs, no crash"
}

# Two targets at a time (each is one thread and runs its full time): the
# five take three rounds of $seconds seconds rather than five.
crashed=0
for pair in "FuzzBundle FuzzIdx" "FuzzCorpus FuzzRunReport" "FuzzCApi"; do
  pids=()
  for target in $pair; do
    fuzz_target "$target" &
    pids+=("$!")
  done
  for pid in "${pids[@]}"; do
    wait "$pid" || crashed=1
  done
done
if [ "$crashed" != 0 ]; then
  exit 1
fi

# ThreadSanitizer: the runtime and the C API's contract tests only (the rest
# runs under ASan above). OpenBLAS is not instrumented: one thread, so that
# it starts no pool of its own. At -O0, which instruments every access the
# source makes: the build takes 141 s rather than 175 s at -O1, the tests 5 s
# rather than 3.
tsan="${GPIPE_TSAN_BUILD_DIR:-$root/build-tsan}"
optimize="-O0 -gline-tables-only -DNDEBUG"
if [ ! -f "$tsan/build.ninja" ]; then
  CC=clang-22 CXX=clang++-22 cmake -G Ninja -S "$root" -B "$tsan" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="$optimize" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$optimize" \
    -DGPIPE_BUILD_COMPILER=OFF -DGPIPE_BUILD_CUDA=OFF -DGPIPE_BUILD_MPI=OFF \
    -DGPIPE_BUILD_BENCHMARKS=OFF \
    -DCMAKE_C_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
    -DCMAKE_CXX_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread -fuse-ld=lld" \
    -DCMAKE_SHARED_LINKER_FLAGS="-fuse-ld=lld"
fi
ninja -C "$tsan" -j"${GPIPE_JOBS:-2}" GPipeCApiContractTests
start=$(date +%s)
OPENBLAS_NUM_THREADS=1 TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
  "$tsan/runtime/tests/GPipeCApiContractTests"
echo "sanitize: the C API's contract tests ran clean under TSan in $(( $(date +%s) - start )) s"
