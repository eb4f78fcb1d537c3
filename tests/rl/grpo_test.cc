#include <gtest/gtest.h>

#include <cmath>

#include "rl/algo/grpo.h"
#include "rl/algo/sampler.h"
#include "rl/collective/in_process_collective.h"

namespace skyrl::rl {
namespace {

TEST(GroupAdvantages, NormalisesWithinEachGroup) {
  torch::Tensor r = torch::tensor({1.0f, 0.0f, 0.5f, 0.5f, 0.0f, 0.2f, 0.4f, 1.0f});
  torch::Tensor a = GroupAdvantages(r, 4, 1e-6);
  ASSERT_EQ(a.size(0), 8);
  // Group 1: mean 0.5, unbiased std sqrt(1/6).
  const double s1 = std::sqrt((0.25 + 0.25 + 0 + 0) / 3.0);
  EXPECT_NEAR(a[0].item<double>(), 0.5 / (s1 + 1e-6), 1e-5);
  EXPECT_NEAR(a[1].item<double>(), -0.5 / (s1 + 1e-6), 1e-5);
  EXPECT_NEAR(a[2].item<double>(), 0.0, 1e-6);
  // Every group sums to zero.
  EXPECT_NEAR(a.view({2, 4}).sum(1).abs().max().item<double>(), 0.0, 1e-5);
  // A group where everyone scored the same carries no signal.
  torch::Tensor same = GroupAdvantages(torch::tensor({0.3f, 0.3f, 0.3f}), 3, 1e-6);
  EXPECT_EQ(same.abs().max().item<double>(), 0.0);
  EXPECT_THROW(GroupAdvantages(torch::ones({5}), 2, 1e-6), c10::Error);
}

// One token per row; ratio = exp(logp - old).
struct Case {
  double log_ratio, advantage;
  double want_loss;  // per token
  bool want_grad;    // does the token's gradient survive the clip?
};

TEST(GrpoLoss, ClipsTheRatioOnTheAdvantagesSide) {
  GrpoParams p;
  p.clip_low = 0.2;
  p.clip_high = 0.3;
  p.kl_coef = 0;
  const Case cases[] = {
      {std::log(1.5), 1.0, -1.3, false},  // above 1 + eps_high with A > 0: clipped, no gradient
      {std::log(1.5), -1.0, 1.5, true},   // A < 0: the unclipped (worse) term wins
      {std::log(0.5), -1.0, 0.8, false},  // below 1 - eps_low with A < 0: clipped
      {std::log(0.5), 1.0, -0.5, true},   // A > 0: unclipped
      {std::log(1.1), 2.0, -2.2, true},   // inside the trust region
  };
  for (const Case& c : cases) {
    torch::Tensor lp = torch::tensor({{static_cast<float>(c.log_ratio)}}).set_requires_grad(true);
    torch::Tensor old = torch::zeros({1, 1});
    LossTerms t = GrpoLoss(lp, old, torch::Tensor(), torch::tensor({static_cast<float>(c.advantage)}),
                           torch::ones({1, 1}), p);
    EXPECT_NEAR(t.loss.item<double>(), c.want_loss, 1e-5) << c.log_ratio << " " << c.advantage;
    t.loss.backward();
    EXPECT_EQ(lp.grad().abs().item<double>() > 0, c.want_grad) << c.log_ratio << " " << c.advantage;
    EXPECT_EQ(t.clip_fraction, c.want_grad ? 0.0 : 1.0);
  }
}

TEST(GrpoLoss, KlIsK3AgainstTheReference) {
  GrpoParams p;
  p.kl_coef = 0.5;
  torch::Tensor lp = torch::tensor({{-1.0f, -2.0f}}).set_requires_grad(true);
  torch::Tensor ref = torch::tensor({{-1.0f, -2.0f + static_cast<float>(std::log(2.0))}});
  // Zero advantage: the loss is the KL term alone.
  LossTerms t = GrpoLoss(lp, lp.detach(), ref, torch::zeros({1}), torch::ones({1, 2}), p);
  const double k3 = 2.0 - std::log(2.0) - 1.0;  // exp(d) - d - 1 with d = log 2
  EXPECT_NEAR(t.kl, k3 / 2, 1e-6);
  EXPECT_NEAR(t.loss.item<double>(), 0.5 * k3 / 2, 1e-6);
  t.loss.backward();
  // d/dlogp of k3 = -exp(d) + 1: zero where policy == reference, -(2 - 1) = -1 on the other.
  EXPECT_NEAR(lp.grad()[0][0].item<double>(), 0.0, 1e-7);
  EXPECT_NEAR(lp.grad()[0][1].item<double>(), 0.5 * -1.0 / 2, 1e-6);
  // k3 is never negative.
  torch::Tensor lp2 = torch::randn({4, 5});
  LossTerms t2 = GrpoLoss(lp2, lp2, torch::randn({4, 5}), torch::zeros({4}), torch::ones({4, 5}), p);
  EXPECT_GT(t2.kl, 0.0);
}

TEST(GrpoLoss, ReductionsWeighSequencesDifferently) {
  GrpoParams p;
  p.kl_coef = 0;
  // Row 0 has 1 token, row 1 has 3; ratio 1, so the per-token loss is -A.
  torch::Tensor lp = torch::zeros({2, 3});
  torch::Tensor mask = torch::tensor({{1.0f, 0.0f, 0.0f}, {1.0f, 1.0f, 1.0f}});
  torch::Tensor adv = torch::tensor({1.0f, -1.0f});
  p.reduction = LossReduction::kTokenMean;
  EXPECT_NEAR(GrpoLoss(lp, lp, torch::Tensor(), adv, mask, p).loss.item<double>(), (-1.0 + 3.0) / 4, 1e-6);
  p.reduction = LossReduction::kSequenceMean;
  EXPECT_NEAR(GrpoLoss(lp, lp, torch::Tensor(), adv, mask, p).loss.item<double>(), 0.0, 1e-6);
}

TEST(ClipGradNorm, ScalesToTheLimitAndReportsTheNormBefore) {
  PolicyConfig c;
  c.vocab = 6;
  c.layers = 1;
  c.d_model = 8;
  c.heads = 2;
  c.max_len = 4;
  auto comm = MakeSingleRankCollective();
  auto p = *Policy::Create(c, comm.get(), InitFullParameters(c, 1));
  double sq = 0;
  for (const auto& [n, t] : p->parameters()) {
    t.mutable_grad() = torch::full_like(t, 0.5);
    sq += 0.25 * t.numel();
  }
  auto norm = ClipGradNormTensorParallel(*p, 1.0);
  ASSERT_TRUE(norm.ok()) << norm.status();
  EXPECT_NEAR(*norm, std::sqrt(sq), 1e-3);
  EXPECT_NEAR(*ClipGradNormTensorParallel(*p, 0), 1.0, 1e-4) << "after clipping the norm is the limit";
  EXPECT_NEAR(*ClipGradNormTensorParallel(*p, 5.0), 1.0, 1e-4) << "below the limit nothing changes";
}

TEST(GrpoParams, BadValuesNameTheField) {
  GrpoParams g;
  g.group_size = 1;
  EXPECT_NE(ValidateGrpoParams(g).message().find("trainer.algorithm.group_size"), absl::string_view::npos);
  g = {};
  g.kl_coef = -1;
  EXPECT_NE(ValidateGrpoParams(g).message().find("trainer.algorithm.kl_coef"), absl::string_view::npos);
  OptimParams o;
  o.lr = 0;
  EXPECT_NE(ValidateOptimParams(o).message().find("trainer.algorithm.lr"), absl::string_view::npos);
}

TEST(GrpoLearner, GivenOldLogprobsReplaceTheRecomputedOnes) {
  PolicyConfig c;
  c.vocab = 10;
  c.layers = 1;
  c.d_model = 16;
  c.heads = 2;
  c.max_len = 8;
  c.init_std = 0.2;
  auto comm = MakeSingleRankCollective();
  const NamedTensors w = InitFullParameters(c, 2);
  TrainBatch b;
  b.prompt_len = 3;
  b.sequences = torch::tensor({{1, 4, 3, 5, 6}, {1, 7, 3, 8, 2}}, torch::kInt64);
  b.valid = b.sequences.ne(0);
  b.mask = torch::ones({2, 2});
  b.advantages = torch::tensor({1.0f, -1.0f});
  GrpoParams g;
  g.group_size = 2;
  g.kl_coef = 0;
  OptimParams o;
  auto run = [&](const torch::Tensor& old) {
    auto p = *Policy::Create(c, comm.get(), w);
    auto l = *GrpoLearner::Create(p.get(), g, o, 1.0);
    TrainBatch bb = b;
    bb.old_logprobs = old;
    return *l->Update(bb);
  };
  torch::Tensor current;
  {
    torch::NoGradGuard no_grad;
    auto p = *Policy::Create(c, comm.get(), w);
    current = ResponseLogprobs(*p, b.sequences, b.valid, b.prompt_len, 1.0);
  }
  const UpdateStats recomputed = run(torch::Tensor()), same = run(current), stale = run(current - 0.5);
  EXPECT_DOUBLE_EQ(recomputed.loss, same.loss) << "passing the current log-probs changes nothing";
  EXPECT_DOUBLE_EQ(recomputed.clip_fraction, 0.0);
  // Samples from a policy that liked them less: ratio e^0.5 > 1.2, clipped for A > 0.
  EXPECT_GT(stale.clip_fraction, 0.0);
  EXPECT_NE(stale.loss, recomputed.loss);
}

}  // namespace
}  // namespace skyrl::rl
