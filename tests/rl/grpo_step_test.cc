#include <gtest/gtest.h>

#include "rl/policy/policy.h"
#include "rl/tasks/tokenizer.h"
#include "rl/train/grpo_step.h"

namespace skyrl::rl {
namespace {

TEST(GrpoStep, PiecesComposeAndCrossTheWireUnchanged) {
  const Task& copy = **FindTask("copy");
  std::mt19937_64 rng(PromptRngSeed(1));
  auto prompts = MakePrompts(copy, {3, 3}, 4, 3, rng);
  ASSERT_TRUE(prompts.ok()) << prompts.status();
  ASSERT_EQ(prompts->examples.size(), 12u);
  EXPECT_EQ(prompts->examples[0].prompt, prompts->examples[2].prompt) << "groups are contiguous";
  EXPECT_EQ(prompts->batch.tokens.size(0), 12);

  PolicyConfig c;
  c.vocab = Tokenizer::kVocab;
  c.layers = 1;
  c.d_model = 16;
  c.heads = 2;
  c.max_len = 12;
  auto comm = MakeSingleRankCollective();
  auto policy = *Policy::Create(c, comm.get(), InitFullParameters(c, 1));
  auto rollout =
      Generate(*policy, prompts->batch, {1.0, 1.0, 4}, Tokenizer::kEos, Tokenizer::kPad, SamplerSeed(1, 1));
  ASSERT_TRUE(rollout.ok()) << rollout.status();

  auto scored = ScoreRollout(copy, prompts->examples, *rollout);
  ASSERT_TRUE(scored.ok()) << scored.status();
  ASSERT_EQ(scored->rewards.size(), 12u);
  EXPECT_EQ(scored->response_tokens, static_cast<int64_t>(rollout->mask.sum().item<double>()));
  std::vector<Example> fewer(prompts->examples.begin(), prompts->examples.end() - 1);
  EXPECT_EQ(ScoreRollout(copy, fewer, *rollout).status().code(), absl::StatusCode::kInvalidArgument);

  GrpoParams g;
  g.group_size = 3;
  auto batch = MakeTrainBatch(*rollout, *scored, torch::Tensor(), g);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_NEAR(batch->advantages.view({4, 3}).sum(1).abs().max().item<double>(), 0.0, 1e-5);

  auto rb = EncodeRollout(*rollout);
  ASSERT_TRUE(rb.ok());
  auto r2 = DecodeRollout(*rb);
  ASSERT_TRUE(r2.ok()) << r2.status();
  EXPECT_EQ(r2->prompt_len, rollout->prompt_len);
  EXPECT_TRUE(torch::equal(r2->sequences, rollout->sequences));
  EXPECT_TRUE(torch::equal(r2->logprobs, rollout->logprobs));
  EXPECT_TRUE(torch::equal(r2->mask, rollout->mask));

  auto bb = EncodeTrainBatch(*batch);
  ASSERT_TRUE(bb.ok());
  auto b2 = DecodeTrainBatch(*bb);
  ASSERT_TRUE(b2.ok()) << b2.status();
  EXPECT_TRUE(torch::equal(b2->advantages, batch->advantages));
  EXPECT_FALSE(b2->ref_logprobs.defined());
  EXPECT_EQ(DecodeTrainBatch(*rb).status().code(), absl::StatusCode::kDataLoss) << "a rollout is not a batch";
}

}  // namespace
}  // namespace skyrl::rl
