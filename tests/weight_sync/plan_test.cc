#include <map>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/weight_sync/plan_checks.h"
#include "weight_sync/plan/hf_params.h"
#include "weight_sync/plan/prepared_sync.h"
#include "weight_sync/plan/transfer_planner.h"

namespace skyrl::weight_sync {
namespace {

using testing::CheckCoverage;
using ::testing::HasSubstr;

Param Matrix(std::string name, int64_t rows, int64_t cols, int split, DType dt = DType::kBF16) {
  Param p;
  p.name = std::move(name);
  p.shape = {rows, cols};
  p.dtype = dt;
  p.split_dim = split;
  return p;
}

// Brute force: every byte of `box` inside `outer`, as offsets in outer's row-major layout.
std::vector<int64_t> Bytes(const Box& outer, const Box& box) {
  std::vector<int64_t> out;
  int n = outer.ndim;
  std::array<int64_t, kMaxDims> idx{};
  for (int d = 0; d < n; ++d) idx[d] = box.lo[d];
  if (box.Empty()) return out;
  while (true) {
    int64_t off = 0;
    for (int d = 0; d < n; ++d) off = off * (outer.hi[d] - outer.lo[d]) + (idx[d] - outer.lo[d]);
    out.push_back(off);
    int d = n - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < box.hi[d]) break;
      idx[d] = box.lo[d];
    }
    if (d < 0) break;
  }
  return out;
}

std::vector<int64_t> Expand(const std::vector<Interval>& v) {
  std::vector<int64_t> out;
  for (const Interval& i : v)
    for (int64_t k = 0; k < i.length; ++k) out.push_back(i.offset + k);
  return out;
}

TEST(DTypeTest, ElementSizes) {
  EXPECT_EQ(ElementSize(DType::kBF16), 2);
  EXPECT_EQ(ElementSize(DType::kFP8E4M3), 1);
  EXPECT_EQ(ElementSize(DType::kF32), 4);
  EXPECT_EQ(Matrix("w", 3, 5, -1, DType::kFP8E4M3).NumBytes(), 15);
}

TEST(DTypeTest, NamesParseBack) {
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16, DType::kFP8E4M3, DType::kFP8E5M2, DType::kI64,
                  DType::kI32, DType::kU8}) {
    auto parsed = ParseDType(DTypeName(d));
    ASSERT_TRUE(parsed.ok()) << DTypeName(d);
    EXPECT_EQ(*parsed, d);
  }
  auto bad = ParseDType("float32");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("'float32'"));
}

TEST(BoxTest, RunsMatchBruteForce) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 300; ++iter) {
    Box outer;
    outer.ndim = 1 + rng() % 4;
    Box box;
    box.ndim = outer.ndim;
    for (int d = 0; d < outer.ndim; ++d) {
      outer.lo[d] = rng() % 3;
      outer.hi[d] = outer.lo[d] + 1 + rng() % 5;
      box.lo[d] = outer.lo[d] + rng() % (outer.hi[d] - outer.lo[d]);
      box.hi[d] = box.lo[d] + 1 + rng() % (outer.hi[d] - box.lo[d]);
    }
    std::vector<Interval> runs;
    ForEachRun(outer, box, 100, [&](int64_t o, int64_t l) { runs.push_back({o - 100, l}); });
    for (size_t k = 1; k < runs.size(); ++k)
      ASSERT_LT(runs[k - 1].offset + runs[k - 1].length, runs[k].offset) << "runs not merged/sorted";
    ASSERT_EQ(Expand(runs), Bytes(outer, box)) << box.DebugString() << " in " << outer.DebugString();
  }
}

TEST(BoxTest, FlatRangeDecomposesExactly) {
  std::mt19937 rng(11);
  for (int iter = 0; iter < 300; ++iter) {
    ByteShape s;
    s.ndim = 1 + rng() % 4;
    for (int d = 0; d < s.ndim; ++d) s.dims[d] = 1 + rng() % 6;
    int64_t v = s.Volume();
    int64_t a = rng() % (v + 1), b = rng() % (v + 1);
    if (a > b) std::swap(a, b);
    std::vector<int64_t> got;
    std::vector<Box> boxes = FlatRangeToBoxes(s, a, b);
    EXPECT_LE(static_cast<int>(boxes.size()), std::max(1, 2 * s.ndim - 1));
    for (const Box& bx : boxes)
      for (int64_t o : Expand(ToIntervals(s, bx))) got.push_back(o);
    std::vector<int64_t> want;
    for (int64_t o = a; o < b; ++o) want.push_back(o);
    ASSERT_EQ(got, want) << "range " << a << ".." << b;
  }
}

