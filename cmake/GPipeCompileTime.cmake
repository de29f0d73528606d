# Compile time. CI builds gpipe three times on two cores (Release, then
# ASan+UBSan with the fuzzers, then TSan), so what a TU costs to compile is
# most of CI's time (docs/Reliability.md, "CI's time").
#
# 1. The tests' own sources need no -O3: what they test (the libraries) keeps
#    the build type's flags, and so do the reference computations
#    (GPipeTestReferences). At -O1, gcc compiles a test TU in about 30% less
#    time. Not -O0: the linker may keep a test object's copy of a template
#    the libraries instantiate too (libstdc++'s, nlohmann-json's), and under
#    ASan the bundle reader's tests ran 8x slower with -O0 copies. The
#    sanitizer build (scripts/configure-sanitizers.sh) keeps its -O1 and
#    instead leaves the tests' own sources without UBSan and without the
#    fuzzers' coverage counters, which they do not need: 45% of a test TU's
#    time there.
# 2. MLIR's headers are precompiled per target: they are half of an MLIR TU's
#    time (a pass: 6.4 s of 11.3 s at -O3, an integration test: 11.7 of 20.9).
#    So are the runtime tests' (GoogleTest, nlohmann-json, the runtime's
#    own): 6.6 s of a 13.1 s test TU with gcc, 5.8 of 17.9 with clang.
set(GPIPE_TEST_COMPILE_OPTIONS "-O1" CACHE STRING
  "Compile options of the test binaries' own sources, after the build type's (a list)")
option(GPIPE_PRECOMPILE_HEADERS
  "Precompile MLIR's headers for the compiler's libraries and tests" ON)

# The test binary `target`'s own sources with GPIPE_TEST_COMPILE_OPTIONS
# (they come after the build type's flags, so they win).
function(gpipe_test_compile_options target)
  if(GPIPE_TEST_COMPILE_OPTIONS)
    target_compile_options(${target} PRIVATE ${GPIPE_TEST_COMPILE_OPTIONS})
  endif()
  # Tests write a spec's leading fields and leave the rest to their defaults
  # ({"w", {4, 4}, InitKind::Ones, 1.0, 0}); clang warns of each, gcc not.
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANG_AND_ID:CXX,Clang>:-Wno-missing-field-initializers>)
endfunction()

# The headers most of the compiler's TUs include: MLIR's IR and passes, and
# the gpipe dialect's ops.
set(GPIPE_MLIR_PRECOMPILED_HEADERS
  <algorithm> <map> <memory> <optional> <string> <vector>
  <llvm/ADT/DenseMap.h> <llvm/ADT/SmallVector.h> <llvm/ADT/StringRef.h>
  <llvm/Support/FormatVariadic.h> <llvm/Support/JSON.h>
  <llvm/Support/raw_ostream.h>
  <mlir/IR/Builders.h> <mlir/IR/BuiltinOps.h> <mlir/IR/Diagnostics.h>
  <mlir/IR/MLIRContext.h> <mlir/IR/PatternMatch.h>
  <mlir/Pass/Pass.h> <mlir/Pass/PassManager.h>
  <mlir/Dialect/Arith/IR/Arith.h>
  <gpipe/Dialect/GPipe/IR/GPipeOps.h>)

# Precompiles those headers for `target`, or with REUSE_FROM, uses those of
# another target compiled with the same flags (a precompiled header costs
# about 20 s, more than a target of four TUs saves). An add_mlir_library's
# objects are compiled by obj.<name>. A precompiled header that does not match
# a TU's flags is ignored (-Winvalid-pch says so), never wrong: gcc refuses
# one made with other -D macros, so the test binaries, each with its own
# paths defined, cannot share one. The target reused from must be defined
# first.
function(gpipe_precompile_mlir_headers target)
  cmake_parse_arguments(ARG "" "REUSE_FROM" "" ${ARGN})
  if(NOT GPIPE_PRECOMPILE_HEADERS)
    return()
  endif()
  if(TARGET obj.${target})
    set(target obj.${target})
  endif()
  if(ARG_REUSE_FROM)
    if(TARGET obj.${ARG_REUSE_FROM})
      set(ARG_REUSE_FROM obj.${ARG_REUSE_FROM})
    endif()
    target_precompile_headers(${target} REUSE_FROM ${ARG_REUSE_FROM})
  else()
    target_precompile_headers(${target} PRIVATE ${GPIPE_MLIR_PRECOMPILED_HEADERS})
  endif()
endfunction()

# The headers most of the runtime's test TUs include (C++ only: the C API's C
# clients share the target).
set(GPIPE_RUNTIME_TEST_PRECOMPILED_HEADERS
  <algorithm> <chrono> <cmath> <cstring> <filesystem> <fstream> <functional>
  <map> <memory> <random> <sstream> <string> <tuple> <vector>
  <gtest/gtest.h> <nlohmann/json.hpp>
  <gpipe/runtime/gpipe_runtime.h>
  <gpipe/runtime/backends/cpu/CpuBackend.h>
  <gpipe/runtime/backends/host/HostBackend.h>
  <gpipe/runtime/bundle/BundleReader.h>
  <gpipe/runtime/exec/DeviceExecutor.h> <gpipe/runtime/exec/Executor.h>
  <gpipe/runtime/verify/BundleValidation.h>)

# Precompiles those headers for the runtime test binary `target`. (A
# header's closing `>` would close the generator expression: $<ANGLE-R>.)
function(gpipe_precompile_runtime_test_headers target)
  if(NOT GPIPE_PRECOMPILE_HEADERS)
    return()
  endif()
  set(headers)
  foreach(header IN LISTS GPIPE_RUNTIME_TEST_PRECOMPILED_HEADERS)
    string(REPLACE ">" "$<ANGLE-R>" header "${header}")
    list(APPEND headers "$<$<COMPILE_LANGUAGE:CXX>:${header}>")
  endforeach()
  target_precompile_headers(${target} PRIVATE ${headers})
endfunction()
