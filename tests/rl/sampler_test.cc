#include <gtest/gtest.h>

#include "rl/algo/sampler.h"
#include "rl/policy/policy.h"
#include "rl/tasks/tokenizer.h"

namespace skyrl::rl {
namespace {

class SamplerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cfg_.vocab = Tokenizer::kVocab;
    cfg_.layers = 1;
    cfg_.d_model = 32;
    cfg_.heads = 2;
    cfg_.max_len = 16;
    cfg_.init_std = 0.3;  // a peaked, non-uniform distribution
    comm_ = MakeSingleRankCollective();
    policy_ = *Policy::Create(cfg_, comm_.get(), InitFullParameters(cfg_, 11));
    prompts_ = *LeftPad({*Tokenizer::EncodePrompt("123"), *Tokenizer::EncodePrompt("45"),
                         *Tokenizer::EncodePrompt("6789"), *Tokenizer::EncodePrompt("0")},
                        Tokenizer::kPad);
  }
  absl::StatusOr<Rollout> Gen(SamplingParams sp, uint64_t seed) {
    return Generate(*policy_, prompts_, sp, Tokenizer::kEos, Tokenizer::kPad, seed);
  }

  PolicyConfig cfg_;
  std::unique_ptr<Collective> comm_;
  std::unique_ptr<Policy> policy_;
  PromptBatch prompts_;
};

TEST_F(SamplerTest, LeftPadsToTheLongestPrompt) {
  EXPECT_EQ(prompts_.tokens.size(1), 6);
  EXPECT_EQ(prompts_.tokens[3][0].item<int64_t>(), Tokenizer::kPad);
  EXPECT_EQ(prompts_.tokens[3][3].item<int64_t>(), Tokenizer::kBos);
  EXPECT_FALSE(prompts_.valid[3][2].item<bool>());
  EXPECT_TRUE(prompts_.valid[2][0].item<bool>());
}

TEST_F(SamplerTest, SameSeedSameOutputOtherSeedOtherOutput) {
  SamplingParams sp{1.0, 1.0, 8};
  auto a = Gen(sp, 42), b = Gen(sp, 42), c = Gen(sp, 43);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << a.status();
  EXPECT_TRUE(torch::equal(a->response, b->response));
  EXPECT_TRUE(torch::equal(a->logprobs, b->logprobs));
  EXPECT_FALSE(torch::equal(a->response, c->response));
}

TEST_F(SamplerTest, LogprobsMatchTheTrainersRecomputation) {
  SamplingParams sp{0.7, 1.0, 6};
  auto r = Gen(sp, 5);
  ASSERT_TRUE(r.ok()) << r.status();
  torch::NoGradGuard no_grad;
  torch::Tensor lp = ResponseLogprobs(*policy_, r->sequences, r->valid, r->prompt_len, 0.7);
  EXPECT_TRUE(torch::allclose(lp * r->mask, r->logprobs, 1e-4, 1e-5));
  EXPECT_TRUE((r->logprobs <= 0).all().item<bool>());
}

TEST_F(SamplerTest, MasksEverythingAfterEos) {
  SamplingParams sp{1.5, 1.0, 8};  // hot, so that EOS shows up at different places
  auto r = Gen(sp, 3);
  ASSERT_TRUE(r.ok()) << r.status();
  auto ids = r->ResponseIds();
  for (int64_t b = 0; b < r->response.size(0); ++b) {
    bool ended = false;
    for (int64_t t = 0; t < r->response.size(1); ++t) {
      const int64_t tok = r->response[b][t].item<int64_t>();
      const float m = r->mask[b][t].item<float>();
      if (ended) {
        EXPECT_EQ(tok, Tokenizer::kPad);
        EXPECT_EQ(m, 0.0f);
        EXPECT_EQ(r->logprobs[b][t].item<float>(), 0.0f);
      } else {
        EXPECT_EQ(m, 1.0f);
      }
      ended |= tok == Tokenizer::kEos;
    }
    EXPECT_EQ(static_cast<int64_t>(ids[b].size()), r->mask[b].sum().item<int64_t>());
  }
}

TEST_F(SamplerTest, TinyTopPIsGreedy) {
  auto greedy = Gen({0.0, 1.0, 6}, 1);
  auto nucleus = Gen({1.0, 1e-6, 6}, 2);
  ASSERT_TRUE(greedy.ok() && nucleus.ok());
  EXPECT_TRUE(torch::equal(greedy->response, nucleus->response));
  // Only one token survives the filter, so its log-prob under the sampling distribution is 0.
  EXPECT_NEAR(nucleus->logprobs.abs().max().item<double>(), 0.0, 1e-6);
}

TEST(TopPFilter, KeepsTheSmallestNucleus) {
  // probs 0.5, 0.3, 0.15, 0.05 (in a shuffled order).
  torch::Tensor logits = torch::log(torch::tensor({{0.15f, 0.5f, 0.05f, 0.3f}}));
  auto kept = [&](double p) { return TopPFilter(logits, p).isfinite()[0]; };
  EXPECT_TRUE(torch::equal(kept(0.4), torch::tensor({false, true, false, false})));
  EXPECT_TRUE(torch::equal(kept(0.7), torch::tensor({false, true, false, true})));
  EXPECT_TRUE(torch::equal(kept(0.8), torch::tensor({false, true, false, true})));
  EXPECT_TRUE(torch::equal(kept(0.81), torch::tensor({true, true, false, true})));
  EXPECT_TRUE(torch::equal(kept(1.0), torch::tensor({true, true, true, true})));
}

TEST_F(SamplerTest, TopPSamplesStayInTheNucleus) {
  // With one prompt repeated, the first token's nucleus is known from the logits.
  PromptBatch one =
      *LeftPad(std::vector<std::vector<int>>(64, *Tokenizer::EncodePrompt("12")), Tokenizer::kPad);
  torch::Tensor logits;
  {
    torch::NoGradGuard no_grad;
    logits = policy_->Forward(one.tokens.narrow(0, 0, 1), one.valid.narrow(0, 0, 1)).select(1, -1);
  }
  torch::Tensor allowed = TopPFilter(logits, 0.6).isfinite()[0];
  ASSERT_LT(allowed.sum().item<int64_t>(), cfg_.vocab)
      << "the test wants a nucleus smaller than the vocabulary";
  auto r = Generate(*policy_, one, {1.0, 0.6, 1}, Tokenizer::kEos, Tokenizer::kPad, 9);
  ASSERT_TRUE(r.ok()) << r.status();
  for (int64_t b = 0; b < 64; ++b) EXPECT_TRUE(allowed[r->response[b][0].item<int64_t>()].item<bool>());
}

TEST_F(SamplerTest, BadParametersNameTheField) {
  auto r = Gen({1.0, 0.0, 4}, 1);
  EXPECT_NE(r.status().message().find("generator.sampling_params.top_p"), absl::string_view::npos);
  r = Gen({-1.0, 1.0, 4}, 1);
  EXPECT_NE(r.status().message().find("temperature"), absl::string_view::npos);
  r = Gen({1.0, 1.0, 11}, 1);  // 6 + 11 > max_len 16
  EXPECT_NE(r.status().message().find("max_generate_length"), absl::string_view::npos) << r.status();
}

}  // namespace
}  // namespace skyrl::rl
