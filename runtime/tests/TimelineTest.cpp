//===- TimelineTest.cpp - Timeline, bubble fraction, Chrome trace ---------===//

#include "gpipe/runtime/exec/Timeline.h"

#include <gtest/gtest.h>

using namespace gpipe::runtime;

static TimelineEvent event(const char *name, bool compute, int64_t mb,
                           double start, double duration) {
  return TimelineEvent{name, compute, mb, start, duration};
}

// Two devices, each busy half of a 20 us span: bubble 1 - 20 / (2 x 20) = 0.5.
TEST(Timeline, BubbleFractionOfHandBuiltTimeline) {
  Timeline timeline(2);
  timeline.record(0, event("forward", true, 0, 0, 10));
  timeline.record(1, event("recv activation", false, 0, 0, 10));
  timeline.record(1, event("forward", true, 0, 10, 10));
  EXPECT_DOUBLE_EQ(timeline.spanUs(), 20.0);
  EXPECT_DOUBLE_EQ(timeline.bubbleFraction(), 0.5);
}

// A GPipe fill-drain of K=2 balanced stages and M=2 (forward t, backward 2t) measures (K-1)/(M+K-1) = 1/3.
TEST(Timeline, BalancedFillDrainMatchesTheory) {
  Timeline timeline(2);
  timeline.record(0, event("forward", true, 0, 0, 1));
  timeline.record(0, event("forward", true, 1, 1, 1));
  timeline.record(1, event("forward", true, 0, 1, 1));
  timeline.record(1, event("forward", true, 1, 2, 1));
  timeline.record(1, event("backward", true, 1, 3, 2));
  timeline.record(1, event("backward", true, 0, 5, 2));
  timeline.record(0, event("backward", true, 1, 5, 2));
  timeline.record(0, event("backward", true, 0, 7, 2));
  EXPECT_NEAR(timeline.bubbleFraction(), 1.0 / 3.0, 1e-12);
}

// Side work counts as compute: device 1 waits 10 us, packing for 4 of
// them, so 1 - (10 + 10 + 4) / (2 x 20) = 0.4; the instruction lanes keep
// their own events.
TEST(Timeline, SideWorkIsCompute) {
  Timeline timeline(2);
  timeline.record(0, event("forward", true, 0, 0, 10));
  timeline.record(1, event("recv activation", false, 0, 0, 10));
  timeline.record(1, event("forward", true, 0, 10, 10));
  timeline.recordSideWork(1, event("pack weights ahead", false, -1, 1, 4));
  EXPECT_DOUBLE_EQ(timeline.spanUs(), 20.0);
  EXPECT_DOUBLE_EQ(timeline.bubbleFraction(), 0.4);
  ASSERT_EQ(timeline.sideWork(1).size(), 1u);
  EXPECT_TRUE(timeline.sideWork(1)[0].compute);
  EXPECT_EQ(timeline.lane(1).size(), 2u);
  EXPECT_TRUE(timeline.sideWork(0).empty());
  EXPECT_NE(timeline.toChromeTrace().find(
                "{\"name\":\"pack weights ahead\",\"cat\":\"side work\","
                "\"ph\":\"X\",\"ts\":1.000,\"dur\":4.000,\"pid\":0,"
                "\"tid\":1}"),
            std::string::npos);
}

// Nothing recorded: no bubble, and a valid empty trace.
TEST(Timeline, EmptyTimeline) {
  Timeline timeline(3);
  EXPECT_EQ(timeline.spanUs(), 0.0);
  EXPECT_EQ(timeline.bubbleFraction(), 0.0);
  std::string trace = timeline.toChromeTrace();
  EXPECT_NE(trace.find("\"traceEvents\":["), std::string::npos);
  EXPECT_NE(trace.find("\"name\":\"device 2\""), std::string::npos);
}

// Each event becomes a complete ("X") event on its device's row with its micro-batch.
TEST(Timeline, ChromeTraceEvents) {
  Timeline timeline(2);
  timeline.record(1, event("backward", true, 3, 12.5, 4));
  timeline.record(0, event("recv \"gradient\"", false, -1, 1, 2));
  std::string trace = timeline.toChromeTrace();
  EXPECT_NE(trace.find("{\"name\":\"backward\",\"cat\":\"compute\",\"ph\":\"X\","
                       "\"ts\":12.500,\"dur\":4.000,\"pid\":0,\"tid\":1,"
                       "\"args\":{\"microbatch\":3}}"),
            std::string::npos)
      << trace;
  EXPECT_NE(trace.find("{\"name\":\"recv \\\"gradient\\\"\",\"cat\":\"wait\","
                       "\"ph\":\"X\",\"ts\":1.000,\"dur\":2.000,\"pid\":0,"
                       "\"tid\":0}"),
            std::string::npos)
      << trace;
}

// An unwritable trace path is an error naming the path.
TEST(Timeline, UnwritablePath) {
  Timeline timeline(1);
  EXPECT_EQ(timeline.writeChromeTrace("/nonexistent-dir/trace.json"),
            "cannot write the trace to '/nonexistent-dir/trace.json': No such "
            "file or directory");
}
