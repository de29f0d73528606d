//===- TuneTest.cpp - gpipe-tune's calibration and plan files -------------===//
//
// The calibration must recover the costs that made a profile: profiles are
// written here from chosen per-FLOP and per-instruction costs, and the fit
// must give those numbers back. Plan files must read back what was written
// and refuse what is not a plan.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Tune/PlanFile.h"
#include "gpipe/Tune/PlanSearch.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace gpipe;

namespace {

/// One stage, layers of 10 + 20 + 30 + 40 FLOPs at batch 4, 32 parameter
/// bytes.
const char *kTinyModel = R"(
gpipe.model @tiny batch 4 {
  %x = gpipe.input "x" : tensor<4x8xf32>
  %a = gpipe.layer "a" -> tensor<4x8xf32> attributes {cost = #gpipe.cost<flops = 10, param_bytes = 32, activation_bytes = 128>} {
    %b = gpipe.param "a.b" zeros : tensor<8xf32>
    %0 = gpipe.add %x, %x : tensor<4x8xf32>
    gpipe.yield %0 : tensor<4x8xf32>
  }
  %b = gpipe.layer "b" -> tensor<4x8xf32> attributes {cost = #gpipe.cost<flops = 20, param_bytes = 0, activation_bytes = 128>} {
    %0 = gpipe.relu %a : tensor<4x8xf32>
    gpipe.yield %0 : tensor<4x8xf32>
  }
  %c = gpipe.layer "c" -> tensor<4x8xf32> attributes {cost = #gpipe.cost<flops = 30, param_bytes = 0, activation_bytes = 128>} {
    %0 = gpipe.tanh %b : tensor<4x8xf32>
    gpipe.yield %0 : tensor<4x8xf32>
  }
  %d = gpipe.layer "d" -> tensor<f32> attributes {cost = #gpipe.cost<flops = 40, param_bytes = 0, activation_bytes = 4>} {
    %0 = gpipe.mse_loss %c, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    gpipe.yield %0 : tensor<f32>
  }
  gpipe.return %d : tensor<f32>
}
)";

/// The profile of one device running the whole model in `microbatches`
/// micro-batches of 4 / M rows, where a forward of the step costs
/// 2 us/FLOP x 100 FLOPs + 5 us per micro-batch (reading the 32 parameter
/// bytes), a backward 3 us/FLOP + 7 us, the optimizer 64 us (2 us per
/// parameter byte) and the host 40 us.
std::string profile(unsigned microbatches) {
  double forward = 2 * 100 + 5 * microbatches;
  double backward = 3 * 100 + 7 * microbatches;
  std::string rows;
  for (unsigned m = 0; m < microbatches; ++m)
    rows += (m ? ", " : "") + std::to_string(4 / microbatches);
  return R"({"format": "gpipe-profile", "version": 1, "stages": 1,
    "remat": "none", "step_us": 1040, "makespan_us": 1000,
    "microbatch_rows": [)" +
         rows + R"(], "devices": [{"forward_us_per_row": )" +
         std::to_string(forward / 4) + R"(, "backward_us_per_row": )" +
         std::to_string(backward / 4) +
         R"(, "recompute_us_per_row": 0, "load_us_per_row": 0,
    "optimizer_us": 64, "send_us": 0, "recv_us": 0}]})";
}

} // namespace

TEST(TuneCalibration, RecoversPerFlopAndPerParameterByteCosts) {
  TuneCosts costs;
  ASSERT_EQ(calibrateOnProfiles(kTinyModel, {profile(1), profile(4)}, 2, costs),
            "");
  EXPECT_NEAR(costs.forwardUsPerFlop, 2.0, 1e-9);
  EXPECT_NEAR(costs.forwardUsPerParamByte, 5.0 / 32, 1e-9);
  EXPECT_NEAR(costs.backwardUsPerFlop, 3.0, 1e-9);
  EXPECT_NEAR(costs.backwardUsPerParamByte, 7.0 / 32, 1e-9);
  EXPECT_NEAR(costs.optimizerUsPerParamByte, 2.0, 1e-12);
  EXPECT_NEAR(costs.hostUs, 40.0, 1e-12);
}

TEST(TuneCalibration, OneProfileCannotSeparateTheTerms) {
  // 205 us of forward over 100 FLOPs: everything per FLOP.
  TuneCosts costs;
  ASSERT_EQ(calibrateOnProfiles(kTinyModel, {profile(1)}, 2, costs), "");
  EXPECT_NEAR(costs.forwardUsPerFlop, 2.05, 1e-9);
  EXPECT_EQ(costs.forwardUsPerParamByte, 0.0);
}

TEST(TuneCalibration, Errors) {
  TuneCosts costs;
  EXPECT_EQ(calibrateOnProfiles(kTinyModel, {}, 2, costs),
            "expected at least one profile");
  EXPECT_EQ(calibrateOnProfiles(kTinyModel, {profile(1), "{}"}, 2, costs),
            "profile 2: expected 'stages', 'microbatch_rows' and 'remat' (a "
            "profile written by gpipe-run --profile)");
  std::string threeStages = profile(1);
  threeStages.replace(threeStages.find("\"stages\": 1"), 11, "\"stages\": 3");
  EXPECT_EQ(calibrateOnProfiles(kTinyModel, {threeStages}, 2, costs),
            "profile 1: the profile has 1 stage(s) but the schedule has 3: "
            "profile the same number of stages");
}

TEST(TunePlanFile, RoundTrip) {
  PlanFile written;
  written.plan = {4,
                  2,
                  16,
                  schedule::ScheduleKind::OneFOneB,
                  RematPolicy::ExceptLast,
                  PartitionObjective::Bottleneck,
                  512};
  written.memoryCap = "2GiB";
  written.predictedStepUs = 1234.5;
  PlanFile read;
  ASSERT_EQ(readPlanFile(writePlanFile(written), read), "");
  EXPECT_EQ(describePlan(read.plan), describePlan(written.plan));
  EXPECT_EQ(describePlan(read.plan),
            "K=4 R=2 M=16 1f1b remat=except-last bottleneck");
  EXPECT_EQ(read.plan.batchSize, 512);
  EXPECT_EQ(read.memoryCap, "2GiB");
  EXPECT_EQ(read.predictedStepUs, 1234.5);
}

TEST(TunePlanFile, RefusesWhatIsNotAPlan) {
  PlanFile read;
  EXPECT_EQ(readPlanFile("[]", read),
            "expected an object with \"format\": \"gpipe-plan\" and "
            "\"version\": 1 (a plan written by gpipe-tune)");
  std::string plan = writePlanFile({});
  EXPECT_EQ(readPlanFile(plan, read),
            "expected a positive integer 'batch_size'");
  PlanFile valid;
  valid.plan.batchSize = 8;
  std::string text = writePlanFile(valid);
  text.replace(text.find("\"stages\": 1"), 11, "\"stages\": 0");
  EXPECT_EQ(readPlanFile(text, read), "expected a positive integer 'stages'");
}
