#!/usr/bin/env bash
# The first thing to run on a machine with an NVIDIA GPU. It needs CUDA (nvcc),
# CMake and ninja, not LLVM/MLIR and no network:
#   1. builds the runtime with its CUDA backend (-DGPIPE_BUILD_COMPILER=OFF);
#   2. runs `ctest -L gpu` (the GPU tests) and the runtime's other tests;
#   3. trains the MLP on Fashion-MNIST with --device cuda (10 epochs, K=4
#      pipeline devices on the GPU) and the character LM for its standard
#      steps, from bundles compiled on the CPU machine;
#   4. runs the GPU benchmarks (gpipe-cuda-bench) and the same model in
#      PyTorch eager (scripts/gpu/torch_transformer_bench.py);
#   5. writes one report: $GPIPE_GPU_REPORT, else $OUT/gpu-report.md under the
#      device tool, else build-gpu/gpu-report.md.
#
# What the GPU machine lacks travels in .gpu-deps/ (scripts/gpu-deps.sh, run
# on the CPU machine first): Debian's development packages, unpacked here
# under /tmp (never over /), the data sets, and the bundles. With the device
# tool: carry [".gpu-deps"] and run `scripts/gpu-check.sh`.
#
# GPIPE_GPU_STEPS picks steps (default all): a comma list of build (only the
# GPU targets unless `rest` is picked too), gpu-tests, rest (the runtime's
# other tests), train, bench, profile (Nsight Compute), torch. A lease is short: a first look can be
# GPIPE_GPU_STEPS=build,gpu-tests,bench GPIPE_BENCH_REPETITIONS=1.
#
# Exit status: 0 when every step passed, else 1 (the report says which).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build="${GPIPE_GPU_BUILD_DIR:-$root/build-gpu}"
deps="$root/.gpu-deps"
prefix=/tmp/gpipe-gpu-deps
report="${GPIPE_GPU_REPORT:-${OUT:+$OUT/gpu-report.md}}"
report="${report:-$build/gpu-report.md}"
jobs="${GPIPE_JOBS:-$(nproc)}"
mkdir -p "$build" "$(dirname "$report")"
logs="$(dirname "$report")"
failed=()
steps="${GPIPE_GPU_STEPS:-build,gpu-tests,rest,train,bench,profile,torch}"
wants() { [[ ",$steps," == *",$1,"* ]]; }

say() { echo "$*" | tee -a "$report"; }
# step NAME LOG COMMAND...: runs it, keeps its output in LOG, records failure.
step() {
  local name="$1" log="$2"
  shift 2
  echo "== $name" >&2
  local start=$SECONDS
  if "$@" >"$log" 2>&1; then
    say "- $name: passed ($((SECONDS - start)) s; log $(basename "$log"))"
  else
    say "- $name: FAILED with status $? ($((SECONDS - start)) s; log $(basename "$log"))"
    failed+=("$name")
    tail -20 "$log" | sed 's/^/      /' | tee -a "$report"
  fi
}

: >"$report"
say "# gpipe GPU check, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
say ""
say '```'
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee -a "$report"
else
  say "nvidia-smi: not found (no NVIDIA driver here)"
fi
nvcc="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
if [ -x "$nvcc" ]; then "$nvcc" --version | tail -2 | tee -a "$report"; else say "nvcc: not found"; fi
say '```'
say ""

