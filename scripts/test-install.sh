#!/usr/bin/env bash
# Installs a build into a fresh prefix and builds applications outside the
# tree against it:
#   1. test/Install/app with CMake's find_package(gpipe): train_c (C API,
#      shared library), train_cpp (Runtime.hpp), train_c_static (the static
#      library);
#   2. test/Install/compiler-app with find_package(gpipe COMPONENTS
#      compiler): compile_model, which compiles a model into a bundle that
#      train_c then trains;
#   3. test/Install/app with pkg-config only (cc and c++ on the command line).
# Each program trains a bundle that the installed gpipe-opt and
# gpipe-translate compile, and must see its loss fall. Also checks that the
# shared library exports the C API only (gpipe_* symbols).
#
# usage: scripts/test-install.sh BUILD_DIR [WORK_DIR]   (the ctest
# `install-out-of-tree` runs it on the build it belongs to)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ $# -lt 1 ] || [ ! -f "$1/CMakeCache.txt" ]; then
  echo "usage: $0 BUILD_DIR [WORK_DIR]  (BUILD_DIR: a configured, built gpipe build)" >&2
  exit 2
fi
build="$(cd "$1" && pwd)"
work="${2:-$(mktemp -d)}"
mkdir -p "$work"
work="$(cd "$work" && pwd)"
prefix="$work/prefix"
rm -rf "$prefix" "$work/cmake-app" "$work/compiler-app" "$work/pc-app"
mkdir -p "$work/pc-app"

echo "== cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log"

echo "== a bundle from the installed compiler"
bundle="$work/mlp.bundle.json"
"$prefix/bin/gpipe-opt" "$root/python-free-examples/mlp/mlp.mlir" \
  --gpipe-compile="stages=2 microbatches=2" |
  "$prefix/bin/gpipe-translate" --gpipe-to-bundle -o "$bundle"

echo "== the installed gpipe-report draws the bundle's memory plan"
"$prefix/bin/gpipe-report" --html "$work/plan.html" --bundle "$bundle"
grep -q 'aria-label="Memory per device"' "$work/plan.html"

libdir="$(dirname "$(find "$prefix" -name 'libgpipe_runtime.so' | head -1)")"
echo "== the shared library exports the C API only ($libdir)"
others="$(nm -D --defined-only "$libdir/libgpipe_runtime.so" |
  awk '{print $3}' | grep -v '^gpipe_' || true)"
if [ -n "$others" ]; then
  echo "libgpipe_runtime.so exports symbols beyond the C API:" >&2
  echo "$others" | head -20 >&2
  exit 1
fi
echo "   $(nm -D --defined-only "$libdir/libgpipe_runtime.so" | grep -c ' gpipe_') gpipe_* functions"

echo "== find_package(gpipe)"
cmake -S "$root/test/Install/app" -B "$work/cmake-app" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" >"$work/cmake-app.log"
cmake --build "$work/cmake-app" >>"$work/cmake-app.log"
for program in train_c train_cpp train_c_static; do
  echo "-- $program"
  "$work/cmake-app/$program" "$bundle"
done

echo "== find_package(gpipe COMPONENTS compiler): compiling a model in an application"
cmake -S "$root/test/Install/compiler-app" -B "$work/compiler-app" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" >"$work/compiler-app.log"
cmake --build "$work/compiler-app" >>"$work/compiler-app.log"
"$work/compiler-app/compile_model" "$root/python-free-examples/mlp/mlp.mlir" 4 4 \
  "$work/mlp-k4.bundle.json"
"$work/cmake-app/train_c" "$work/mlp-k4.bundle.json"

echo "== pkg-config"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
cflags="$(pkg-config --cflags gpipe-runtime)"
libs="$(pkg-config --libs gpipe-runtime)"
cc -std=c99 $cflags "$root/test/Install/app/train_c.c" -o "$work/pc-app/train_c" \
  $libs -lm -Wl,-rpath,"$libdir"
c++ -std=c++17 $cflags "$root/test/Install/app/train_cpp.cpp" \
  -o "$work/pc-app/train_cpp" $libs -Wl,-rpath,"$libdir"
for program in train_c train_cpp; do
  echo "-- $program (pkg-config)"
  "$work/pc-app/$program" "$bundle"
done
echo "test-install: passed"
