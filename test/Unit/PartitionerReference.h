//===- PartitionerReference.h - References for the partitioner's tests ---===//
//
// Each driver generates random problems, solves them with an independent
// reference (PartitionerReference.cpp) and with partitionLayers, and checks
// the optimum, the tie-breaks, the cell memory and the error messages.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_TEST_UNIT_PARTITIONERREFERENCE_H
#define GPIPE_TEST_UNIT_PARTITIONERREFERENCE_H

#include "gpipe/Analysis/Partitioner.h"

#include <cstdint>
#include <random>
#include <vector>

namespace gpipe::partition_test {

struct CaseOptions {
  /// The cells' memory by a function like the planner's, not a sum.
  bool memoryFunction = false;
  /// Random cell weights.
  bool weighted = false;
};

uint64_t uniform(std::mt19937_64 &rng, uint64_t lo, uint64_t hi);

/// 1,500 problems of up to 12 layers and 5 cells against the brute force.
void runBruteForceCases(PartitionObjective objective, uint64_t seed,
                        CaseOptions options = {});

/// 1,500 problems of up to 12 layers and 5 cells, a third of their cuts
/// forbidden (`joined`), half of them capped, against the brute force
/// restricted to the allowed cuts.
void runJoinedCases(PartitionObjective objective, uint64_t seed);

/// 30 problems of 200 to 320 layers and up to 16 cells against the plain DP.
void runPlainDpCases(PartitionObjective objective, uint64_t seed,
                     CaseOptions options = {});

/// Problems with many exact ties, against the plain DP.
void runTieHeavyCases(PartitionObjective objective,
                      const std::vector<uint64_t> &seeds);

} // namespace gpipe::partition_test

#endif // GPIPE_TEST_UNIT_PARTITIONERREFERENCE_H
