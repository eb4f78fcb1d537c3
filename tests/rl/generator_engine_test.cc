#include <gtest/gtest.h>

#include <thread>

#include "rl/roles/generator_engine.h"
#include "rl/tasks/tokenizer.h"
#include "tests/rl/groups.h"

namespace skyrl::rl {
namespace {

using State = GeneratorEngine::State;
using Level = GeneratorEngine::SleepLevel;

class GeneratorEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cfg_.vocab = Tokenizer::kVocab;
    cfg_.layers = 1;
    cfg_.d_model = 32;
    cfg_.heads = 4;
    cfg_.max_len = 12;
    cfg_.init_std = 0.2;
    comm_ = MakeSingleRankCollective();
    prompts_ = *LeftPad({*Tokenizer::EncodePrompt("123"), *Tokenizer::EncodePrompt("98")}, Tokenizer::kPad);
  }
  // What a plain policy with `weights` samples: the reference for the engine's output.
  torch::Tensor Expected(const NamedTensors& weights) {
    auto p = *Policy::Create(cfg_, comm_.get(), weights);
    return Generate(*p, prompts_, params_, Tokenizer::kEos, Tokenizer::kPad, 7)->response;
  }
  absl::StatusOr<GeneratorEngine::Result> Gen(GeneratorEngine& e) {
    return e.Generate(prompts_, params_, Tokenizer::kEos, Tokenizer::kPad, 7);
  }

  PolicyConfig cfg_;
  std::unique_ptr<Collective> comm_;
  PromptBatch prompts_;
  SamplingParams params_{1.0, 1.0, 5};
};

TEST_F(GeneratorEngineTest, VersionsOnlyMoveForward) {
  auto e = *GeneratorEngine::Create(cfg_, comm_.get());
  EXPECT_EQ(e->state(), State::kEmpty);
  EXPECT_EQ(e->version(), -1);
  auto empty = Gen(*e);
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(empty.status().message().find("EMPTY"), absl::string_view::npos) << empty.status();

  const NamedTensors w1 = InitFullParameters(cfg_, 1), w2 = InitFullParameters(cfg_, 2);
  ASSERT_TRUE(e->LoadWeights(1, w1).ok());
  EXPECT_EQ(e->state(), State::kAwake);
  auto r1 = Gen(*e);
  ASSERT_TRUE(r1.ok()) << r1.status();
  EXPECT_EQ(r1->version, 1);
  EXPECT_TRUE(torch::equal(r1->rollout.response, Expected(w1)));

  EXPECT_EQ(e->LoadWeights(1, w2).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(e->LoadWeights(0, w2).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(e->LoadWeights(5, w2).ok());
  auto r2 = Gen(*e);
  EXPECT_EQ(r2->version, 5);
  EXPECT_TRUE(torch::equal(r2->rollout.response, Expected(w2)));
  EXPECT_FALSE(torch::equal(r2->rollout.response, r1->rollout.response));

  // A shard for another TP size is refused and changes nothing.
  auto half = *ShardParameters(cfg_, w1, 2, 0);
  EXPECT_EQ(e->LoadWeights(6, half).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(e->version(), 5);
}

TEST_F(GeneratorEngineTest, SleepAndWakeUp) {
  auto e = *GeneratorEngine::Create(cfg_, comm_.get());
  const NamedTensors w1 = InitFullParameters(cfg_, 1), w3 = InitFullParameters(cfg_, 3);
  EXPECT_EQ(e->Sleep(Level::kKeepWeights).code(), absl::StatusCode::kFailedPrecondition)
      << "nothing to put to sleep";
  ASSERT_TRUE(e->LoadWeights(1, w1).ok());

  // Keep: the same weights after waking up.
  ASSERT_TRUE(e->Sleep(Level::kKeepWeights).ok());
  EXPECT_EQ(e->state(), State::kAsleep);
  EXPECT_NE(Gen(*e).status().message().find("ASLEEP"), absl::string_view::npos);
  EXPECT_EQ(e->Sleep(Level::kKeepWeights).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(e->WakeUp().ok());
  EXPECT_TRUE(torch::equal(Gen(*e)->rollout.response, Expected(w1)));
  EXPECT_EQ(e->WakeUp().code(), absl::StatusCode::kFailedPrecondition);

  // Drop, and a new version arrives while asleep (weight sync during the trainer's step).
  ASSERT_TRUE(e->Sleep(Level::kDropWeights).ok());
  ASSERT_TRUE(e->LoadWeights(2, w3).ok());
  EXPECT_EQ(e->state(), State::kAsleep);
  ASSERT_TRUE(e->WakeUp().ok());
  auto r = Gen(*e);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->version, 2);
  EXPECT_TRUE(torch::equal(r->rollout.response, Expected(w3)));

  // Drop with nothing new: waking up leaves it empty until the next load.
  ASSERT_TRUE(e->Sleep(Level::kDropWeights).ok());
  ASSERT_TRUE(e->WakeUp().ok());
  EXPECT_EQ(e->state(), State::kEmpty);
  EXPECT_EQ(e->version(), 2);
  EXPECT_EQ(e->LoadWeights(2, w1).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(e->LoadWeights(3, w1).ok());
  EXPECT_EQ(e->state(), State::kAwake);
}

TEST_F(GeneratorEngineTest, Tp2EngineSamplesLikeTp1) {
  const NamedTensors w = InitFullParameters(cfg_, 4);
  const torch::Tensor want = Expected(w);
  for (testing::GroupKind kind : {testing::GroupKind::kInProcess, testing::GroupKind::kTcp}) {
    auto group = testing::MakeGroup(kind, 2);
    ASSERT_EQ(group.size(), 2u);
    std::vector<torch::Tensor> got(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        auto e = *GeneratorEngine::Create(cfg_, group[r].get());
        if (!e->LoadWeights(1, *ShardParameters(cfg_, w, 2, r)).ok()) return;
        auto res = Gen(*e);
        if (res.ok()) got[r] = res->rollout.response;
      });
    }
    for (auto& t : threads) t.join();
    ASSERT_TRUE(got[0].defined() && got[1].defined()) << testing::KindName(kind);
    EXPECT_TRUE(torch::equal(got[0], got[1])) << "both ranks of an engine sample the same tokens";
    EXPECT_TRUE(torch::equal(got[0], want)) << testing::KindName(kind);
  }
}

}  // namespace
}  // namespace skyrl::rl
