#!/usr/bin/env bash
# Times the same models in gpipe and in PyTorch on this machine's CPU, in one
# run, and prints their step times side by side with ratios. Models: the MLP
# and the char Transformer of python-free-examples/, rewritten op for op in
# scripts/pytorch/models.py (which checks its parameter counts against the
# .mlir). A step is forward + backward over the whole mini-batch + one Adam
# (lr 1e-3) update, on fixed random data; each configuration reports the
# median and min of --steps steps after --warmup steps.
#   gpipe (build/bin/gpipe-bench, built if missing): K=1 M=1 and K=1 M=8, each
#     on one thread and on every core, K=2 M=8 (GPipe's schedule), the same
#     with full rematerialisation, and K=2 M=8 under 1F1B and under ZB-H1,
#     each without and with it (1F1B also with selective rematerialisation);
#   PyTorch: eager with 1 and with 2 intra-op threads, and
#     torch.distributed.pipelining's ScheduleGPipe with 2 stages (2 processes,
#     gloo over loopback, 1 thread each) and 8 micro-batches.
# For each model and batch the gpipe runs come first, then the torch runs, so
# drifting machine noise falls on both. Every run prints one JSON line on
# stdout; a Markdown table per model and batch follows; progress goes to stderr.
# PyTorch comes from PyPI into .venv-compare/ (git-ignored; about 4 GB,
# installed once). With --mkl, gpipe multiplies with Intel's MKL, as PyTorch's
# wheel does: PyPI's mkl package goes into the same environment (its
# libraries only, no dependencies: gpipe runs MKL's sequential layer) and
# every gpipe-bench run gets GPIPE_BLAS_LIBRARY (runtime/include/gpipe/
# runtime/BlasLibrary.h); the tables name each run's BLAS. With --rounds N,
# every configuration of a model and batch runs once per round, in turn, so
# that this shared machine's drifting load falls on all of them; the tables
# take the median of the rounds and give each ratio's range over them.
#   scripts/compare-pytorch.sh [--models mlp,transformer] [--batches 64,512]
#       [--transformer-batches 32,128] [--steps 20] [--warmup 3] [--rounds 1]
#       [--out FILE] [--gpipe-args 'ARGS'] [--torch-only] [--mkl]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

usage() {
  cat <<'EOF'
usage: scripts/compare-pytorch.sh [options]
  --models LIST               comma-separated, from mlp,transformer (default: both)
  --batches LIST              MLP mini-batch sizes (default 64,512)
  --transformer-batches LIST  Transformer mini-batch sizes, in sequences (default 32,128)
  --steps N                   timed steps per configuration (default 20)
  --warmup W                  untimed steps before them (default 3)
  --rounds N                  run every configuration N times, in turn; report medians and ranges (default 1)
  --out FILE                  also write the JSON lines to FILE
  --gpipe-args 'ARGS'         extra arguments for every gpipe-bench run (e.g. '--threads-per-device 1')
  --torch-only                skip gpipe (no build), time only PyTorch
  --mkl                       gpipe multiplies with MKL (PyPI's mkl, installed once) instead of OpenBLAS
  --help                      this text
Batch sizes must be multiples of the 8 micro-batches.
EOF
}

models=mlp,transformer batches=64,512 transformer_batches=32,128
steps=20 warmup=3 rounds=1 out="" torch_only=false gpipe_args="" mkl=false
microbatches=8
die() { echo "compare-pytorch.sh: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --help|-h) usage; exit 0 ;;
    --torch-only) torch_only=true; shift ;;
    --mkl) mkl=true; shift ;;
    --models|--batches|--transformer-batches|--steps|--warmup|--rounds|--out|--gpipe-args)
      [[ $# -ge 2 ]] || die "$1 needs a value"
      case "$1" in
        --models) models="$2" ;;
        --batches) batches="$2" ;;
        --transformer-batches) transformer_batches="$2" ;;
        --steps) steps="$2" ;;
        --warmup) warmup="$2" ;;
        --rounds) rounds="$2" ;;
        --out) out="$2" ;;
        --gpipe-args) gpipe_args="$2" ;;
      esac
      shift 2 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ $steps =~ ^[1-9][0-9]*$ ]] || die "--steps must be a positive integer, not '$steps'"
