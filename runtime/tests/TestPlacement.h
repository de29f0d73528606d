//===- TestPlacement.h - The compiler's placement for test bundles -*- C++
//-*-===//
//
// The runtime runs only what the compiler placed. Tests that build bundles
// in C++ (TestBundles.h) play the compiler: they describe each stage as
// gpipe-plan-memory does from IR (each value's bytes with the state its op
// saves, parameter gradients accumulated in place left out, scratch) and
// place its buffers with the compiler's own planner (MemoryPlanner.h).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_TESTS_TESTPLACEMENT_H
#define GPIPE_RUNTIME_TESTS_TESTPLACEMENT_H

#include "gpipe/runtime/bundle/Bundle.h"

namespace gpipe::runtime::testing {

/// Sets bundle.memoryPlan from its stages and programs (two optimizer slots
/// in the resident bytes, as for Adam). Aborts the test program when the
/// planner refuses a program.
void placeBundle(Bundle &bundle);

} // namespace gpipe::runtime::testing

#endif // GPIPE_RUNTIME_TESTS_TESTPLACEMENT_H
