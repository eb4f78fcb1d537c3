// StepTimer: laps, skips and charges land in their phases, and the phases never add up to more
// than the step.
#include "rl/train/step_timer.h"

#include <gtest/gtest.h>

namespace skyrl::rl {
namespace {

TEST(StepTimerTest, ChargesLandInTheirPhasesAndTheStepCoversTheLaps) {
  const auto run_start = StepTimer::Clock::now();
  StepTimer t(run_start);
  t.Charge(StepTimer::Phase::kGenerate, 2.5);  // measured elsewhere (a generation ahead)
  t.Skip();
  t.Lap(StepTimer::Phase::kReward);
  t.Lap(StepTimer::Phase::kTrain);
  t.Lap(StepTimer::Phase::kWait);
  t.Lap(StepTimer::Phase::kSync);
  StepMetrics m;
  m.response_tokens = 100;
  t.Finish(&m);
  EXPECT_GE(m.generate_s, 2.5);
  EXPECT_LT(m.generate_s, 2.5 + 1) << "the skipped time is nobody's";
  for (double s : {m.reward_s, m.train_s, m.wait_s, m.sync_s}) EXPECT_GE(s, 0);
  EXPECT_LE(m.reward_s + m.train_s + m.wait_s + m.sync_s, m.step_s);
  EXPECT_GE(m.elapsed_s, m.step_s);
  EXPECT_EQ(m.tokens_per_s, m.step_s > 0 ? 100 / m.step_s : 0);
}

TEST(StepTimerTest, LapsAddUpInOnePhase) {
  StepTimer t(StepTimer::Clock::now());
  t.Charge(StepTimer::Phase::kSync, 1);
  t.Charge(StepTimer::Phase::kSync, 2);
  StepMetrics m;
  t.Finish(&m);
  EXPECT_GE(m.sync_s, 3);
  EXPECT_EQ(m.generate_s, 0);
  EXPECT_EQ(m.tokens_per_s, 0) << "no tokens, no rate";
}

}  // namespace
}  // namespace skyrl::rl
