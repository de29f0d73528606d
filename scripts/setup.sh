#!/usr/bin/env bash
# Installs everything gpipe needs to build and test, from Debian's packages.
# Safe to run any number of times: it installs only what is missing.
set -euo pipefail

packages=(
  cmake ninja-build g++ git
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
  libgtest-dev libbenchmark-dev libopenblas-dev zlib1g-dev nlohmann-json3-dev
  dataset-fashion-mnist fortunes
  python3 python3-psutil
  clang-22 libclang-rt-22-dev lld-22
  libopenmpi-dev openmpi-bin
  libonnx-dev libprotobuf-dev libonnx-testdata
  pkgconf libzstd-dev
  chromium-headless-shell fonts-dejavu-core
)

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