TEST(LayoutTest, FusedQkvSplitsPerSubBlock) {
  Model m;
  m.num_layers = 1;
  Param qkv = Matrix("qkv", 8 + 4 + 4, 3, 0);
  qkv.fused = {8, 4, 4};
  qkv.layer = 0;
  m.params.push_back(qkv);
  auto map = ShardMap::Build(m, Layout::Of(ModelParallel{.tp = 2}));
  ASSERT_TRUE(map.ok()) << map.status();
  std::vector<Box> b = map->BoxesOf(0, 1);
  ASSERT_EQ(b.size(), 3u);
  // Rank 1 holds q rows 4..8, k rows 10..12, v rows 14..16; all 3 columns (6 bytes each).
  EXPECT_EQ(b[0].lo[0], 4);
  EXPECT_EQ(b[0].hi[0], 8);
  EXPECT_EQ(b[1].lo[0], 10);
  EXPECT_EQ(b[1].hi[0], 12);
  EXPECT_EQ(b[2].lo[0], 14);
  EXPECT_EQ(b[2].hi[0], 16);
  EXPECT_EQ(b[0].hi[1], 6);
}

TEST(LayoutTest, RowParallelIsOneByteRangePerRow) {
  Model m;
  m.num_layers = 1;
  Param o = Matrix("o", 3, 4, 1);
  o.layer = 0;
  m.params.push_back(o);
  auto map = ShardMap::Build(m, Layout::Of(ModelParallel{.tp = 2}));
  ASSERT_TRUE(map.ok());
  std::vector<Box> b = map->BoxesOf(0, 1);
  ASSERT_EQ(b.size(), 1u);
  // Row length 8 bytes; rank 1 holds columns 2..4 = bytes 4..8 of each row.
  EXPECT_EQ(ToIntervals(ByteShape::Of(o), b[0]), (std::vector<Interval>{{4, 4}, {12, 4}, {20, 4}}));
}

TEST(LayoutTest, PipelineStagesAndExperts) {
  TransformerConfig c;
  c.layers = 5;
  c.experts = 4;
  c.moe_intermediate = 32;
  Model m = MakeTransformer(c);
  ModelParallel mp{.tp = 1, .pp = 2, .ep = 2};
  EXPECT_EQ(StageOf(mp, 5, 0), 0);
  EXPECT_EQ(StageOf(mp, 5, 2), 0);
  EXPECT_EQ(StageOf(mp, 5, 3), 1);
  EXPECT_EQ(StageOf(mp, 5, kPreLayers), 0);
  EXPECT_EQ(StageOf(mp, 5, kPostLayers), 1);
  auto map = ShardMap::Build(m, Layout::Of(mp));
  ASSERT_TRUE(map.ok()) << map.status();
  for (int p = 0; p < static_cast<int>(m.params.size()); ++p) {
    const Param& param = m.params[p];
    std::vector<Holding> hs = map->Holders(p);
    int stage = StageOf(mp, 5, param.layer);
    if (param.expert >= 0) {
      // Experts 0,1 on EP rank 0; 2,3 on EP rank 1; rank = stage * 2 + ep.
      ASSERT_EQ(hs.size(), 1u) << param.name;
      EXPECT_EQ(hs[0].rank, stage * 2 + param.expert / 2) << param.name;
    } else {
      ASSERT_EQ(hs.size(), 2u) << param.name;  // replicated over the two EP ranks
      EXPECT_EQ(hs[0].rank, stage * 2);
    }
  }
}

TEST(LayoutTest, FsdpShardsCoverTheFlatBufferOnce) {
  Model m = MakeTransformer(TransformerConfig{});
  auto map = ShardMap::Build(m, Layout::Of(Fsdp{.shards = 7, .replicas = 2}));
  ASSERT_TRUE(map.ok());
  int64_t held = 0;
  for (int r = 0; r < 14; ++r) held += map->ShardBytes(r);
  EXPECT_EQ(held, 2 * m.TotalBytes());
  // Shards are equal up to the padding of the last one.
  EXPECT_EQ(map->ShardBytes(0), (m.TotalBytes() + 6) / 7);
}

