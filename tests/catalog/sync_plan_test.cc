// The weight-sync plan inside `skyrl plan`: the catalog architecture as a weight_sync::Model
// (counts agree with catalog/params.h), layouts from the chosen plan, a bound checked against
// one computed by hand, and every row's plan no faster than its bound and within the planner's
// usual ratio.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "absl/strings/match.h"
#include "catalog/capacity_planner.h"
#include "catalog/params.h"
#include "catalog/sync_plan.h"
#include "tests/catalog/test_catalog.h"
#include "weight_sync/plan/transfer_planner.h"

namespace skyrl::catalog {
namespace {

using testing::RealCatalog;

double Elements(const weight_sync::Model& m, bool lora) {
  double n = 0;
  for (const weight_sync::Param& p : m.params)
    if (absl::StrContains(p.name, "lora_") == lora) n += static_cast<double>(p.NumElements());
  return n;
}

TEST(SyncModelTest, ElementsEqualTheCatalogCountsForEveryModel) {
  for (const Row& r : RealCatalog().rows()) {
    for (const ModelEntry& m : r.models) {
      SCOPED_TRACE(m.name);
      absl::StatusOr<SyncModel> sm = BuildSyncModel(m.arch, {.lora_rank = 16, .tp_sizes = {1}});
      ASSERT_TRUE(sm.ok()) << sm.status();
      ParamCounts c = CountParams(m.arch);
      EXPECT_NEAR(Elements(sm->model, false), c.total() + c.mtp, 1e-9 * c.total());
      LoraCounts l = LoraParams(m.arch, 16);
      EXPECT_NEAR(Elements(sm->model, true), l.dense + l.experts, 1e-9 * c.total());
      EXPECT_EQ(sm->replicated_for_tp, 0);
      // Experts are one parameter each, with their index, so that EP places them.
      int experts = 0;
      for (const weight_sync::Param& p : sm->model.params)
        experts += p.expert >= 0 && absl::EndsWith(p.name, ".down_proj.weight");
      EXPECT_EQ(experts,
                m.arch.moe.experts * (m.arch.moe.layers > 0 ? m.arch.moe.layers + m.arch.mtp_layers : 0));
    }
  }
}

TEST(SyncModelTest, FusedBlocksAndHeadsFollowTheArchitecture) {
  Architecture a;
  a.hidden = 256;
  a.vocab = 1001;
  a.attention = {AttentionKind::kGqa, 2, 8, 2, 32};
  a.ffn = {2, 512, true};
  absl::StatusOr<SyncModel> sm = BuildSyncModel(a, {.lora_rank = 0, .tp_sizes = {8}});
  ASSERT_TRUE(sm.ok()) << sm.status();
  const weight_sync::Param* kv = nullptr;
  const weight_sync::Param* gate_up = nullptr;
  const weight_sync::Param* embed = nullptr;
  for (const weight_sync::Param& p : sm->model.params) {
    if (p.name == "model.layers.1.self_attn.kv_proj.weight") kv = &p;
    if (p.name == "model.layers.1.mlp.gate_up_proj.weight") gate_up = &p;
    if (p.name == "model.embed_tokens.weight") embed = &p;
  }
  ASSERT_NE(kv, nullptr);
  EXPECT_EQ(kv->fused, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(kv->head_rows, (std::vector<int64_t>{32, 32}));  // 2 KV heads replicated over TP 8
  ASSERT_NE(gate_up, nullptr);
  EXPECT_EQ(gate_up->fused, (std::vector<int64_t>{512, 512}));
  EXPECT_EQ(gate_up->layer, 1);
  // A vocabulary of 1001 does not split 8 ways: replicated rather than an invalid layout.
  ASSERT_NE(embed, nullptr);
  EXPECT_EQ(embed->split_dim, -1);
  EXPECT_EQ(sm->replicated_for_tp, 2);  // embeddings and LM head
}

TEST(SyncModelTest, HybridsInterleaveTheirMixers) {
  const Catalog& cat = RealCatalog();
  absl::StatusOr<Catalog::Match> m = cat.Find("Qwen3.8-Flash-Next-180B");
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<SyncModel> sm = BuildSyncModel(m->model->arch, {});
  ASSERT_TRUE(sm.ok()) << sm.status();
  // 48 linear-attention and 16 attention layers: every fourth layer is attention.
  for (int l = 0; l < 8; ++l) {
    bool attention = false;
    for (const weight_sync::Param& p : sm->model.params)
      attention |= p.layer == l && absl::StrContains(p.name, "self_attn");
    EXPECT_EQ(attention, l % 4 == 3) << "layer " << l;
  }
}

// Stacking experts into groups (what PlanWeightSync does for speed) moves the same bytes with
// the same bound as one tensor per expert, for full weights and for LoRA adapters.
TEST(SyncModelTest, ExpertGroupsKeepBytesAndBound) {
  absl::StatusOr<Catalog::Match> m = RealCatalog().Find("Qwen3-30B-A3B");
  ASSERT_TRUE(m.ok()) << m.status();
  namespace ws = weight_sync;
  ws::ModelParallel trainer{2, 2, 2, 2, ws::ExpertSharding::kWholeOverAllRanks};  // 16 GPUs, experts over 4
  ws::ModelParallel engine{4, 1, 1, 1, ws::ExpertSharding::kWholeOverAllRanks};
  ws::PlanOptions po;
  po.cost.gpus_per_node = 8;
  for (int rank : {0, 8}) {
    SCOPED_TRACE(rank);
    po.filter = rank > 0 ? ws::LoraOnly() : ws::ParamFilter{};
    absl::StatusOr<SyncModel> each = BuildSyncModel(m->model->arch, {.lora_rank = rank, .tp_sizes = {2, 4}});
    absl::StatusOr<SyncModel> grouped =
        BuildSyncModel(m->model->arch, {.lora_rank = rank, .tp_sizes = {2, 4}, .expert_groups = 4});
    ASSERT_TRUE(each.ok() && grouped.ok());
    EXPECT_EQ(each->model.TotalBytes(), grouped->model.TotalBytes());
    EXPECT_LT(grouped->model.params.size() * 10, each->model.params.size());
    absl::StatusOr<ws::Plan> a =
        ws::MakePlan(each->model, ws::Layout::Of(trainer), ws::Layout::Engines(3, engine), po);
    absl::StatusOr<ws::Plan> b =
        ws::MakePlan(grouped->model, ws::Layout::Of(trainer), ws::Layout::Engines(3, engine), po);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
    EXPECT_EQ(a->total_bytes, b->total_bytes);
    EXPECT_NEAR(a->lower_bound_s, b->lower_bound_s, 1e-9 * a->lower_bound_s);
    for (int r = 0; r < a->num_receivers; ++r)
      EXPECT_EQ(a->recv_load[r].Bytes(), b->recv_load[r].Bytes()) << r;
    EXPECT_LE(b->predicted_s, 1.75 * b->lower_bound_s);
  }
  EXPECT_TRUE(absl::IsInvalidArgument(BuildSyncModel(m->model->arch, {.expert_groups = 3}).status()));
}

// Qwen3-8B (dense, 36 layers) on 2x8 H100: FSDP over node 0, two TP4 engines on node 1. Every
// byte crosses a NIC; each engine GPU receives a quarter of the model (plus the replicated
// norms) and each trainer GPU sends its eighth to both engines: both come to B/4 over 50 GB/s.
TEST(SyncPlanTest, BoundEqualsTheHandComputedOne) {
  const Catalog& cat = RealCatalog();
  PlanRequest req;
  req.model = "Qwen3-8B";
  req.cluster = *ParseCluster("2x8xH100", cat.hardware());
  absl::StatusOr<Plan> p = MakePlan(cat, req);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->trainer.shape.backend, "fsdp");
  ASSERT_EQ(p->trainer.shape.gpus, 8);
  ASSERT_EQ(p->generator.tp, 4);
  ASSERT_EQ(p->generator.engines, 2);
  ASSERT_TRUE(p->weight_sync.planned.has_value());
  const SyncPlanSummary& s = *p->weight_sync.planned;
  const double model_bytes = 2 * CountParams(p->model->arch).total();
  const double nic = 50e9;  // models/hardware.yaml: H100, 400 Gb/s per GPU
  EXPECT_NEAR(s.lower_bound_s, model_bytes / 4 / nic, 1e-3 * s.lower_bound_s);
  EXPECT_NEAR(static_cast<double>(s.bytes), 2 * model_bytes, 1e-3 * model_bytes);
  EXPECT_EQ(s.senders, 8);
  EXPECT_EQ(s.receivers, 8);
  EXPECT_GE(s.predicted_s, s.lower_bound_s);
  EXPECT_EQ(p->weight_sync.predicted_s, s.predicted_s);
  EXPECT_EQ(p->weight_sync.lower_bound_s, s.lower_bound_s);

  // Colocated on one node, the same weights go over NVLink: far faster.
  req.cluster = *ParseCluster("1x8xH100", cat.hardware());
  req.colocate = true;
  absl::StatusOr<Plan> col = MakePlan(cat, req);
  ASSERT_TRUE(col.ok()) << col.status();
  ASSERT_TRUE(col->weight_sync.planned.has_value());
  EXPECT_LT(col->weight_sync.planned->lower_bound_s, s.lower_bound_s / 4);
}

TEST(SyncPlanTest, FiltersFollowModeMtpAndVision) {
  const Catalog& cat = RealCatalog();
  PlanRequest req;
  req.model = "Qwen3-VL-8B";
  req.cluster = *ParseCluster("1x8xH100", cat.hardware());
  absl::StatusOr<Plan> full = MakePlan(cat, req);
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_TRUE(full->weight_sync.planned.has_value());
  EXPECT_TRUE(absl::StrContains(full->weight_sync.planned->synced, "vision"))
      << full->weight_sync.planned->synced;
  req.mode = Mode::kLora;
  absl::StatusOr<Plan> lora = MakePlan(cat, req);
  ASSERT_TRUE(lora.ok()) << lora.status();
  ASSERT_TRUE(lora->weight_sync.planned.has_value());
  EXPECT_EQ(lora->weight_sync.planned->synced, "LoRA adapters only");
  // Adapters only: a few percent of the weights.
  EXPECT_LT(lora->weight_sync.planned->bytes * 10, full->weight_sync.planned->bytes);

  req = {};
  req.model = "MiMo-7B-RL";  // one MTP layer
  req.cluster = *ParseCluster("1x8xH100", cat.hardware());
  absl::StatusOr<Plan> no_mtp = MakePlan(cat, req);
  req.assumptions.enable_mtp = true;
  absl::StatusOr<Plan> mtp = MakePlan(cat, req);
  ASSERT_TRUE(no_mtp.ok() && mtp.ok()) << no_mtp.status() << mtp.status();
  ASSERT_TRUE(no_mtp->weight_sync.planned && mtp->weight_sync.planned);
  const ModelEntry& m = *mtp->model;
  // With the same layouts, the MTP layer's bytes come on top, once per engine GPU set.
  if (mtp->generator.engines == no_mtp->generator.engines && mtp->generator.tp == no_mtp->generator.tp) {
    EXPECT_NEAR(static_cast<double>(mtp->weight_sync.planned->bytes - no_mtp->weight_sync.planned->bytes),
                2 * CountParams(m.arch).mtp * mtp->generator.engines,
                0.01 * 2 * CountParams(m.arch).mtp * mtp->generator.engines);
  }
  EXPECT_GT(mtp->weight_sync.planned->bytes, no_mtp->weight_sync.planned->bytes);
}

// Every row's reference plan (at the stated minimum, or at the model's own minimum where the
// two disagree) carries a weight-sync prediction no faster than its bound and within 1.75x of
// it (the planner's property-test tolerance, docs/weight_sync.md), planned quickly.
TEST(SyncPlanTest, EveryRowPlansItsWeightSyncWithinTheUsualRatio) {
  const Catalog& cat = RealCatalog();
  for (const Row& r : cat.rows()) {
    SCOPED_TRACE(r.family);
    const ModelEntry* m = nullptr;
    for (const ModelEntry& e : r.models)
      if (e.name == r.reference.model) m = &e;
    ASSERT_NE(m, nullptr);
    PlanRequest opts;
    UseReferenceRecipe(r, &opts.assumptions);
    Cluster c = StatedMinimum(cat, r);
    absl::StatusOr<Plan> p = PlanOn(cat, r, *m, r.reference.mode, c, r.reference.placement, opts);
    if (!p.ok()) {
      std::optional<HardwareSpec> own =
          MinimumHardware(cat, r, *m, r.reference.mode, c.gpu, r.reference.placement, opts);
      ASSERT_TRUE(own.has_value());
      c.shape = *own;
      p = PlanOn(cat, r, *m, r.reference.mode, c, r.reference.placement, opts);
    }
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_TRUE(p->weight_sync.planned.has_value()) << ::testing::PrintToString(p->notes);
    const SyncPlanSummary& s = *p->weight_sync.planned;
    EXPECT_GT(s.bytes, 0);
    EXPECT_GT(s.lower_bound_s, 0);
    EXPECT_GE(s.predicted_s, s.lower_bound_s * (1 - 1e-9));
    EXPECT_LE(s.predicted_s, 1.75 * s.lower_bound_s);
    EXPECT_EQ(s.senders, p->trainer.shape.gpus);
    EXPECT_EQ(s.receivers, p->generator.engines * p->generator.tp);
    EXPECT_EQ(s.replicated_for_tp, 0) << s.sender_layout << " -> " << s.receiver_layout;
    EXPECT_LT(s.planning_ms, 3000) << "1T models must plan in well under a second or two";
    if (r.reference.mode == Mode::kLora) {
      EXPECT_EQ(s.synced, "LoRA adapters only");
    }
  }
}

}  // namespace
}  // namespace skyrl::catalog
