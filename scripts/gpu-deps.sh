#!/usr/bin/env bash
# Run HERE, on the CPU machine (Debian, apt): downloads the Debian packages that
# the runtime-only build needs and a GPU machine lacks, into .gpu-deps/ at the
# repository root (kept out of git by .git/info/exclude). The device tool
# carries that folder (`carry: [".gpu-deps"]`); scripts/gpu-check.sh unpacks
# it there under /tmp, never over `/`.
#
# ~46 MB: development headers and libraries (nlohmann-json, GoogleTest,
# Google Benchmark, OpenBLAS with its Fortran runtime, zlib), the data sets
# (Fashion-MNIST, the fortunes corpus), and the bundles gpu-check.sh trains,
# compiled here (the GPU machine has no compiler): the MLP at K=4, M=8 and
# the character LM at K=4, M=4, the configurations of scripts/train-*.sh.
# `--packages-only` skips the bundles (and so the compiler's build): enough for
# the GPU tests and benchmarks, which build their bundles themselves.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
dest="$root/.gpu-deps"

packages=(
  nlohmann-json3-dev
  libgtest-dev googletest
  libbenchmark-dev libbenchmark1debian
  libopenblas-dev libopenblas0 libopenblas0-pthread libopenblas-pthread-dev
  libgfortran5 libquadmath0
  zlib1g-dev zlib1g
  dataset-fashion-mnist
  fortunes fortunes-min
)

exclude="$(git -C "$root" rev-parse --git-path info/exclude)"
mkdir -p "$(dirname "$exclude")"
grep -qxF '/.gpu-deps/' "$exclude" 2>/dev/null ||
  echo '/.gpu-deps/' >>"$exclude"
mkdir -p "$dest"
if ! apt-cache show "${packages[0]}" >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
fi
(cd "$dest" && apt-get download -q "${packages[@]}")
echo "gpu-deps: $(ls "$dest"/*.deb | wc -l) packages, $(du -sh "$dest" | cut -f1) in $dest"
if [ "${1:-}" = --packages-only ]; then exit 0; fi

# The bundles, compiled with this checkout's compiler.
"$root/scripts/build.sh" gpipe-opt gpipe-translate >/dev/null
build="${GPIPE_BUILD_DIR:-$root/build}"
mkdir -p "$dest/bundles"
compile() {
  "$build/bin/gpipe-opt" "$root/python-free-examples/$1/$1.mlir" \
    --gpipe-compile="stages=$2 microbatches=$3" |
    "$build/bin/gpipe-translate" --gpipe-to-bundle -o "$dest/bundles/$1.bundle.json"
}
compile mlp 4 8
compile charlm 4 4
echo "gpu-deps: bundles $(ls "$dest/bundles" | tr '\n' ' ')"