TEST(LayoutTest, KvHeadsAreReplicatedWhenTpExceedsThem) {
  TransformerConfig c;  // 4 query heads, 2 KV heads of 16 rows
  Model m = MakeTransformer(c);
  auto map = ShardMap::Build(m, Layout::Of(ModelParallel{.tp = 4}));
  ASSERT_TRUE(map.ok()) << map.status();
  const int qkv = 2;
  ASSERT_EQ(m.params[qkv].name, "model.layers.0.self_attn.qkv_proj.weight");
  // q rows 0..64 split by 4; k rows 64..96 and v rows 96..128 hold 2 heads: ranks 0,1 share
  // head 0 and ranks 2,3 head 1.
  for (int t = 0; t < 4; ++t) {
    std::vector<Box> b = map->BoxesOf(qkv, t);
    ASSERT_EQ(b.size(), 3u);
    EXPECT_EQ(b[0].lo[0], 16 * t);
    EXPECT_EQ(b[1].lo[0], 64 + 16 * (t / 2));
    EXPECT_EQ(b[1].hi[0], 64 + 16 * (t / 2) + 16);
    EXPECT_EQ(b[2].lo[0], 96 + 16 * (t / 2));
  }
  Layout t2 = Layout::Of(ModelParallel{.tp = 2, .replicas = 2});
  Layout e4 = Layout::Engines(2, ModelParallel{.tp = 4});
  auto plan = MakePlan(m, t2, e4);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(testing::CheckCoverage(m, t2, e4, *plan), "");
  TransformerConfig three = c;
  three.kv_heads = 3;
  three.heads = 6;
  auto bad = ShardMap::Build(MakeTransformer(three), Layout::Of(ModelParallel{.tp = 4}));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("do not divide one another"));
}

TEST(LayoutTest, ErrorsNameTheFieldAndParam) {
  Model m = MakeTransformer(TransformerConfig{});  // kv_heads*head_dim = 32
  auto bad_tp = ShardMap::Build(m, Layout::Of(ModelParallel{.tp = 3}));
  ASSERT_FALSE(bad_tp.ok());
  EXPECT_THAT(std::string(bad_tp.status().message()), HasSubstr("tp=3"));
  EXPECT_THAT(std::string(bad_tp.status().message()), HasSubstr("of param 'model."));
  auto bad_pp = ShardMap::Build(m, Layout::Of(ModelParallel{.pp = 2, .stage_first_layer = {0, 5}}));
  ASSERT_FALSE(bad_pp.ok());
  EXPECT_THAT(std::string(bad_pp.status().message()), HasSubstr("stage_first_layer[1]"));
  Model fused = m;
  for (Param& p : fused.params)
    if (p.name == "model.layers.0.self_attn.o_proj.weight") p.fused = {1};
  EXPECT_THAT(std::string(ValidateModel(fused).message()), HasSubstr("fused sub-blocks need split_dim 0"));
  TransformerConfig c;
  c.experts = 3;
  c.moe_intermediate = 8;
  auto bad_ep = ShardMap::Build(MakeTransformer(c), Layout::Of(ModelParallel{.ep = 2}));
  EXPECT_THAT(std::string(bad_ep.status().message()), HasSubstr("3 experts do not divide over 2"));
}

TEST(PlannerTest, ReplicasShareTheSending) {
  Model m = MakeTransformer(TransformerConfig{.layers = 8});
  Layout trainer = Layout::Of(ModelParallel{.tp = 1, .replicas = 4});
  Layout engine = Layout::Engines(1, ModelParallel{.tp = 1});
  auto plan = MakePlan(m, trainer, engine);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(CheckCoverage(m, trainer, engine, *plan), "");
  EXPECT_EQ(plan->total_bytes, m.TotalBytes());
  int64_t biggest = 0;
  for (const Param& p : m.params) biggest = std::max(biggest, p.NumBytes());
  for (const EndpointLoad& l : plan->send_load) {
    EXPECT_GT(l.Bytes(), 0);
    EXPECT_LE(l.Bytes(), m.TotalBytes() / 4 + biggest);  // greedy: mean plus one piece
  }
}

