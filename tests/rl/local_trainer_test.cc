#include <gtest/gtest.h>

#include <filesystem>

#include "rl/roles/trainer_shard.h"
#include "rl/tasks/tokenizer.h"
#include "rl/train/job_config.h"
#include "rl/train/local_trainer.h"

namespace skyrl::rl {
namespace {

// A tiny run: about 2 s on an idle core (seeds 3, 4, 5 end at 0.51, 0.98, 0.77 from ~0.02).
JobConfig Tiny() {
  auto c = ParseJobConfig(R"(
trainer:
  steps: 50
  train_batch_size: 16
  seed: 3
  num_threads: 1
  model: {layers: 1, d_model: 64, heads: 2, max_len: 10, mlp_hidden: 128}
  algorithm: {group_size: 8, lr: 0.003, kl_coef: 0.001, mini_batches: 2}
generator:
  sampling_params: {temperature: 1.0, max_generate_length: 4}
environment: {task: copy, min_digits: 2, max_digits: 2}
)",
                          "tiny");
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

TEST(LocalGrpo, AShortRunBeatsTheRandomPolicy) {
  std::vector<int> seen;
  auto run = RunLocalGrpo(Tiny(), [&](const StepMetrics& m) { seen.push_back(m.step); });
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->steps, 50);
  EXPECT_EQ(seen.size(), 50u);
  EXPECT_EQ(seen.back(), 50);
  EXPECT_LT(run->baseline_reward, 0.15) << "a random policy rarely copies";
  EXPECT_GT(run->final_reward, run->baseline_reward + 0.25)
      << "baseline " << run->baseline_reward << " final " << run->final_reward;
  for (const StepMetrics& m : run->history) {
    EXPECT_GT(m.response_tokens, 0);
    EXPECT_GE(m.kl, 0.0);
    EXPECT_NE(FormatStep(m).find("reward"), std::string::npos);
  }
}

TEST(LocalGrpo, SameConfigSameNumbers) {
  JobConfig c = Tiny();
  c.trainer.steps = 3;
  auto a = RunLocalGrpo(c, nullptr);
  auto b = RunLocalGrpo(c, nullptr);
  ASSERT_TRUE(a.ok() && b.ok());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(a->history[i].mean_reward, b->history[i].mean_reward);
    EXPECT_EQ(a->history[i].loss, b->history[i].loss);
    EXPECT_EQ(a->history[i].kl, b->history[i].kl);
  }
}

TEST(LocalGrpo, TensorParallelRunMatchesTp1) {
  JobConfig c = Tiny();
  c.trainer.steps = 4;
  auto one = RunLocalGrpo(c, nullptr);
  c.trainer.tp_size = 2;
  std::vector<StepMetrics> seen;
  auto two = RunLocalGrpo(c, [&](const StepMetrics& m) { seen.push_back(m); });
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(two.ok()) << two.status();
  ASSERT_EQ(seen.size(), 4u) << "one progress line per step, from rank 0 only";
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(two->history[i].mean_reward, one->history[i].mean_reward) << "step " << i + 1;
    EXPECT_NEAR(two->history[i].loss, one->history[i].loss, 1e-4) << "step " << i + 1;
    EXPECT_NEAR(two->history[i].kl, one->history[i].kl, 1e-4) << "step " << i + 1;
    EXPECT_NEAR(two->history[i].grad_norm, one->history[i].grad_norm, 1e-3 * one->history[i].grad_norm);
  }
}

TEST(LocalGrpo, RefusesBadTensorParallelAndTooLongSequences) {
  JobConfig c = Tiny();
  c.trainer.tp_size = 3;  // 2 heads
  EXPECT_NE(RunLocalGrpo(c, nullptr).status().message().find("trainer.tp_size: 3 does not divide"),
            absl::string_view::npos)
      << RunLocalGrpo(c, nullptr).status();
  c = Tiny();
  c.generator.max_generate_length = 7;  // 4-token prompt + 7 > max_len 10
  EXPECT_NE(RunLocalGrpo(c, nullptr).status().message().find("max_generate_length"), absl::string_view::npos);
}

TEST(LocalGrpo, CheckpointsResumeIntoATrainerShard) {
  JobConfig c = Tiny();
  c.trainer.steps = 3;
  c.trainer.ckpt_interval = 2;
  const auto dir =
      std::filesystem::temp_directory_path() / ("skyrl_local_ckpt_" + std::to_string(::getpid()));
  c.trainer.output_dir = dir.string();
  auto run = RunLocalGrpo(c, nullptr, 0, /*write_checkpoint=*/true);
  ASSERT_TRUE(run.ok()) << run.status();
  TrainerShardOptions o;
  o.model = c.trainer.model;
  o.model.vocab = Tokenizer::kVocab;
  o.grpo.group_size = c.trainer.algorithm.group_size;
  auto comm = MakeSingleRankCollective();
  auto t = *TrainerShard::Create(o, comm.get());
  ASSERT_TRUE(t->Load(dir.string()).ok());
  EXPECT_EQ(t->version(), 3) << "the save at the end replaces the one at step 2";
  std::filesystem::remove_all(dir);
}

TEST(LocalGrpo, AsyncTrainsOnOneStepOldSamplesAndDropsStalerOnes) {
  JobConfig c = Tiny();
  c.trainer.async_enabled = true;
  c.trainer.max_staleness = 1;
  auto run = RunLocalGrpo(c, nullptr);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->history[0].staleness, 0) << "the first step's samples come from the initial weights";
  for (size_t i = 1; i < run->history.size(); ++i)
    EXPECT_EQ(run->history[i].staleness, 1) << "step " << i + 1;
  EXPECT_EQ(run->dropped_samples, 0);
  EXPECT_GT(run->final_reward, run->baseline_reward + 0.25)
      << "baseline " << run->baseline_reward << " final " << run->final_reward;

  // A bound of 0 drops samples generated ahead. A dropped step does not move the trainer's
  // version, so the next step's samples (generated with the synced weights) are fresh again:
  // steps 2 and 4 are dropped, 1 and 3 trained on.
  c.trainer.steps = 4;
  c.trainer.max_staleness = 0;
  auto strict = RunLocalGrpo(c, nullptr);
  ASSERT_TRUE(strict.ok()) << strict.status();
  const int64_t per_step = c.trainer.train_batch_size * c.trainer.algorithm.group_size;
  EXPECT_EQ(strict->dropped_samples, 2 * per_step);
  EXPECT_EQ(strict->history[1].dropped_samples, per_step);
  EXPECT_EQ(strict->history[1].loss, 0.0);
  EXPECT_EQ(strict->history[2].staleness, 0);
  EXPECT_EQ(strict->history[2].dropped_samples, 0);
  EXPECT_NE(strict->history[2].loss, 0.0);
  EXPECT_EQ(strict->history[3].dropped_samples, per_step);

  c.trainer.tp_size = 2;
  EXPECT_NE(RunLocalGrpo(c, nullptr).status().message().find("trainer.async.enabled"),
            absl::string_view::npos);
}

}  // namespace
}  // namespace skyrl::rl