[[ $warmup =~ ^[0-9]+$ ]] || die "--warmup must be a non-negative integer, not '$warmup'"
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a positive integer, not '$rounds'"
IFS=, read -ra model_list <<<"$models"
for m in "${model_list[@]}"; do
  [[ $m == mlp || $m == transformer ]] || die "unknown model '$m' (expected mlp or transformer)"
done
for b in ${batches//,/ } ${transformer_batches//,/ }; do
  if [[ ! $b =~ ^[1-9][0-9]*$ ]] || ((b % microbatches)); then
    die "batch '$b' is not a positive multiple of $microbatches micro-batches"
  fi
done
read -ra extra_gpipe_args <<<"$gpipe_args"
log() { echo "compare-pytorch: $*" >&2; }

# --- PyTorch, into a git-ignored virtual environment ------------------------
# PyPI's Linux torch wheel links the CUDA libraries into torch._C and so needs
# them to import even on a CPU-only machine; its requirements would also bring
# triton (1 GB, torch.compile only) and the rest of the CUDA toolkit. So torch
# goes in without dependencies, with just the libraries its _C links, at the
# versions torch 2.15.0 pins (4.1 GB rather than 5.3 GB), and the small pure
# Python dependencies resolved normally.
venv="$root/.venv-compare"
py="$venv/bin/python"
torch_version=2.15.0
cuda_libs=(
  nvidia-cuda-runtime==13.2.86 nvidia-cuda-cupti==13.2.86 nvidia-cuda-nvrtc==13.2.86
  nvidia-cublas==13.4.1.3 nvidia-cufft==12.2.0.57 nvidia-cufile==1.17.1.22
  nvidia-cusparse==12.7.10.12 nvidia-nvjitlink==13.5.37 nvidia-cudnn-cu13==9.26.0.51
  nvidia-cusparselt-cu13==0.8.1 nvidia-nccl-cu13==2.30.7 nvidia-nvshmem-cu13==3.7.2
)
python_deps=(filelock 'typing-extensions>=4.13.0' 'sympy>=1.13.3' 'networkx>=2.5.1'
  jinja2 'fsspec>=0.8.5' 'setuptools>=77.0.3' numpy)
exclude="$(git -C "$root" rev-parse --path-format=absolute --git-path info/exclude 2>/dev/null || true)"
if [[ -n $exclude ]] && ! grep -qxF '/.venv-compare/' "$exclude" 2>/dev/null; then
  mkdir -p "$(dirname "$exclude")" && echo '/.venv-compare/' >>"$exclude"
fi
has_torch() {
  "$py" -c "import sys, torch, torch.distributed.pipelining
sys.exit(torch.__version__.split('+')[0] != '$torch_version')" 2>/dev/null
}
if ! has_torch; then
  log "installing PyTorch $torch_version (CPU use of PyPI's wheel) into .venv-compare/, once"
  [[ -x $py ]] || python3 -m venv "$venv" ||
    { log "python3 -m venv failed (on Debian: apt-get install python3-venv)"; exit 1; }
  # Python dependencies first: pip checks requirements after an install that
  # resolves them and would flag torch's deliberately missing ones.
  "$venv/bin/pip" install --quiet "${python_deps[@]}" >&2
  "$venv/bin/pip" install --quiet --no-deps "torch==$torch_version" "${cuda_libs[@]}" >&2
  has_torch || { log "torch $torch_version does not import from .venv-compare/"; exit 1; }
fi
log "torch $("$py" -c 'import torch; print(torch.__version__)'); checking parameter counts against the .mlir"
"$py" "$root/scripts/pytorch/models.py"

mkl_version=2025.2.0
if $mkl && ! $torch_only; then
  if ! "$venv/bin/pip" show mkl 2>/dev/null | grep -qx "Version: $mkl_version"; then
    log "installing MKL $mkl_version (PyPI's mkl, its libraries only) into .venv-compare/, once"
    "$venv/bin/pip" install --quiet --no-deps "mkl==$mkl_version" >&2
  fi
  export GPIPE_BLAS_LIBRARY="$venv/lib/libmkl_rt.so.2"
  [[ -e $GPIPE_BLAS_LIBRARY ]] || { log "no $GPIPE_BLAS_LIBRARY after installing mkl"; exit 1; }
fi

# --- gpipe ------------------------------------------------------------------
bench="${GPIPE_BUILD_DIR:-$root/build}/bin/gpipe-bench"
if ! $torch_only && [[ ! -x $bench ]]; then
  log "building gpipe-bench"
  "$root/scripts/build.sh" gpipe-bench >&2
fi

results="$(mktemp)"
trap 'rm -f "$results"' EXIT
[[ -z $out ]] || : >"$out"
emit() { tee -a "$results" ${out:+"$out"}; }

gpipe_run() { # model batch stages microbatches remat [threads per device] [schedule]
  local model=$1 batch=$2 k=$3 m=$4 remat=$5 threads=${6:-} schedule=${7:-gpipe}
  local config="k$k-m$m-$remat" extra=() stdout line
  if [[ -n $threads ]]; then
    config+="-${threads}t"
    extra+=(--threads-per-device "$threads")
  fi
  if [[ $schedule != gpipe ]]; then
    config+="-$schedule"
    extra+=(--schedule "$schedule")
  fi
  log "$model batch $batch: gpipe K=$k M=$m remat $remat, schedule $schedule${threads:+, $threads thread(s) per device}"
  stdout=$("$bench" "$root/python-free-examples/$model/$model.mlir" --stages "$k" \
    --microbatches "$m" --batch-size "$batch" --remat "$remat" --steps "$steps" \
    --warmup "$warmup" "${extra[@]}" "${extra_gpipe_args[@]}" --json)
  line=$(grep '^{' <<<"$stdout" | tail -n1 || true)
  [[ -n $line ]] || { log "gpipe-bench printed no JSON line on stdout"; exit 1; }
  # Tag the line so report.py can tell the runs apart; gpipe-bench's other keys stay.
  "$py" -c 'import json, sys
run = json.loads(sys.argv[1])
batch = int(sys.argv[4])
if run.get("batch", batch) != batch:
    sys.exit("gpipe-bench ran batch %s, not the %d asked for" % (run["batch"], batch))
run.update(framework="gpipe", model=sys.argv[2], config=sys.argv[3], batch=batch)
run.setdefault("steps", int(sys.argv[5]))
print(json.dumps(run))' "$line" "$model" "$config" "$batch" "$steps" | emit
}

torch_runs() { # model batch
  local model=$1 batch=$2 threads
  for threads in 1 2; do
    log "$model batch $batch: torch eager, $threads intra-op thread(s)"
    "$py" "$root/scripts/pytorch/bench_eager.py" --model "$model" --batch "$batch" \
      --threads "$threads" --steps "$steps" --warmup "$warmup" | emit
  done
  log "$model batch $batch: torch ScheduleGPipe, 2 stages, $microbatches micro-batches"
  "$py" "$root/scripts/pytorch/bench_pipeline.py" --model "$model" --batch "$batch" \
    --microbatches "$microbatches" --steps "$steps" --warmup "$warmup" | emit
}

for model in "${model_list[@]}"; do
  list=$batches
  [[ $model == transformer ]] && list=$transformer_batches
  for batch in ${list//,/ }; do
    for ((round = 1; round <= rounds; ++round)); do
      ((rounds == 1)) || log "$model batch $batch: round $round of $rounds"
      if ! $torch_only; then
        # One device on one thread (against torch on one thread), then on every
        # core (the default: the cores divided among the devices).
        gpipe_run "$model" "$batch" 1 1 none 1
        gpipe_run "$model" "$batch" 1 1 none
        gpipe_run "$model" "$batch" 1 "$microbatches" none 1
        gpipe_run "$model" "$batch" 1 "$microbatches" none
        gpipe_run "$model" "$batch" 2 "$microbatches" none
        gpipe_run "$model" "$batch" 2 "$microbatches" full
        # 1F1B: the last device's backwards follow their forwards, so only
        # the first device recomputes. Zero-bubble ZB-H1 besides: the weight
        # gradients fill the drain's bubble; with remat full, the recomputes
        # fill waits for gradients, which GPipe's order does not have.
        gpipe_run "$model" "$batch" 2 "$microbatches" none "" 1f1b
        gpipe_run "$model" "$batch" 2 "$microbatches" full "" 1f1b
        # Selective: the products' results stay, the cheap ops rerun.
        gpipe_run "$model" "$batch" 2 "$microbatches" selective "" 1f1b
        gpipe_run "$model" "$batch" 2 "$microbatches" none "" zb-h1
        gpipe_run "$model" "$batch" 2 "$microbatches" full "" zb-h1
      fi
      torch_runs "$model" "$batch"
    done
  done
done

"$py" "$root/scripts/pytorch/report.py" "$results"
