#!/usr/bin/env bash
# Regenerates the tiny real-model ONNX fixtures in
# test/Import/Onnx/Inputs/models/ (gpt2, llama, bert, vit, mobilenet_v2,
# resnet18, transformer_encoder; see README.md there, which this writes) from
# fixed seeds, with scripts/onnx/make_model_fixtures.py.
#
# Runs in .venv-compare/ (PyTorch 2.15.0, installed once by
# scripts/compare-pytorch.sh). The packages below go into that venv the first
# time, pinned, with torch held at its version by a constraints file:
# torchvision without dependencies (it would pull torch's triton and CUDA
# toolkit, which compare-pytorch.sh leaves out on purpose), the rest normally.
#   scripts/onnx/make-model-fixtures.sh [--out DIR] [--models a,b] [--no-dynamo]
#                                       [--no-fold] [--check-determinism]
# GPIPE_TORCH_VENV names another venv that has torch 2.15.0.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
log() { echo "make-model-fixtures: $*" >&2; }

torch_version=2.15.0
pins=(transformers==5.25.0 onnx==1.23.2 onnxruntime==1.32.0 onnxscript==0.7.2 onnx-ir==1.1.0
  numpy==2.4.6 protobuf==7.36.2 pillow==13.0.0)
nodeps_pins=(torchvision==0.29.2)
venv="${GPIPE_TORCH_VENV:-$root/.venv-compare}"
py="$venv/bin/python"

if ! "$py" -c "import sys, torch
sys.exit(torch.__version__.split('+')[0] != '$torch_version')" 2>/dev/null; then
  log "PyTorch $torch_version does not import from $py"
  log "install it once with: scripts/compare-pytorch.sh --torch-only --models mlp --batches 8 --steps 1 --warmup 0"
  log "(it installs PyTorch into .venv-compare/), or set GPIPE_TORCH_VENV"
  exit 1
fi

has_pins() { # each name==version installed (a local label such as +cu132 ignored)
  "$py" -c "import sys, importlib.metadata as m
def ok(name, want):
    try:
        return m.version(name).split('+')[0] == want
    except m.PackageNotFoundError:
        return False
sys.exit(not all(ok(*p.split('==')) for p in sys.argv[1:] if '==' in p))" "$@" 2>/dev/null
}
if ! has_pins "${pins[@]}" "${nodeps_pins[@]}"; then
  log "installing ${pins[*]} ${nodeps_pins[*]} into $venv"
  constraints="$(mktemp)"
  trap 'rm -f "$constraints"' EXIT
  echo "torch==$torch_version" >"$constraints"
  "$venv/bin/pip" install --quiet -c "$constraints" "${pins[@]}" >&2
  "$venv/bin/pip" install --quiet --no-deps -c "$constraints" "${nodeps_pins[@]}" >&2
  has_pins "${pins[@]}" "${nodeps_pins[@]}" || { log "${pins[*]} ${nodeps_pins[*]} did not install"; exit 1; }
  "$py" -c "import sys, torch
sys.exit(torch.__version__.split('+')[0] != '$torch_version')" ||
    { log "torch is no longer $torch_version in $venv"; exit 1; }
fi

export PYTHONDONTWRITEBYTECODE=1 PYTHONHASHSEED=0
exec "$py" "$root/scripts/onnx/make_model_fixtures.py" "$@"