# --- 0. what the machine lacks -------------------------------------------------
cmake_args=()
if [ -d "$deps" ]; then
  rm -rf "$prefix" && mkdir -p "$prefix"
  for f in "$deps"/*.deb; do dpkg -x "$f" "$prefix"; done
  arch_lib="$prefix/usr/lib/x86_64-linux-gnu"
  cmake_args+=(
    "-DCMAKE_PREFIX_PATH=$prefix/usr"
    "-DOPENBLAS_LIBRARY=$arch_lib/openblas-pthread/libopenblas.so"
    "-DOPENBLAS_INCLUDE_DIR=$prefix/usr/include/x86_64-linux-gnu/openblas-pthread"
  )
  if [ ! -e /usr/include/zlib.h ]; then
    cmake_args+=("-DZLIB_INCLUDE_DIR=$prefix/usr/include" "-DZLIB_LIBRARY=$arch_lib/libz.so")
  fi
  export LD_LIBRARY_PATH="$arch_lib/openblas-pthread:$arch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  data="$prefix/usr/share/datasets/fashion-mnist"
  corpus="$prefix/usr/share/games/fortunes"
  bundles="$deps/bundles"
else
  data=/usr/share/datasets/fashion-mnist
  corpus=/usr/share/games/fortunes
  bundles="$build/bundles"
fi

# --- 1. build ------------------------------------------------------------------
step "configure (runtime only, CUDA backend)" "$logs/configure.log" \
  cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DGPIPE_BUILD_COMPILER=OFF -DGPIPE_BUILD_CUDA=ON "${cmake_args[@]}" \
  "-DGPIPE_FASHION_MNIST_DIR=$data" "-DGPIPE_FORTUNES_DIR=$corpus"
targets=()
if ! wants rest; then
  targets=(GPipeCudaGpuTests GPipeCudaExecutorTests GPipeCudaGeneratedKernelsTests
           gpipe-cuda-bench gpipe-train-bundle)
  # The NCCL test is registered wherever NCCL and MPI are found.
  if grep -q "GPipeNcclTests:" "$build/build.ninja" 2>/dev/null; then targets+=(GPipeNcclTests); fi
fi
step "build ${targets[*]:-(everything)}" "$logs/build.log" \
  ninja -C "$build" -j"$jobs" "${targets[@]}"
if ! grep -q "GPipeCuda" "$build/build.ninja" 2>/dev/null; then
  say "- the CUDA backend was not configured (no nvcc found?): see configure.log"
  failed+=("CUDA backend")
fi

# --- 2. tests ------------------------------------------------------------------
gpu=yes
if wants gpu-tests; then
  step "ctest -L gpu" "$logs/ctest-gpu.log" \
    ctest --test-dir "$build" -L gpu -j4 --timeout 300 --output-on-failure
  grep -E "tests passed|tests failed" "$logs/ctest-gpu.log" | sed 's/^/      /' | tee -a "$report"
  skipped="$(grep -c '(Skipped)' "$logs/ctest-gpu.log" || true)"
  if [ "$skipped" -gt 0 ]; then
    say "      $skipped GPU tests SKIPPED: no GPU is visible (see ctest-gpu.log for why)"
    gpu=no
    failed+=("no GPU")
  fi
elif ! nvidia-smi -L >/dev/null 2>&1; then
  gpu=no
fi
if wants rest; then
  step "ctest (the runtime's other tests)" "$logs/ctest-rest.log" \
    ctest --test-dir "$build" -LE gpu -j"$jobs" --output-on-failure
  grep -E "tests passed|tests failed" "$logs/ctest-rest.log" | sed 's/^/      /' | tee -a "$report"
fi

# --- 3. training ---------------------------------------------------------------
trainer="$build/bin/gpipe-train-bundle"
if ! wants train; then
  : # not asked for
elif [ "$gpu" = no ]; then
  say "- training and benchmarks: not run, no GPU"
elif [ -f "$bundles/mlp.bundle.json" ]; then
  step "MLP on Fashion-MNIST, --device cuda, K=4 M=8, 10 epochs (want >= 88%)" \
    "$logs/train-mlp.log" "$trainer" "$bundles/mlp.bundle.json" \
    --images "$data" --device cuda --epochs 10
  grep -E "^epoch|final" "$logs/train-mlp.log" | sed 's/^/      /' | tee -a "$report"
  acc="$(sed -n 's/^final test accuracy: \([0-9.]*\)%/\1/p' "$logs/train-mlp.log")"
  if [ -n "$acc" ] && awk "BEGIN { exit !($acc < 88) }"; then
    say "      below 88%"
    failed+=("MLP accuracy")
  fi
  step "the same run again (bitwise-identical losses wanted)" \
    "$logs/train-mlp-again.log" "$trainer" "$bundles/mlp.bundle.json" \
    --images "$data" --device cuda --epochs 10
  if [ -z "$acc" ]; then
    : # the first run failed; nothing to compare
  elif diff <(grep -E "^epoch|final" "$logs/train-mlp.log" | sed 's/, [0-9]* samples.s//') \
          <(grep -E "^epoch|final" "$logs/train-mlp-again.log" | sed 's/, [0-9]* samples.s//') >/dev/null; then
    say "      the two runs print the same losses and accuracies"
  else
    say "      the two runs DIFFER"
    failed+=("repeatability")
  fi
else
  say "- MLP training: skipped, no $bundles/mlp.bundle.json (run scripts/gpu-deps.sh on the CPU machine)"
  failed+=("MLP bundle")
fi
if wants train && [ "$gpu" = yes ] && [ -f "$bundles/charlm.bundle.json" ]; then
  step "character LM on the fortunes corpus, --device cuda, K=4 M=4, 1500 steps" \
    "$logs/train-charlm.log" "$trainer" "$bundles/charlm.bundle.json" \
    --text "$corpus" --device cuda --steps 1500 --eval-every 500 \
    --optimizer adam --lr 0.002
  grep -E "^step|final" "$logs/train-charlm.log" | sed 's/^/      /' | tee -a "$report"
fi

# --- 4. benchmarks -------------------------------------------------------------
if wants bench && [ "$gpu" = yes ] && [ -x "$build/bin/gpipe-cuda-bench" ]; then
  step "GPU benchmarks (gpipe-cuda-bench)" "$logs/bench.log" \
    "$build/bin/gpipe-cuda-bench" --benchmark_repetitions="${GPIPE_BENCH_REPETITIONS:-3}" \
    --benchmark_min_time="${GPIPE_BENCH_MIN_TIME:-2}" \
    --benchmark_report_aggregates_only=true \
    --benchmark_out="$logs/bench.json" --benchmark_out_format=json
  say '```'
  grep -E "^BM_|^-|Benchmark" "$logs/bench.log" | tee -a "$report"
  say '```'
fi

# Where a bf16 step's GPU time goes: Nsight Compute times each kernel of the
# 8-layer stack's first launches (one metric, clocks left alone) and
# scripts/gpu/kernel_profile.py groups them and finds one step's launches.
ncu="$(command -v ncu || echo /usr/local/cuda/bin/ncu)"
if wants profile && [ "$gpu" = yes ] && [ -x "$ncu" ] && [ -x "$build/bin/gpipe-cuda-bench" ]; then
  step "kernel profile (ncu, BM_TransformerStep 8 layers bf16)" "$logs/profile.log" \
    timeout "${GPIPE_PROFILE_TIMEOUT:-240}" "$ncu" --metrics gpu__time_duration.sum \
    --clock-control none \
    --launch-count "${GPIPE_PROFILE_LAUNCHES:-8000}" --log-file "$logs/profile.log" \
    --export "$logs/profile" --force-overwrite \
    "$build/bin/gpipe-cuda-bench" --benchmark_filter='BM_TransformerStep/layers:8/precision:2/'
  "$ncu" --import "$logs/profile.ncu-rep" --csv --page raw \
    >"$logs/profile.csv" 2>>"$logs/profile.log"
  say '```'
  python3 "$root/scripts/gpu/kernel_profile.py" "$logs/profile.csv" 2>&1 | tee -a "$report"
  say '```'
fi

# The same model in PyTorch eager and torch.compile (the image's python3 has
# torch): the comparison the step times above are read against.
if wants torch && [ "$gpu" = yes ] && python3 -c "import torch" 2>/dev/null; then
  torch_bench="$root/scripts/gpu/torch_transformer_bench.py"
  step "PyTorch eager, the same Transformer stack" "$logs/torch.log" \
    python3 "$torch_bench" --layers 8 24 --precision bf16
  step "PyTorch eager, fused attention (sdpa)" "$logs/torch-sdpa.log" \
    python3 "$torch_bench" --layers 8 24 --precision bf16 --sdpa
  step "PyTorch eager, tf32 and f32" "$logs/torch-f32.log" \
    python3 "$torch_bench" --layers 8 --precision tf32 f32
  step "PyTorch eager at d_model 2048 (bigger GEMMs)" "$logs/torch-2048.log" \
    python3 "$torch_bench" --layers 8 --width 2048 --precision bf16 --sdpa
  step "torch.compile, fused attention (sdpa)" "$logs/torch-compile.log" \
    python3 "$torch_bench" --layers 8 24 --precision bf16 --sdpa --compile
  say '```'
  cat "$logs"/torch*.log | grep -E '^torch (eager|\.compile)' | tee -a "$report"
  say '```'
fi

say ""
if [ ${#failed[@]} -eq 0 ]; then
  say "All steps passed."
  exit 0
fi
say "Failed: ${failed[*]}"
exit 1
