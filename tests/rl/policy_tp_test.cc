// TP = 2 and 4 (threads as ranks; in-process and TCP collectives) against TP = 1 on the same full
// weights: logits, gradients (gathered), the global gradient norm, and one whole GRPO update.
#include <gtest/gtest.h>

#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"

#include "rl/algo/grpo.h"
#include "rl/collective/in_process_collective.h"
#include "tests/rl/groups.h"
#include "rl/job/sync_layout.h"
#include "rl/policy/policy.h"
#include "weight_sync/plan/layout.h"
#include "weight_sync/plan/model.h"

namespace skyrl::rl {
namespace {

PolicyConfig SmallConfig() {
  PolicyConfig c;
  c.vocab = 18;
  c.layers = 2;
  c.d_model = 32;
  c.heads = 4;
  c.max_len = 12;
  c.mlp_hidden = 48;
  c.init_std = 0.1;  // larger than usual so that every path carries signal
  return c;
}

// A batch with left padding in one row.
std::pair<torch::Tensor, torch::Tensor> Batch() {
  torch::Tensor tokens = torch::tensor(
      {{1, 5, 6, 7, 3, 9, 2}, {0, 0, 1, 8, 3, 4, 4}, {1, 13, 12, 11, 3, 13, 12}}, torch::kInt64);
  return {tokens, tokens.ne(0)};
}

// A loss that weighs every logit differently, so every gradient entry matters.
torch::Tensor Loss(const torch::Tensor& logits) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(99);
  torch::Tensor w = at::normal(0.0, 1.0, logits.sizes(), gen, torch::kFloat32);
  return (logits * w).sum() + logits.pow(2).mean();
}

NamedTensors Grads(const Policy& p) {
  NamedTensors g;
  for (const auto& [n, t] : p.parameters()) g.emplace_back(n, t.grad().clone());
  return g;
}

void ExpectClose(const NamedTensors& a, const NamedTensors& b, double tol, const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].first, b[i].first);
    const double scale = std::max(1.0, a[i].second.abs().max().item<double>());
    const double diff = (a[i].second - b[i].second).abs().max().item<double>();
    EXPECT_LE(diff, tol * scale) << what << ": " << a[i].first;
  }
}

class TensorParallel : public ::testing::TestWithParam<std::tuple<int, testing::GroupKind>> {};

