#!/usr/bin/env bash
# Regenerates test/Kernels/Inputs/elementwise-autograd.json and
# test/Integration/Inputs/broadcast-autograd.json and gather-autograd.json, PyTorch
# autograd's values for the general element-wise ops, with
# scripts/pytorch/elementwise_fixtures.py, from PyTorch 2.15.0 in
# .venv-compare/ (installed once by scripts/compare-pytorch.sh --torch-only;
# GPIPE_TORCH_PYTHON names another Python).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
py="${GPIPE_TORCH_PYTHON:-$root/.venv-compare/bin/python}"
"$py" "$root/scripts/pytorch/elementwise_fixtures.py" \
  "$root/test/Kernels/Inputs/elementwise-autograd.json"
echo "make-elementwise-fixtures: wrote test/Kernels/Inputs/elementwise-autograd.json"
"$py" "$root/scripts/pytorch/broadcast_fixtures.py" \
  "$root/test/Integration/Inputs/broadcast-autograd.json"
echo "make-elementwise-fixtures: wrote test/Integration/Inputs/broadcast-autograd.json"
"$py" "$root/scripts/pytorch/gather_fixtures.py" \
  "$root/test/Integration/Inputs/gather-autograd.json"
echo "make-elementwise-fixtures: wrote test/Integration/Inputs/gather-autograd.json"
