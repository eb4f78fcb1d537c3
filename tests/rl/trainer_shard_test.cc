#include <gtest/gtest.h>

#include <filesystem>

#include "rl/roles/generator_engine.h"
#include "rl/roles/trainer_shard.h"
#include "rl/tasks/tokenizer.h"

namespace skyrl::rl {
namespace {

TEST(TrainerShard, ReferenceStaysFrozenVersionsCountUpdatesAndCheckpointsRestoreThem) {
  TrainerShardOptions o;
  o.model.vocab = Tokenizer::kVocab;
  o.model.layers = 1;
  o.model.d_model = 16;
  o.model.heads = 2;
  o.model.max_len = 10;
  o.grpo.group_size = 2;
  o.optim.lr = 0.05;
  auto comm = MakeSingleRankCollective();
  auto t = *TrainerShard::Create(o, comm.get());
  EXPECT_EQ(t->version(), 0);

  auto engine = *GeneratorEngine::Create(o.model, comm.get());
  ASSERT_TRUE(engine->LoadWeights(t->version(), t->ExportShard()).ok());
  PromptBatch prompts =
      *LeftPad({*Tokenizer::EncodePrompt("12"), *Tokenizer::EncodePrompt("12")}, Tokenizer::kPad);
  auto gen = engine->Generate(prompts, {1.0, 1.0, 3}, Tokenizer::kEos, Tokenizer::kPad, 3);
  ASSERT_TRUE(gen.ok()) << gen.status();
  const Rollout& r = gen->rollout;

  auto ref0 = t->ReferenceLogprobs(r);
  ASSERT_TRUE(ref0.ok()) << ref0.status();
  TrainBatch b;
  b.prompt_len = r.prompt_len;
  b.sequences = r.sequences;
  b.valid = r.valid;
  b.mask = r.mask;
  b.advantages = torch::tensor({1.0f, -1.0f});
  b.ref_logprobs = *ref0;
  ASSERT_TRUE(t->Update(b).ok());
  ASSERT_TRUE(t->Update(b).ok());
  EXPECT_EQ(t->version(), 2);
  EXPECT_TRUE(torch::equal(*t->ReferenceLogprobs(r), *ref0)) << "the reference is the frozen initial policy";
  torch::Tensor now;
  {
    torch::NoGradGuard no_grad;
    now = ResponseLogprobs(t->policy(), r.sequences, r.valid, r.prompt_len, 1.0);
  }
  EXPECT_FALSE(torch::allclose(now, *ref0)) << "the policy moved";

  const auto dir =
      std::filesystem::temp_directory_path() / ("skyrl_trainer_shard_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(t->Save(dir.string()).ok());
  auto fresh = *TrainerShard::Create(o, comm.get());
  ASSERT_TRUE(fresh->Load(dir.string()).ok());
  EXPECT_EQ(fresh->version(), 2);
  const NamedTensors a = t->ExportShard(), c = fresh->ExportShard();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i].second, c[i].second)) << a[i].first;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace skyrl::rl
