//===- OpProfileSupport.h - Checks of a profiled step's op totals -*- C++
//-*-===//
//
// Shared by the CPU and CUDA tests of DeviceExecutorConfig::profileOps.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_TESTS_OPPROFILESUPPORT_H
#define GPIPE_RUNTIME_TESTS_OPPROFILESUPPORT_H

#include "gpipe/runtime/bundle/Bundle.h"
#include "gpipe/runtime/exec/Timeline.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace gpipe::runtime::testing {

/// Each forward op kind of `ops` as the profile names it, with its count.
inline std::map<std::string, int64_t> forwardKinds(const std::vector<Op> &ops) {
  std::map<std::string, int64_t> kinds;
  for (size_t k = 0; k < ops.size(); ++k) {
    std::string name = opKindName(ops[k].kind);
    if (ops[k].fusion != FusionKind::None)
      name += std::string("+") + opKindName(ops[++k].kind);
    ++kinds[name];
  }
  return kinds;
}

/// Every device's op totals of a step with `m` micro-batches under full
/// remat and GPipe's order: each forward op m times in the forward and m - 1
/// times in the recompute (the last micro-batch's backward follows its own
/// forward, which keeps its values), a dense gradient, each kind once,
/// largest first, and no more op time than the device's compute
/// instructions.
inline void expectEveryForwardOpCounted(const Bundle &bundle,
                                        const Timeline &timeline, unsigned m) {
  for (unsigned d = 0; d < bundle.numDevices(); ++d) {
    SCOPED_TRACE("device " + std::to_string(d));
    std::map<std::string, OpTotal> got;
    double opsUs = 0;
    for (const OpTotal &op : timeline.opTotals(d)) {
      EXPECT_TRUE(got.emplace(op.name, op).second) << op.name << " twice";
      EXPECT_GE(op.us, 0.0) << op.name;
      opsUs += op.us;
    }
    for (const auto &[kind, count] : forwardKinds(bundle.stages[d].forward))
      for (const char *section : {"forward", "recompute"}) {
        std::string name = std::string(section) + " " + kind;
        ASSERT_TRUE(got.count(name)) << "no " << name;
        const unsigned runs = std::string(section) == "forward" ? m : m - 1;
        EXPECT_EQ(got[name].calls, count * runs) << name;
      }
    EXPECT_TRUE(got.count("backward dense_grad"));
    double computeUs = 0;
    for (const TimelineEvent &event : timeline.lane(d))
      if (event.compute)
        computeUs += event.durationUs;
    EXPECT_LE(opsUs, computeUs + 1.0) << "ops outside the instructions";
    for (size_t i = 1; i < timeline.opTotals(d).size(); ++i)
      EXPECT_GE(timeline.opTotals(d)[i - 1].us, timeline.opTotals(d)[i].us)
          << "not largest first";
  }
}

} // namespace gpipe::runtime::testing

#endif // GPIPE_RUNTIME_TESTS_OPPROFILESUPPORT_H
