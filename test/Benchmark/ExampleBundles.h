//===- ExampleBundles.h - The examples compiled for the benchmarks --------===//
//
// The benchmarks compile python-free-examples/<name>/<name>.mlir in process
// (gpipe-compile, then the bundle writer) and feed fixed random batches, so
// that no dataset is read.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_TEST_BENCHMARK_EXAMPLEBUNDLES_H
#define GPIPE_TEST_BENCHMARK_EXAMPLEBUNDLES_H

#include "gpipe/Analysis/ScheduleKinds.h"
#include "gpipe/Dialect/GPipe/Transforms/Passes.h"
#include "gpipe/runtime/bundle/Bundle.h"
#include "gpipe/runtime/exec/Executor.h"

#include <cstdint>
#include <string>

namespace gpipe::benchmarks {

/// A compiled bundle, or why there is none.
struct Compiled {
  runtime::Bundle bundle;
  std::string error;
};

/// python-free-examples/<example>/<example>.mlir compiled with (K, M, remat,
/// schedule, V stages per device when interleaved); `batch` > 0 rewrites the
/// example's batch (the leading dimension of every batched type) first.
Compiled
compileExample(const std::string &example, unsigned k, unsigned m,
               RematPolicy remat, int64_t batch = 0,
               schedule::ScheduleKind kind = schedule::ScheduleKind::GPipe,
               unsigned virtualStages = 1);

/// A fixed pseudo-random batch for the bundle's f32 and i32 inputs (i32
/// values in [0, 10): the MLP's labels).
runtime::Batch randomBatch(const runtime::Bundle &bundle, uint64_t seed);

} // namespace gpipe::benchmarks

#endif // GPIPE_TEST_BENCHMARK_EXAMPLEBUNDLES_H
