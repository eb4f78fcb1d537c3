#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "rl/algo/checkpoint.h"
#include "rl/algo/grpo.h"
#include "rl/collective/in_process_collective.h"

namespace skyrl::rl {
namespace {

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("skyrl_ckpt_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    cfg_.vocab = 18;
    cfg_.layers = 1;
    cfg_.d_model = 16;
    cfg_.heads = 2;
    cfg_.max_len = 8;
    tokens_ = torch::tensor({{1, 5, 6, 3, 7, 2}, {1, 8, 9, 3, 4, 4}}, torch::kInt64);
    batch_.prompt_len = 4;
    batch_.sequences = tokens_;
    batch_.valid = tokens_.ne(0);
    batch_.mask = torch::ones({2, 2});
    batch_.advantages = torch::tensor({1.0f, -1.0f});
    batch_.ref_logprobs = torch::full({2, 2}, -3.0f);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
  PolicyConfig cfg_;
  torch::Tensor tokens_;
  TrainBatch batch_;
  GrpoParams grpo_;
  OptimParams optim_;
};

TEST_F(CheckpointTest, RoundTripRestoresParametersAndOptimizerState) {
  auto comm = MakeSingleRankCollective();
  const NamedTensors init = InitFullParameters(cfg_, 4);
  auto a = *Policy::Create(cfg_, comm.get(), init);
  auto la = *GrpoLearner::Create(a.get(), grpo_, optim_, 1.0);
  ASSERT_TRUE(la->Update(batch_).ok());
  const std::string path = ShardCheckpointPath(dir_.string(), 0, 1);
  ASSERT_TRUE(SaveShardCheckpoint(path, *a, &la->optimizer(), 7).ok());

  // A fresh policy from other weights, loaded from the file.
  auto b = *Policy::Create(cfg_, comm.get(), InitFullParameters(cfg_, 5));
  auto lb = *GrpoLearner::Create(b.get(), grpo_, optim_, 1.0);
  auto step = LoadShardCheckpoint(path, *b, &lb->optimizer());
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 7);
  for (size_t i = 0; i < a->parameters().size(); ++i) {
    EXPECT_TRUE(torch::equal(a->parameters()[i].second, b->parameters()[i].second))
        << a->parameters()[i].first;
  }
  // Same Adam moments: the next update is identical.
  ASSERT_TRUE(la->Update(batch_).ok());
  ASSERT_TRUE(lb->Update(batch_).ok());
  for (size_t i = 0; i < a->parameters().size(); ++i) {
    EXPECT_TRUE(torch::allclose(a->parameters()[i].second, b->parameters()[i].second, 1e-6, 1e-7))
        << a->parameters()[i].first;
  }
}

TEST_F(CheckpointTest, OneFilePerRankAndMismatchesAreRefused) {
  const NamedTensors full = InitFullParameters(cfg_, 4);
  auto group = MakeInProcessGroup(2);
  std::vector<std::thread> threads;
  std::vector<absl::Status> st(2);
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto p = *Policy::Create(cfg_, group[r].get(), *ShardParameters(cfg_, full, 2, r));
      st[r] = SaveShardCheckpoint(ShardCheckpointPath(dir_.string(), r, 2), *p, nullptr, 3);
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(st[0].ok() && st[1].ok()) << st[0] << st[1];
  EXPECT_TRUE(std::filesystem::exists(dir_ / "rank-0-of-2.pt"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "rank-1-of-2.pt"));

  // A TP=1 policy cannot take a TP=2 shard.
  auto comm = MakeSingleRankCollective();
  auto single = *Policy::Create(cfg_, comm.get(), full);
  auto s = LoadShardCheckpoint(ShardCheckpointPath(dir_.string(), 1, 2), *single, nullptr);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition) << s.status();
  EXPECT_NE(s.status().message().find("tp_size is 2 in the file but 1 here"), absl::string_view::npos)
      << s.status();
  // Nor another model shape.
  ASSERT_TRUE(SaveShardCheckpoint(ShardCheckpointPath(dir_.string(), 0, 1), *single, nullptr, 1).ok());
  PolicyConfig other = cfg_;
  other.layers = 2;
  auto deeper = *Policy::Create(other, comm.get(), InitFullParameters(other, 1));
  s = LoadShardCheckpoint(ShardCheckpointPath(dir_.string(), 0, 1), *deeper, nullptr);
  EXPECT_NE(s.status().message().find("layers is 1 in the file but 2 here"), absl::string_view::npos)
      << s.status();

  EXPECT_EQ(LoadShardCheckpoint((dir_ / "none.pt").string(), *single, nullptr).status().code(),
            absl::StatusCode::kNotFound);
  std::ofstream(dir_ / "junk.pt") << "not an archive";
  EXPECT_EQ(LoadShardCheckpoint((dir_ / "junk.pt").string(), *single, nullptr).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(TensorBytes, RoundTripKeepsNamesOrderDtypesAndShapes) {
  NamedTensors in = {{"sequences", torch::tensor({{1, 2, 3}, {4, 5, 6}}, torch::kInt64)},
                     {"valid", torch::tensor({true, false})},
                     {"model.layers.0.self_attn.qkv_proj.weight", torch::randn({6, 2})},
                     {"a__b/c", torch::zeros({0})}};
  auto bytes = EncodeTensors(in);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto out = DecodeTensors(*bytes);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ((*out)[i].first, in[i].first);
    EXPECT_EQ((*out)[i].second.scalar_type(), in[i].second.scalar_type());
    EXPECT_TRUE(torch::equal((*out)[i].second, in[i].second)) << in[i].first;
  }
  EXPECT_EQ(DecodeTensors("garbage").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeTensors(bytes->substr(0, bytes->size() / 2)).status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace skyrl::rl
