// bf16 trainer weights arriving as fp8 (MXFP8-style) rollout weights through a TCP sync.
#include <cmath>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/weight_sync/sync_harness.h"
#include "weight_sync/convert/fp8_model.h"
#include "weight_sync/convert/mxfp8.h"
#include "weight_sync/plan/hf_params.h"
#include "weight_sync/tcp/tcp_transport.h"

namespace skyrl::weight_sync {
namespace {

using ::testing::HasSubstr;

Model Trainer() {
  TransformerConfig c;
  c.layers = 2;
  c.hidden = 64;
  c.intermediate = 128;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 16;
  c.vocab = 96;
  return MakeTransformer(c);
}

bool Projections(const Param& p) { return p.name.find("proj") != std::string::npos; }

// Seeded bf16 weights of ordinary magnitudes (random bytes would be NaNs and huge values).
std::vector<std::vector<uint8_t>> Bf16Weights(const Model& m, uint64_t seed) {
  std::vector<std::vector<uint8_t>> w(m.params.size());
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 0.02f);
  for (size_t p = 0; p < w.size(); ++p) {
    w[p].resize(m.params[p].NumBytes());
    for (size_t i = 0; i + 1 < w[p].size(); i += 2) {
      uint16_t b = FloatToBf16(normal(rng) * (1 + (i / 64) % 7));
      std::memcpy(&w[p][i], &b, 2);
    }
  }
  return w;
}

// The whole trainer model converted at once: what every receiver must hold a slice of.
std::vector<std::vector<uint8_t>> ConvertWhole(const Fp8Conversion& conv,
                                               const std::vector<std::vector<uint8_t>>& w) {
  std::vector<std::vector<uint8_t>> out(conv.model.params.size());
  for (size_t q = 0; q < out.size(); ++q) {
    const std::vector<uint8_t>& src = w[conv.source[q]];
    if (conv.kind[q] == Fp8Conversion::Kind::kCopy) {
      out[q] = src;
      continue;
    }
    const size_t n = src.size() / 2;
    std::vector<uint16_t> bf16(n);
    std::memcpy(bf16.data(), src.data(), src.size());
    std::vector<uint8_t> data(n), scales(n / kMxBlock);
    EXPECT_TRUE(QuantizeMxfp8(bf16, absl::MakeSpan(data), absl::MakeSpan(scales)).ok());
    out[q] = conv.kind[q] == Fp8Conversion::Kind::kData ? data : scales;
  }
  return out;
}

TEST(Fp8SyncTest, ReceiversGetTheirSliceOfTheConvertedModel) {
  Model trainer = Trainer();
  auto conv = MakeFp8Conversion(trainer, Projections);
  ASSERT_TRUE(conv.ok()) << conv.status();
  Layout senders = Layout::Of(ModelParallel{.tp = 2, .pp = 2});
  Layout receivers{{ModelParallel{.tp = 1}, ModelParallel{.tp = 2}}};
  auto bf16_world = testing::MakeWorld(trainer, senders, receivers);
  auto fp8_world = testing::MakeWorld(conv->model, senders, receivers);
  ASSERT_TRUE(bf16_world.ok() && fp8_world.ok()) << fp8_world.status();
  auto weights = Bf16Weights(trainer, 3);

  // Each sender converts its own shard; the wire carries fp8.
  std::vector<std::vector<uint8_t>> sender_shards;
  int64_t bf16_bytes = 0, fp8_bytes = 0;
  for (int s = 0; s < (*fp8_world)->plan.num_senders; ++s) {
    std::vector<uint8_t> bf16 = (*bf16_world)->SenderShard(s, weights);
    std::vector<uint8_t> fp8((*fp8_world)->slayout[s].Bytes());
    ASSERT_TRUE(ConvertShard(trainer, *conv, (*bf16_world)->slayout[s], (*fp8_world)->slayout[s], bf16,
                             absl::MakeSpan(fp8))
                    .ok());
    sender_shards.push_back(std::move(fp8));
  }
  bf16_bytes = (*bf16_world)->plan.total_bytes;
  fp8_bytes = (*fp8_world)->plan.total_bytes;
  EXPECT_LT(fp8_bytes, bf16_bytes * 0.6) << "projections dominate: fp8 should nearly halve the traffic";

  InMemoryRendezvous rdv;
  std::vector<std::unique_ptr<Transport>> owned;
  std::vector<Transport*> tx, rx;
  std::vector<std::unique_ptr<VersionedShard>> shards;
  for (int r = -(*fp8_world)->plan.num_senders; r < (*fp8_world)->plan.num_receivers; ++r) {
    TcpOptions o;
    o.rendezvous = &rdv;
    o.receiver_rank = r < 0 ? -1 : r;
    o.transfer.checksums = true;
    auto t = CreateTcpTransport(o);
    ASSERT_TRUE(t.ok());
    (r < 0 ? tx : rx).push_back(t->get());
    owned.push_back(std::move(*t));
    if (r >= 0) shards.push_back(std::make_unique<VersionedShard>((*fp8_world)->rlayout[r].Bytes()));
  }
  auto res = testing::RunSync(**fp8_world, 1, sender_shards, tx, rx, shards);
  ASSERT_EQ(res.FirstError(), "");

  auto whole = ConvertWhole(*conv, weights);
  for (int r = 0; r < (*fp8_world)->plan.num_receivers; ++r) {
    std::vector<uint8_t> want((*fp8_world)->rlayout[r].Bytes());
    CutShard(conv->model, (*fp8_world)->rlayout[r], testing::World::Spans(whole, {}, conv->model),
             absl::MakeSpan(want));
    EXPECT_TRUE(*shards[r]->Current().bytes == want) << "receiver " << r;
  }
  // And the values are the bf16 weights within fp8's error.
  const int qkv = 2;  // after the embeddings and the first norm: qkv data, then its scales
  ASSERT_EQ(conv->model.params[qkv].name, "model.layers.0.self_attn.qkv_proj.weight");
  ASSERT_EQ(conv->kind[qkv], Fp8Conversion::Kind::kData);
  std::vector<float> back(whole[qkv].size());
  ASSERT_TRUE(DequantizeMxfp8(whole[qkv], whole[qkv + 1], absl::MakeSpan(back)).ok());
  for (size_t i = 0; i < back.size(); i += 17) {
    uint16_t b;
    std::memcpy(&b, &weights[conv->source[qkv]][2 * i], 2);
    float x = Bf16ToFloat(b);
    EXPECT_LE(std::fabs(back[i] - x), std::fabs(x) * 0.0625f + 1e-6f) << i;
  }
}

TEST(Fp8SyncTest, ShardsThatCutABlockAreRefused) {
  Model trainer = Trainer();
  Model odd = trainer;
  odd.params[0].shape = {96, 48};  // embeddings with a last dimension of 48
  auto bad = MakeFp8Conversion(odd, [](const Param& p) { return p.name == "model.embed_tokens.weight"; });
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("divisible by 32"));
  // TP4 splits o_proj's 64 columns into 16: the scale tensor cannot be split, the plan says so.
  auto conv = MakeFp8Conversion(trainer, Projections);
  ASSERT_TRUE(conv.ok());
  auto plan = MakePlan(conv->model, Layout::Of(ModelParallel{.tp = 4}), Layout::Engines(1, ModelParallel{}));
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("mx_scale"));
  // FSDP flat shards cut anywhere, so a sender's shard does not convert on its own.
  Layout fsdp = Layout::Of(Fsdp{.shards = 3});
  auto bf16_map = ShardMap::Build(trainer, fsdp);
  auto fp8_map = ShardMap::Build(conv->model, fsdp);
  ASSERT_TRUE(bf16_map.ok() && fp8_map.ok());
  ShardLayout from = ShardLayout::Of(trainer, *bf16_map, 1), to = ShardLayout::Of(conv->model, *fp8_map, 1);
  std::vector<uint8_t> in(from.Bytes()), out(to.Bytes());
  absl::Status s = ConvertShard(trainer, *conv, from, to, in, absl::MakeSpan(out));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

}  // namespace
}  // namespace skyrl::weight_sync