TEST(PlannerTest, FiltersDropMtpVisionAndKeepLora) {
  TransformerConfig c;
  c.mtp_layers = 1;
  c.vision_layers = 2;
  c.lora_rank = 4;
  Model m = MakeTransformer(c);
  Layout t = Layout::Of(ModelParallel{.tp = 2});
  Layout e = Layout::Engines(2, ModelParallel{.tp = 1});
  PlanOptions o;
  o.filter = ExcludeNames({"mtp.", "visual."});
  auto plan = MakePlan(m, t, e, o);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(CheckCoverage(m, t, e, *plan, o.filter), "");
  for (const Transfer& x : plan->transfers) {
    EXPECT_THAT(m.params[x.param].name, ::testing::Not(HasSubstr("mtp.")));
    EXPECT_THAT(m.params[x.param].name, ::testing::Not(HasSubstr("visual.")));
  }
  o.filter = LoraOnly();
  auto lora = MakePlan(m, t, e, o);
  ASSERT_TRUE(lora.ok());
  EXPECT_EQ(CheckCoverage(m, t, e, *lora, o.filter), "");
  ASSERT_FALSE(lora->transfers.empty());
  int64_t want = 0;
  for (const Param& p : m.params)
    if (p.name.find("lora_") != std::string::npos) want += 2 * p.NumBytes();  // two engines
  EXPECT_EQ(lora->total_bytes, want);
}

TEST(PlannerTest, LowerBoundIsTheReceiversNicTimeWhenDisaggregated) {
  Model m = MakeTransformer(TransformerConfig{.layers = 4});
  PlanOptions o;
  o.cost.gpus_per_node = 2;
  Layout t = Layout::Of(ModelParallel{.tp = 2, .replicas = 4});
  Layout e = Layout::Engines(2, ModelParallel{.tp = 1});
  auto plan = MakePlan(m, t, e, o);
  ASSERT_TRUE(plan.ok());
  // Each receiver holds the whole model and shares no node with a sender.
  EXPECT_DOUBLE_EQ(plan->lower_bound_s, m.TotalBytes() / o.cost.nic_bytes_per_s);
  EXPECT_GE(plan->predicted_s, plan->lower_bound_s);
  EXPECT_LE(plan->predicted_s, 1.01 * plan->lower_bound_s);
}

TEST(PlannerTest, ColocatedPrefersNvlink) {
  Model m = MakeTransformer(TransformerConfig{.layers = 4});
  PlanOptions o;
  o.cost.gpus_per_node = 4;
  o.cost.receiver_first_gpu = 0;
  Layout t = Layout::Of(ModelParallel{.tp = 1, .replicas = 8});
  Layout e = Layout::Engines(2, ModelParallel{.tp = 4});
  auto plan = MakePlan(m, t, e, o);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(CheckCoverage(m, t, e, *plan), "");
  // Every receiver has same-node holders of all its bytes: NVLink carries most, the NIC
  // helps in parallel, and the plan meets the bound B / (nvlink + nic) within 10%.
  for (const EndpointLoad& l : plan->recv_load) EXPECT_GT(l.intra_bytes, 5 * l.inter_bytes);
  EXPECT_LE(plan->predicted_s, 1.1 * plan->lower_bound_s);
}

TEST(PlannerTest, RejectsBadLayoutsNamingTheSide) {
  Model m = MakeTransformer(TransformerConfig{});
  auto plan = MakePlan(m, Layout::Of(ModelParallel{.tp = 3}), Layout::Engines(1, ModelParallel{}));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("sender layout"));
}

TEST(PreparedSyncTest, SchedulesAgreeOnEveryPairsBytes) {
  auto p =
      PreparedSync::Make(MakeTransformer(TransformerConfig{}), Layout::Of(ModelParallel{.tp = 2, .pp = 2}),
                         Layout{{ModelParallel{.tp = 1}, ModelParallel{.tp = 4}}});
  ASSERT_TRUE(p.ok()) << p.status();
  // For every (sender, receiver) pair both ends count the same bytes.
  std::map<std::pair<int, int>, int64_t> sent, received;
  for (int s = 0; s < (*p)->num_senders(); ++s) {
    auto sched = (*p)->SenderSchedule(s);
    ASSERT_TRUE(sched.ok());
    for (const PeerStream& ps : sched->peers) sent[{s, ps.peer}] += ps.bytes;
  }
  int64_t total = 0;
  for (int r = 0; r < (*p)->num_receivers(); ++r) {
    auto sched = (*p)->ReceiverSchedule(r);
    ASSERT_TRUE(sched.ok());
    EXPECT_EQ(sched->shard_bytes, (*p)->ReceiverLayout(r)->Bytes());
    for (const PeerStream& ps : sched->peers) {
      received[{ps.peer, r}] += ps.bytes;
      total += ps.bytes;
    }
  }
  EXPECT_EQ(sent, received);
  EXPECT_EQ(total, (*p)->plan().total_bytes);
  EXPECT_EQ((*p)->SenderSchedule(4).status().code(), absl::StatusCode::kOutOfRange);
}

