#!/usr/bin/env bash
# Regenerates the ONNX importer's test fixtures in test/Import/Onnx/Inputs/
# (see README.md there) from fixed seeds, with scripts/onnx/make_fixtures.py.
#
# onnx, onnxruntime and numpy come from PyPI, pinned, into .venv-onnx/
# (git-ignored, about 210 MB, made the first time). PyTorch is not installed
# again: the one in .venv-compare/ (PyTorch 2.15.0, installed by
# scripts/compare-pytorch.sh) is put on .venv-onnx's path by a .pth file,
# after .venv-onnx's own packages. GPIPE_TORCH_PYTHON names another Python
# whose torch to use.
#   scripts/onnx/make-fixtures.sh [--out DIR] [--checker PATH] [--tolerance T]
# --checker PATH (or GPIPE_ONNX_CHECKER) runs a program built against libonnx
# 1.12 on every .onnx fixture and prints what it says.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
log() { echo "make-fixtures: $*" >&2; }

torch_version=2.15.0
pins=(numpy==2.4.6 onnx==1.23.2 onnxruntime==1.32.0)
venv="$root/.venv-onnx"
py="$venv/bin/python"
torch_py="${GPIPE_TORCH_PYTHON:-$root/.venv-compare/bin/python}"

if ! "$torch_py" -c "import sys, torch
sys.exit(torch.__version__.split('+')[0] != '$torch_version')" 2>/dev/null; then
  log "PyTorch $torch_version does not import from $torch_py"
  log "install it once with: scripts/compare-pytorch.sh --torch-only --models mlp --batches 8 --steps 1 --warmup 0"
  log "(it installs PyTorch into .venv-compare/), or set GPIPE_TORCH_PYTHON"
  exit 1
fi
torch_site="$("$torch_py" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')"

if [[ ! -x $py ]]; then
  log "making .venv-onnx/"
  python3 -m venv "$venv" || { log "python3 -m venv failed (on Debian: apt-get install python3-venv)"; exit 1; }
fi
has_pins() {
  "$py" -c "import sys, importlib.metadata as m
want = dict(p.split('==') for p in sys.argv[1:])
sys.exit(any(m.version(k) != v for k, v in want.items()))" "${pins[@]}" 2>/dev/null
}
if ! has_pins; then
  log "installing ${pins[*]} into .venv-onnx/"
  "$venv/bin/pip" install --quiet "${pins[@]}" >&2
  has_pins || { log "${pins[*]} did not install"; exit 1; }
fi
site="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$torch_site" >"$site/gpipe-torch.pth"

export PYTHONDONTWRITEBYTECODE=1 PYTHONHASHSEED=0
exec "$py" "$root/scripts/onnx/make_fixtures.py" "$@"
