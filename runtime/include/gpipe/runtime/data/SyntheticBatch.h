//===- SyntheticBatch.h - A bundle's inputs without a data set --*- C++ -*-===//
//
// Benchmarks time steps on fixed random inputs of the bundle's shapes, so
// that no data set is read and any model runs: floats uniform in [0, 1), ids
// and labels uniform below what the ops that read them accept.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_SYNTHETICBATCH_H
#define GPIPE_RUNTIME_SYNTHETICBATCH_H

#include "gpipe/runtime/bundle/Bundle.h"
#include "gpipe/runtime/exec/Executor.h"

#include <cstdint>
#include <map>
#include <string>

namespace gpipe::runtime {

/// For each i32 model input that an embedding or a softmax cross-entropy
/// reads, the exclusive bound of its values: the table's rows, the number of
/// classes (the smallest, where several ops read it).
std::map<std::string, int64_t> inputValueLimits(const Bundle &bundle);

/// One mini-batch of the bundle's model inputs from `seed`; an i32 input
/// without a limit gets zeros.
Batch syntheticBatch(const Bundle &bundle, uint64_t seed);

} // namespace gpipe::runtime

#endif // GPIPE_RUNTIME_SYNTHETICBATCH_H