// ---- seeded property test over random layouts ----

ModelParallel RandomMp(std::mt19937& rng, const TransformerConfig& c, bool receiver) {
  const int tps[] = {1, 2, 4};
  ModelParallel mp;
  mp.tp = tps[rng() % 3];
  mp.pp = receiver ? 1 : 1 + rng() % 3;
  if (c.experts > 0) {
    mp.experts = rng() % 2 ? ExpertSharding::kEpThenTp : ExpertSharding::kWholeOverAllRanks;
    int spread_max = mp.experts == ExpertSharding::kEpThenTp ? c.experts : c.experts / mp.tp;
    int eps[] = {1, 2, 4};
    mp.ep = eps[rng() % 3];
    if (spread_max % mp.ep != 0) mp.ep = 1;
  }
  mp.replicas = receiver ? 1 : 1 + rng() % 3;
  return mp;
}

TEST(PlannerPropertyTest, RandomLayoutsCoverExactlyAndBalance) {
  std::mt19937 rng(20261202);
  double worst_ratio = 0;
  for (int iter = 0; iter < 200; ++iter) {
    TransformerConfig c;
    c.layers = 3 + rng() % 4;
    c.hidden = 16 * (1 + rng() % 4);
    c.intermediate = 32 * (1 + rng() % 3);
    c.vocab = 64 * (1 + rng() % 3);
    c.dtype = rng() % 4 == 0 ? DType::kFP8E4M3 : DType::kBF16;
    c.kv_heads = 1 << (rng() % 3);  // 1, 2 or 4 KV heads: TP 4 replicates them
    if (rng() % 2) {
      c.experts = 8;
      c.moe_intermediate = 16;
    }
    Model m = MakeTransformer(c);
    Layout t = rng() % 4 == 0 ? Layout::Of(Fsdp{.shards = 1 + static_cast<int>(rng() % 6),
                                                .replicas = 1 + static_cast<int>(rng() % 2)})
                              : Layout::Of(RandomMp(rng, c, false));
    Layout e;
    int engines = 1 + rng() % 3;
    for (int i = 0; i < engines; ++i) e.groups.push_back(RandomMp(rng, c, true));
    PlanOptions o;
    o.cost.gpus_per_node = 1 + rng() % 8;
    o.cost.receiver_first_gpu = rng() % 2 ? 0 : -1;
    auto plan = MakePlan(m, t, e, o);
    ASSERT_TRUE(plan.ok()) << "iter " << iter << ": " << plan.status();
    ASSERT_EQ(CheckCoverage(m, t, e, *plan), "") << "iter " << iter;
    ASSERT_GE(plan->predicted_s, plan->lower_bound_s * (1 - 1e-9)) << "iter " << iter;
    worst_ratio = std::max(worst_ratio, plan->predicted_s / plan->lower_bound_s);
    if (plan->predicted_s > 1.75 * plan->lower_bound_s) {
      auto desc = [](const Layout& l) {
        std::string s;
        for (const auto& g : l.groups) {
          if (auto* mp = std::get_if<ModelParallel>(&g))
            s += absl::StrCat("MP(tp", mp->tp, ",pp", mp->pp, ",ep", mp->ep, ",rep", mp->replicas, ",x",
                              static_cast<int>(mp->experts), ") ");
          else
            s += absl::StrCat("FSDP(", std::get<Fsdp>(g).shards, "x", std::get<Fsdp>(g).replicas, ") ");
        }
        return s;
      };
      std::printf("iter %d: %s -> %s gpn=%d first=%d experts=%d ratio %.2f\n", iter, desc(t).c_str(),
                  desc(e).c_str(), o.cost.gpus_per_node, o.cost.receiver_first_gpu, c.experts,
                  plan->predicted_s / plan->lower_bound_s);
    }
    // Balance: within 1.75x of the lower bound on every random layout (docs/weight_sync.md;
    // 1.50 is the worst seen over 1,500 seeds: tiny models have few, large pieces).
    EXPECT_LE(plan->predicted_s, 1.75 * plan->lower_bound_s) << "iter " << iter;
  }
  std::printf("worst predicted/lower-bound over random layouts: %.3f\n", worst_ratio);
}

}  // namespace
}  // namespace skyrl::weight_sync