TEST_P(TensorParallel, ForwardAndBackwardEqualTp1) {
  const int tp = std::get<0>(GetParam());
  const PolicyConfig cfg = SmallConfig();
  const NamedTensors full = InitFullParameters(cfg, 5);
  auto [tokens, valid] = Batch();

  auto single = MakeSingleRankCollective();
  auto ref = *Policy::Create(cfg, single.get(), full);
  torch::Tensor ref_logits = ref->Forward(tokens, valid);
  Loss(ref_logits).backward();
  const NamedTensors ref_grads = Grads(*ref);
  const double ref_norm = *ClipGradNormTensorParallel(*ref, 0);

  auto group = testing::MakeGroup(std::get<1>(GetParam()), tp);
  ASSERT_EQ(group.size(), static_cast<size_t>(tp));
  std::vector<torch::Tensor> logits(tp);
  std::vector<NamedTensors> grads(tp);
  std::vector<double> norms(tp);
  std::vector<std::string> errors(tp);
  std::vector<std::thread> threads;
  for (int r = 0; r < tp; ++r) {
    threads.emplace_back([&, r] {
      auto shard = ShardParameters(cfg, full, tp, r);
      if (!shard.ok()) return void(errors[r] = shard.status().ToString());
      auto p = Policy::Create(cfg, group[r].get(), *shard);
      if (!p.ok()) return void(errors[r] = p.status().ToString());
      logits[r] = (*p)->Forward(tokens, valid);
      Loss(logits[r]).backward();
      grads[r] = Grads(**p);
      auto n = ClipGradNormTensorParallel(**p, 0);
      if (!n.ok()) return void(errors[r] = n.status().ToString());
      norms[r] = *n;
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < tp; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;

  for (int r = 0; r < tp; ++r) {
    EXPECT_TRUE(torch::allclose(logits[r], ref_logits, 1e-4, 1e-5)) << "rank " << r;
    EXPECT_TRUE(torch::equal(logits[r], logits[0])) << "ranks must agree bitwise";
    EXPECT_NEAR(norms[r], ref_norm, 1e-4 * ref_norm) << "the norm is the whole model's";
  }
  auto gathered = GatherShards(cfg, grads);
  ASSERT_TRUE(gathered.ok()) << gathered.status();
  ExpectClose(*gathered, ref_grads, 1e-4, "gradient");
  // Replicated parameters' gradients are the same on every rank.
  for (size_t i = 0; i < grads[0].size(); ++i) {
    if (ref->specs()[i].split_dim >= 0) continue;
    for (int r = 1; r < tp; ++r)
      EXPECT_TRUE(torch::equal(grads[r][i].second, grads[0][i].second)) << grads[0][i].first;
  }
}

TEST_P(TensorParallel, OneGrpoUpdateEqualsTp1) {
  const int tp = std::get<0>(GetParam());
  const PolicyConfig cfg = SmallConfig();
  const NamedTensors full = InitFullParameters(cfg, 6);
  auto [tokens, valid] = Batch();
  TrainBatch batch;
  batch.prompt_len = 4;
  batch.sequences = tokens;
  batch.valid = valid;
  batch.mask = torch::ones({3, 3}, torch::kFloat32);
  batch.mask[2][2] = 0;
  batch.advantages = torch::tensor({1.0f, -0.5f, 0.25f});
  batch.ref_logprobs = torch::full({3, 3}, -2.0f);
  GrpoParams grpo;
  grpo.group_size = 3;
  grpo.kl_coef = 0.1;
  OptimParams optim;
  optim.lr = 0.01;
  optim.max_grad_norm = 0.5;  // clipping active: the norm must be the full model's
  optim.mini_batches = 1;
  optim.update_epochs = 2;

  auto single = MakeSingleRankCollective();
  auto ref = *Policy::Create(cfg, single.get(), full);
  auto ref_learner = *GrpoLearner::Create(ref.get(), grpo, optim, 1.0);
  auto ref_stats = ref_learner->Update(batch);
  ASSERT_TRUE(ref_stats.ok()) << ref_stats.status();
  ASSERT_GT(ref_stats->grad_norm, optim.max_grad_norm) << "the test wants clipping to happen";

  auto group = testing::MakeGroup(std::get<1>(GetParam()), tp);
  ASSERT_EQ(group.size(), static_cast<size_t>(tp));
  std::vector<NamedTensors> after(tp);
  std::vector<UpdateStats> stats(tp);
  std::vector<std::string> errors(tp);
  std::vector<std::thread> threads;
  for (int r = 0; r < tp; ++r) {
    threads.emplace_back([&, r] {
      auto p = *Policy::Create(cfg, group[r].get(), *ShardParameters(cfg, full, tp, r));
      auto learner = *GrpoLearner::Create(p.get(), grpo, optim, 1.0);
      auto s = learner->Update(batch);
      if (!s.ok()) return void(errors[r] = s.status().ToString());
      stats[r] = *s;
      after[r] = p->StateCopy();
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < tp; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    EXPECT_NEAR(stats[r].loss, ref_stats->loss, 1e-5);
    EXPECT_NEAR(stats[r].kl, ref_stats->kl, 1e-5);
    EXPECT_NEAR(stats[r].grad_norm, ref_stats->grad_norm, 1e-4 * ref_stats->grad_norm);
  }
  auto gathered = GatherShards(cfg, after);
  ASSERT_TRUE(gathered.ok()) << gathered.status();
  ExpectClose(*gathered, ref->StateCopy(), 1e-4, "parameters after the update");
  // And the update moved them.
  EXPECT_FALSE(torch::allclose((*gathered)[3].second, full[3].second));
}

INSTANTIATE_TEST_SUITE_P(Tp, TensorParallel,
                         ::testing::Combine(::testing::Values(2, 4),
                                            ::testing::Values(testing::GroupKind::kInProcess,
                                                              testing::GroupKind::kTcp)),
                         [](const auto& info) {
                           return absl::StrCat("tp", std::get<0>(info.param), "_",
                                               testing::KindName(std::get<1>(info.param)));
                         });

TEST(Sharding, RoundTripsAndSplitsFusedBlocksSeparately) {
  const PolicyConfig cfg = SmallConfig();
  const NamedTensors full = InitFullParameters(cfg, 1);
  std::vector<NamedTensors> shards;
  for (int r = 0; r < 2; ++r) shards.push_back(*ShardParameters(cfg, full, 2, r));
  auto back = GatherShards(cfg, shards);
  ASSERT_TRUE(back.ok()) << back.status();
  for (size_t i = 0; i < full.size(); ++i)
    EXPECT_TRUE(torch::equal((*back)[i].second, full[i].second)) << full[i].first;

  // Rank 1's qkv shard is [q rows 16..31; k rows 16..31; v rows 16..31] of the fused weight.
  const torch::Tensor& qkv = full[3].second;
  ASSERT_EQ(full[3].first, "model.layers.0.self_attn.qkv_proj.weight");
  torch::Tensor want = torch::cat({qkv.narrow(0, 16, 16), qkv.narrow(0, 48, 16), qkv.narrow(0, 80, 16)});
  EXPECT_TRUE(torch::equal(shards[1][3].second, want));
  // o_proj is row-parallel: columns.
  EXPECT_TRUE(torch::equal(shards[1][4].second, full[4].second.narrow(1, 16, 16)));
}

TEST(Sharding, RejectsMissingOrMisshapedParameters) {
  const PolicyConfig cfg = SmallConfig();
  NamedTensors full = InitFullParameters(cfg, 1);
  NamedTensors missing(full.begin() + 1, full.end());
  auto s = ShardParameters(cfg, missing, 2, 0);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("model.embed_tokens.weight is missing"), absl::string_view::npos)
      << s.status();
  full[4].second = torch::zeros({3, 3});
  s = ShardParameters(cfg, full, 2, 0);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("o_proj.weight has shape [3, 3], want [32, 32]"),
            absl::string_view::npos)
      << s.status();
  EXPECT_FALSE(ShardParameters(cfg, InitFullParameters(cfg, 1), 3, 0).ok()) << "3 does not divide 4 heads";
  auto single = MakeSingleRankCollective();
  EXPECT_FALSE(
      Policy::Create(cfg, single.get(), *ShardParameters(cfg, InitFullParameters(cfg, 1), 2, 0)).ok())
      << "a TP=2 shard is not a TP=1 policy";
}

// The weight-sync planner's description of the same parameters (split_dim, fused blocks)
// must pick exactly the elements ShardParameters gives each rank, in the same order.
TEST(Sharding, MatchesTheWeightSyncLayout) {
  const PolicyConfig cfg = SmallConfig();
  const NamedTensors full = InitFullParameters(cfg, 2);
  const weight_sync::Model model = PolicySyncModel(cfg);  // what the job syncs with
  for (int tp : {2, 4}) {
    weight_sync::ModelParallel mp;
    mp.tp = tp;
    auto map = weight_sync::ShardMap::Build(model, weight_sync::Layout::Of(mp));
    ASSERT_TRUE(map.ok()) << map.status();
    for (int r = 0; r < tp; ++r) {
      const NamedTensors shard = *ShardParameters(cfg, full, tp, r);
      for (size_t i = 0; i < full.size(); ++i) {
        std::vector<torch::Tensor> pieces;
        for (const weight_sync::Box& b : map->BoxesOf(static_cast<int>(i), r)) {
          torch::Tensor t = full[i].second;
          for (int d = 0; d < b.ndim; ++d) {
            const int64_t el = d == b.ndim - 1 ? 4 : 1;  // byte space: last dim in bytes
            t = t.narrow(d, b.lo[d] / el, (b.hi[d] - b.lo[d]) / el);
          }
          pieces.push_back(t.reshape({-1}));
        }
        ASSERT_FALSE(pieces.empty()) << full[i].first;
        EXPECT_TRUE(torch::equal(torch::cat(pieces), shard[i].second.reshape({-1})))
            << "tp " << tp << " rank " << r << " " << full[i].first;
      }
    }
  }
}

TEST(Policy, PaddingOnTheLeftDoesNotChangeTheLogits) {
  const PolicyConfig cfg = SmallConfig();
  auto single = MakeSingleRankCollective();
  auto p = *Policy::Create(cfg, single.get(), InitFullParameters(cfg, 3));
  torch::NoGradGuard no_grad;
  torch::Tensor a = torch::tensor({{1, 5, 6, 3}}, torch::kInt64);
  torch::Tensor b = torch::tensor({{0, 0, 1, 5, 6, 3}}, torch::kInt64);
  torch::Tensor la = p->Forward(a, a.ne(0));
  torch::Tensor lb = p->Forward(b, b.ne(0)).narrow(1, 2, 4);
  EXPECT_TRUE(torch::allclose(la, lb, 1e-5, 1e-5));
  // Causal: changing the last token leaves earlier logits alone.
  torch::Tensor c = torch::tensor({{1, 5, 6, 9}}, torch::kInt64);
  torch::Tensor lc = p->Forward(c, c.ne(0));
  EXPECT_TRUE(torch::allclose(la.narrow(1, 0, 3), lc.narrow(1, 0, 3)));
  EXPECT_FALSE(torch::allclose(la.narrow(1, 3, 1), lc.narrow(1, 3, 1)));
}

}  // namespace
}  // namespace skyrl::rl
