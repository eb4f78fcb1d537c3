// The capacity planner against the table: every row plans at its stated minimum (for the size, mode,
// placement and training recipe its reading names) and is refused one step below it, with the
// reason and the minimum; a conservative minimum is checked at the model's own minimum.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/match.h"
#include "catalog/capacity_planner.h"
#include "catalog/params.h"
#include "tests/catalog/test_catalog.h"

namespace skyrl::catalog {
namespace {

using testing::RealCatalog;

const ModelEntry& Model(const Row& r, const std::string& name) {
  for (const ModelEntry& m : r.models)
    if (m.name == name) return m;
  std::abort();
}

class RowTest : public ::testing::TestWithParam<std::string> {
 protected:
  const Row& row() {
    for (const Row& r : RealCatalog().rows())
      if (r.family == GetParam()) return r;
    std::abort();
  }
};

TEST_P(RowTest, PlansAtStatedMinimumAndNotBelow) {
  const Catalog& cat = RealCatalog();
  const Row& r = row();
  const ModelEntry& m = Model(r, r.reference.model);
  Cluster min = StatedMinimum(cat, r);
  PlanRequest opts;
  UseReferenceRecipe(r, &opts.assumptions);  // the reading's training recipe, if any
  absl::StatusOr<Plan> at = PlanOn(cat, r, m, r.reference.mode, min, r.reference.placement, opts);
  if (r.reference.conservative_minimum) {
    // The table asks for more than the model needs: it plans at the stated minimum, and the
    // "refused below" half is checked at the model's own minimum, which must be smaller.
    ASSERT_TRUE(at.ok()) << r.family << " at " << min.shape.ToString() << ": " << at.status();
    std::optional<HardwareSpec> own =
        MinimumHardware(cat, r, m, r.reference.mode, min.gpu, r.reference.placement, opts);
    ASSERT_TRUE(own.has_value()) << r.family;
    EXPECT_LT(own->total_gpus(), min.shape.total_gpus())
        << "not conservative any more: drop reference.minimum";
    EXPECT_TRUE(std::any_of(at->notes.begin(), at->notes.end(),
                            [](const std::string& n) { return absl::StrContains(n, "conservative"); }));
    Cluster own_min = min;
    own_min.shape = *own;
    ASSERT_TRUE(PlanOn(cat, r, m, r.reference.mode, own_min, r.reference.placement, opts).ok());
    std::vector<Cluster> below = BelowMinimum(cat, own_min);
    ASSERT_FALSE(below.empty());
    for (const Cluster& b : below) {
      absl::StatusOr<Plan> p = PlanOn(cat, r, m, r.reference.mode, b, r.reference.placement, opts);
      ASSERT_TRUE(absl::IsResourceExhausted(p.status()))
          << r.family << " should not fit " << b.shape.ToString();
      std::string msg(p.status().message());
      EXPECT_TRUE(absl::StrContains(msg, "does not fit " + b.shape.Describe())) << msg;
      EXPECT_TRUE(absl::StrContains(msg, "the trainer") || absl::StrContains(msg, "generator")) << msg;
      EXPECT_TRUE(absl::StrContains(msg, "needs at least")) << msg;
    }
    std::printf("%s: table says %s (conservative), the model's own minimum is %s\n", r.family.c_str(),
                min.shape.ToString().c_str(), own->ToString().c_str());
    return;
  }
  ASSERT_TRUE(at.ok()) << r.family << " at " << min.shape.ToString() << ": " << at.status();
  EXPECT_EQ(at->trainer.shape.gpus + (r.reference.placement == Placement::kSeparate ? at->generator.gpus : 0),
            min.shape.total_gpus());
  EXPECT_LE(at->trainer.memory.total(), at->usable_bytes_per_gpu);
  EXPECT_LE(at->generator.memory.total(), at->usable_bytes_per_gpu);
  std::vector<Cluster> below = BelowMinimum(cat, min);
  ASSERT_FALSE(below.empty());
  for (const Cluster& b : below) {
    absl::StatusOr<Plan> p = PlanOn(cat, r, m, r.reference.mode, b, r.reference.placement, opts);
    EXPECT_TRUE(absl::IsResourceExhausted(p.status()))
        << r.family << " (" << r.reference.model << ", " << ModeName(r.reference.mode) << ") should not fit "
        << b.shape.ToString() << " but planned: trainer " << (p.ok() ? p->trainer.shape.gpus : 0);
    if (p.ok()) continue;
    std::string msg(p.status().message());
    EXPECT_TRUE(absl::StrContains(msg, "does not fit " + b.shape.Describe())) << msg;
    EXPECT_TRUE(
        absl::StrContains(msg, "the table's minimum for " + r.family + " is " + r.min_hardware.Describe()))
        << msg;
    // The reason (which side does not fit, by how much) and the minimum on this GPU type.
    EXPECT_TRUE(absl::StrContains(msg, "the trainer") || absl::StrContains(msg, "generator")) << msg;
    EXPECT_TRUE(absl::StrContains(msg, "needs at least") || absl::StrContains(msg, "no cluster of")) << msg;
  }
}

std::vector<std::string> Families() {
  std::vector<std::string> out;
  for (const Row& r : RealCatalog().rows()) out.push_back(r.family);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Table, RowTest, ::testing::ValuesIn(Families()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string s;
                           for (char c : info.param)
                             s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return s;
                         });

TEST(PlannerTest, KimiFullFineTuningIsRefusedNamingLoraMinimum) {
  PlanRequest req;
  req.model = "Kimi-K2.7";
  req.mode = Mode::kFull;
  absl::StatusOr<Plan> p = MakePlan(RealCatalog(), req);
  ASSERT_TRUE(absl::IsFailedPrecondition(p.status())) << p.status();
  EXPECT_EQ(p.status().message(),
            "Kimi-K2.7: full fine-tuning is known not to work; LoRA needs at least 2 nodes x 8 B300");
}

TEST(PlannerTest, BelowMinimumOfferedAsColocatedWhenThatFits) {
  // Kimi LoRA at 1x8 B300 does not fit (separate or colocated): the message names 2x8 B300.
  const Catalog& cat = RealCatalog();
  PlanRequest req;
  req.model = "Kimi-K2.7";
  req.mode = Mode::kLora;
  req.cluster = *ParseCluster("1x8xB300", cat.hardware());
  absl::StatusOr<Plan> p = MakePlan(cat, req);
  ASSERT_TRUE(absl::IsResourceExhausted(p.status())) << p.status();
  EXPECT_TRUE(absl::StrContains(p.status().message(), "needs at least 2 nodes x 8 B300")) << p.status();
}

TEST(PlannerTest, MoreGpusNeverNeedMoreMemoryPerGpu) {
  const Catalog& cat = RealCatalog();
  absl::StatusOr<Catalog::Match> m = cat.Find("Qwen3-32B");
  ASSERT_TRUE(m.ok());
  Assumptions a;
  double last = 1e300;
  for (int gpus : {8, 16, 32, 64}) {
    TrainerShape s{"megatron", gpus, 2, 1, 1, gpus / 2};
    double total = TrainerMemory(*m->model, *m->row, Mode::kFull, s, a).total();
    EXPECT_LT(total, last) << gpus;
    last = total;
  }
  TrainerShape s{"megatron", 8, 2, 1, 1, 4};
  EXPECT_LT(TrainerMemory(*m->model, *m->row, Mode::kLora, s, a).total(),
            TrainerMemory(*m->model, *m->row, Mode::kFull, s, a).total());
  // Longer sequences cost activations.
  Assumptions longer = a;
  longer.seq_len *= 2;
  EXPECT_GT(TrainerMemory(*m->model, *m->row, Mode::kFull, s, longer).activations,
            TrainerMemory(*m->model, *m->row, Mode::kFull, s, a).activations);
}

TEST(PlannerTest, SeparatePlanHasPlacementGroupsAndABound) {
  const Catalog& cat = RealCatalog();
  PlanRequest req;
  req.model = "Qwen3-8B";
  req.cluster = *ParseCluster("2x8xH100", cat.hardware());
  absl::StatusOr<Plan> p = MakePlan(cat, req);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->placement, Placement::kSeparate);
  ASSERT_GE(p->groups.size(), 2u);
  EXPECT_EQ(p->groups[0].spec.name, "trainer");
  int gpus = 0;
  for (const PlannedGroup& pg : p->groups) {
    const PlacementGroupSpec& g = pg.spec;
    for (const BundleSpec& b : g.bundles) {
      gpus += static_cast<int>(b.gpu);
      EXPECT_EQ(b.selector.at("accelerator"), "H100");
    }
    if (g.name != "trainer") {
      EXPECT_EQ(g.strategy, "STRICT_PACK");
      EXPECT_EQ(static_cast<int>(g.bundles.size()), p->generator.tp);
      EXPECT_EQ(g.bundles.front().node, g.bundles.back().node);  // an engine stays in one node
    }
  }
  EXPECT_EQ(gpus, 16);
  EXPECT_GT(p->weight_sync.lower_bound_s, 0);
  // 16.4 GB of bf16 weights per engine cannot cross a link faster than its bandwidth.
  EXPECT_GE(p->weight_sync.lower_bound_s, p->weight_sync.bytes / p->generator.engines /
                                              (p->generator.tp * p->weight_sync.link_gb_s * 1e9) * 0.999);
}

TEST(PlannerTest, ColocateSharesEveryGpu) {
  const Catalog& cat = RealCatalog();
  PlanRequest req;
  req.model = "Nemotron-3-Nano-30B-A3B";
  req.cluster = *ParseCluster("1x8xH100", cat.hardware());
  absl::StatusOr<Plan> sep = MakePlan(cat, req);
  EXPECT_TRUE(absl::IsResourceExhausted(sep.status())) << "separate pools should not fit";
  EXPECT_TRUE(absl::StrContains(sep.status().message(), "--colocate")) << sep.status();
  req.colocate = true;
  absl::StatusOr<Plan> col = MakePlan(cat, req);
  ASSERT_TRUE(col.ok()) << col.status();
  EXPECT_EQ(col->trainer.shape.gpus, 8);
  EXPECT_EQ(col->generator.gpus, 8);
  ASSERT_EQ(col->groups.size(), 1u);
  EXPECT_EQ(col->groups[0].spec.bundles.size(), 8u);
  EXPECT_EQ(col->groups[0].spec.domain_label, "nvlink-domain");  // one node: one NVLink domain
  // Across nodes the group cannot be held to one NVLink domain.
  req.cluster = *ParseCluster("2x8xH100", cat.hardware());
  absl::StatusOr<Plan> two = MakePlan(cat, req);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->groups[0].spec.strategy, "PACK");
  EXPECT_EQ(two->groups[0].spec.domain_label, "");
  EXPECT_EQ(two->weight_sync.link, "NIC");
}

}  // namespace
}  // namespace skyrl::catalog

namespace skyrl::catalog {
namespace {

using testing::RealCatalog;

PlanRequest Request(const std::string& model, const std::string& cluster) {
  PlanRequest r;
  r.model = model;
  r.cluster = *ParseCluster(cluster, RealCatalog().hardware());
  return r;
}

TEST(PlannerOptionsTest, RolloutPrecisionFollowsTheRow) {
  struct Case {
    const char* model;
    const char* cluster;
    const char* precision;
  };
  for (Case c : {Case{"Kimi-K2.7", "2x8xB300", "int4"}, Case{"Qwen3.5-4B", "1x4xH100", "fp8"},
                 Case{"Qwen3-1.7B", "1x4xH100", "bf16"}, Case{"gpt-oss-20b", "1x4xH100", "mxfp4"}}) {
    PlanRequest r = Request(c.model, c.cluster);
    if (std::string(c.model) == "Kimi-K2.7" || std::string(c.model) == "gpt-oss-20b") r.mode = Mode::kLora;
    absl::StatusOr<Plan> p = MakePlan(RealCatalog(), r);
    ASSERT_TRUE(p.ok()) << c.model << ": " << p.status();
    EXPECT_EQ(p->generator.precision.name, c.precision) << c.model;
  }
  PlanRequest bad = Request("Qwen3-8B", "1x8xH100");
  bad.rollout_precision = "int4";
  absl::StatusOr<Plan> p = MakePlan(RealCatalog(), bad);
  EXPECT_TRUE(absl::IsInvalidArgument(p.status())) << p.status();
  EXPECT_TRUE(absl::StrContains(p.status().message(), "--rollout-precision")) << p.status();
  // bf16 rollouts weigh four times INT4.
  PlanRequest q = Request("Qwen3.6-35B-A3B", "1x8xH200");
  absl::StatusOr<Plan> int4 = MakePlan(RealCatalog(), q);
  q.rollout_precision = "bf16";
  absl::StatusOr<Plan> bf16 = MakePlan(RealCatalog(), q);
  ASSERT_TRUE(int4.ok() && bf16.ok()) << int4.status() << bf16.status();
  EXPECT_NEAR(bf16->generator.memory.weights * bf16->generator.tp /
                  (int4->generator.memory.weights * int4->generator.tp),
              4.0, 1e-9);
}

TEST(PlannerOptionsTest, MtpLayersCountOnlyWhenEnabled) {
  absl::StatusOr<Catalog::Match> m = RealCatalog().Find("GLM-4.5-Air");
  ASSERT_TRUE(m.ok());
  Assumptions off, on;
  on.enable_mtp = true;
  TrainerShape s{"megatron", 16, 2, 1, 8, 8};
  double mtp = CountParams(m->model->arch).mtp;
  ASSERT_GT(mtp, 0);
  double diff = TrainerMemory(*m->model, *m->row, Mode::kFull, s, on).weights -
                TrainerMemory(*m->model, *m->row, Mode::kFull, s, off).weights;
  EXPECT_NEAR(diff, 2 * mtp / 16, 1e3);  // bf16, fully sharded over 16 GPUs
  RolloutPrecision bf16{"bf16", 2};
  EXPECT_NEAR(
      GeneratorMemory(*m->model, 4, bf16, on).weights - GeneratorMemory(*m->model, 4, bf16, off).weights,
      2 * mtp / 4, 1e3);
}

TEST(PlannerOptionsTest, OnlyQwen35TrainsItsVisionTower) {
  // Same layout, full fine-tuning: a trainable tower pays gradients and Adam state, a frozen one
  // bf16 weights only.
  const Catalog& cat = RealCatalog();
  absl::StatusOr<Catalog::Match> q35 = cat.Find("Qwen3.5-27B"), q36 = cat.Find("Qwen3.6-27B");
  ASSERT_TRUE(q35.ok() && q36.ok());
  ASSERT_TRUE(q35->row->vision_trainable);
  ASSERT_FALSE(q36->row->vision_trainable);
  Assumptions a;
  TrainerShape s{"megatron", 8, 1, 1, 1, 8};
  MemoryBreakdown trained = TrainerMemory(*q35->model, *q35->row, Mode::kFull, s, a);
  MemoryBreakdown frozen = TrainerMemory(*q36->model, *q36->row, Mode::kFull, s, a);
  double vision = CountParams(q35->model->arch).vision;
  EXPECT_NEAR(trained.optimizer - frozen.optimizer, 12 * vision / 8, 1e3);
  EXPECT_NEAR(trained.gradients - frozen.gradients, 2 * vision / 8, 1e3);
}

TEST(PlannerOptionsTest, BackendMustBeOneTheRowOffers) {
  PlanRequest r = Request("Kimi-K2.7", "2x8xB300");
  r.mode = Mode::kLora;
  r.backend = "fsdp";
  absl::StatusOr<Plan> p = MakePlan(RealCatalog(), r);
  EXPECT_TRUE(absl::IsInvalidArgument(p.status())) << p.status();
  EXPECT_TRUE(absl::StrContains(p.status().message(), "--backend")) << p.status();
}

TEST(PlannerOptionsTest, NoClusterPlansOnTheTablesMinimum) {
  PlanRequest r;
  r.model = "GLM-4.5-Air";
  absl::StatusOr<Plan> p = MakePlan(RealCatalog(), r);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->mode, Mode::kLora);  // full fine-tuning is blank for this row
  EXPECT_EQ(p->cluster.shape.ToString(), "2x8xH100");
}

}  // namespace
}  // namespace skyrl::catalog

namespace skyrl::catalog {
namespace {

TEST(WeightSyncHookTest, PredictionFillsThePlanUnlessBelowTheBound) {
  PlanRequest r;
  r.model = "Qwen3-8B";
  r.cluster = *ParseCluster("2x8xH100", testing::RealCatalog().hardware());
  r.plan_weight_sync = false;  // the hook alone decides predicted_s
  double seen_bound = -1;
  r.weight_sync_predictor = [&](const Plan& p) -> absl::StatusOr<double> {
    seen_bound = p.weight_sync.lower_bound_s;
    return p.weight_sync.lower_bound_s * 3;
  };
  absl::StatusOr<Plan> p = MakePlan(testing::RealCatalog(), r);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE(p->weight_sync.predicted_s.has_value());
  EXPECT_DOUBLE_EQ(*p->weight_sync.predicted_s, 3 * seen_bound);

  r.weight_sync_predictor = [](const Plan& p) -> absl::StatusOr<double> {
    return p.weight_sync.lower_bound_s / 2;
  };
  p = MakePlan(testing::RealCatalog(), r);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->weight_sync.predicted_s.has_value());
  EXPECT_TRUE(std::any_of(p->notes.begin(), p->notes.end(), [](const std::string& n) {
    return absl::StrContains(n, "below the lower bound");
  }));

  r.weight_sync_predictor = [](const Plan&) -> absl::StatusOr<double> {
    return absl::UnavailableError("no layout");
  };
  p = MakePlan(testing::RealCatalog(), r);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->weight_sync.predicted_s.has_value());
  EXPECT_TRUE(std::any_of(p->notes.begin(), p->notes.end(),
                          [](const std::string& n) { return absl::StrContains(n, "no layout"); }));
}

}  // namespace
}  // namespace skyrl::catalog

namespace skyrl::catalog {
namespace {

TEST(RowConsistencyTest, AMinimumCoversTheRowsSmallerSizes) {
  // A row's minimum, read for its reference size, also holds for every smaller size of the row
  // (same mode and placement): the planner is monotone in model size where it should be.
  const Catalog& cat = testing::RealCatalog();
  int checked = 0;
  for (const Row& r : cat.rows()) {
    PlanRequest opts;
    UseReferenceRecipe(r, &opts.assumptions);
    const ModelEntry* ref = nullptr;
    for (const ModelEntry& m : r.models)
      if (m.name == r.reference.model) ref = &m;
    ASSERT_NE(ref, nullptr);
    double ref_total = CountParams(ref->arch).total();
    Cluster min = StatedMinimum(cat, r);
    for (const ModelEntry& m : r.models) {
      if (&m == ref || CountParams(m.arch).total() >= ref_total) continue;
      absl::StatusOr<Plan> p = PlanOn(cat, r, m, r.reference.mode, min, r.reference.placement, opts);
      EXPECT_TRUE(p.ok()) << m.name << " at " << r.family << "'s minimum: " << p.status();
      ++checked;
    }
  }
  EXPECT_GE(checked, 8);
}

}  // namespace
}  // namespace skyrl::catalog

namespace skyrl::catalog {
namespace {

// The low-precision training recipes (catalog/memory.h, TrainingPrecision): the same for every
// row that lists them, refused for rows that do not and on GPUs without the format.
TEST(TrainingPrecisionTest, RecipesChangeOnlyFullFineTuningState) {
  const Catalog& cat = testing::RealCatalog();
  absl::StatusOr<Catalog::Match> glm = cat.Find("GLM-5.3-753B");
  ASSERT_TRUE(glm.ok()) << glm.status();
  TrainerShape s{"megatron", 32, 2, 1, 16, 16};
  Assumptions bf16, mx;
  mx.training_precision = "mxfp8";
  MemoryBreakdown a = TrainerMemory(*glm->model, *glm->row, Mode::kFull, s, bf16);
  MemoryBreakdown b = TrainerMemory(*glm->model, *glm->row, Mode::kFull, s, mx);
  // Per trainable parameter: 2 + 2 + 12 = 16 B in bf16; 2.0625 + 2 + 8 = 12.0625 B in MXFP8. The
  // frozen vision tower (bf16 weights either way) is taken out of the weights first.
  double shard = b.gradients / 2;
  EXPECT_NEAR(b.optimizer, 8 * shard, 1e-6 * b.optimizer);
  EXPECT_NEAR(a.optimizer, 12 * shard, 1e-6 * a.optimizer);
  EXPECT_NEAR(a.weights - b.weights, (2 - 2.0625) * shard, 1e-6 * a.weights);
  EXPECT_DOUBLE_EQ(a.activations, b.activations);
  // LoRA keeps a bf16 base: unchanged.
  EXPECT_DOUBLE_EQ(TrainerMemory(*glm->model, *glm->row, Mode::kLora, s, bf16).total(),
                   TrainerMemory(*glm->model, *glm->row, Mode::kLora, s, mx).total());

  absl::StatusOr<TrainingPrecision> fp8 = ChooseTrainingPrecision(*glm->row, "fp8");
  EXPECT_TRUE(absl::IsInvalidArgument(fp8.status()));  // GLM-5.3 lists MXFP8 only
  EXPECT_TRUE(absl::StrContains(fp8.status().message(), "--training-precision")) << fp8.status();
  EXPECT_TRUE(absl::StrContains(fp8.status().message(), "bf16, mxfp8")) << fp8.status();
  absl::StatusOr<Catalog::Match> qwen = cat.Find("Qwen3-8B");
  ASSERT_TRUE(qwen.ok());
  EXPECT_FALSE(ChooseTrainingPrecision(*qwen->row, "mxfp8").ok());
  EXPECT_TRUE(ChooseTrainingPrecision(*qwen->row, "").ok());

  // MXFP8 needs Blackwell: refused on H200 as a precondition, with the GPU's formats.
  PlanRequest req;
  req.model = "GLM-5.3-753B";
  req.mode = Mode::kFull;
  req.cluster = *ParseCluster("8x8xH200", cat.hardware());
  req.assumptions.training_precision = "mxfp8";
  absl::StatusOr<Plan> p = MakePlan(cat, req);
  EXPECT_TRUE(absl::IsFailedPrecondition(p.status())) << p.status();
  EXPECT_TRUE(absl::StrContains(p.status().message(), "H200 does not train in mxfp8")) << p.status();

  // MXFP8 with its bf16 moments lowers GLM-5.3's own minimum (7x8 -> 6x8 B300 with separate
  // pools), not to the table's 4x8: that takes the reading's fp8 moments (OptimizerStateTest).
  Cluster b300 = StatedMinimum(cat, *glm->row);
  PlanRequest o;
  std::optional<HardwareSpec> in_bf16 =
      MinimumHardware(cat, *glm->row, *glm->model, Mode::kFull, b300.gpu, Placement::kSeparate, o);
  o.assumptions.training_precision = "mxfp8";
  std::optional<HardwareSpec> in_mx =
      MinimumHardware(cat, *glm->row, *glm->model, Mode::kFull, b300.gpu, Placement::kSeparate, o);
  ASSERT_TRUE(in_bf16 && in_mx);
  EXPECT_LT(in_mx->total_gpus(), in_bf16->total_gpus());
  EXPECT_GT(in_mx->total_gpus(), b300.shape.total_gpus());

  // Without a cluster, the row's minimum is planned with the recipe and placement it was read
  // for, on the stated minimum itself.
  PlanRequest none;
  none.model = "GLM-5.3-753B";
  absl::StatusOr<Plan> q = MakePlan(cat, none);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->assumptions.training_precision, "mxfp8");
  EXPECT_EQ(q->assumptions.optimizer_state, "fp8");
  EXPECT_EQ(q->placement, Placement::kColocated);
  EXPECT_EQ(q->cluster.shape.ToString(), "4x8xB300");
  EXPECT_FALSE(std::any_of(q->notes.begin(), q->notes.end(),
                           [](const std::string& n) { return absl::StrContains(n, "no --cluster"); }));
  EXPECT_TRUE(std::any_of(q->notes.begin(), q->notes.end(),
                          [](const std::string& n) { return absl::StrContains(n, "mxfp8 training"); }));
}

}  // namespace
}  // namespace skyrl::catalog

namespace skyrl::catalog {
namespace {

// --optimizer-state (Assumptions::optimizer_state): Adam's moments in fp32, bf16 or fp8 over the
// fp32 master, for every recipe; Megatron only where it differs from the recipe's own.
TEST(OptimizerStateTest, BytesPerParameterForEveryRecipeAndState) {
  const Catalog& cat = testing::RealCatalog();
  absl::StatusOr<Catalog::Match> glm = cat.Find("GLM-5.3-753B");
  ASSERT_TRUE(glm.ok());
  struct Case {
    const char* recipe;
    const char* state;  // "" = the recipe's own
    double bytes;       // weights + bf16 gradients + fp32 master + two moments
  };
  const double mx = 2 * (1 + 1.0 / 32);
  for (Case c :
       {Case{"bf16", "", 2 + 2 + 4 + 8}, Case{"bf16", "fp32", 16}, Case{"bf16", "bf16", 12},
        Case{"bf16", "fp8", 10}, Case{"mxfp8", "", mx + 2 + 4 + 4}, Case{"mxfp8", "fp32", mx + 2 + 4 + 8},
        Case{"mxfp8", "bf16", mx + 2 + 4 + 4}, Case{"mxfp8", "fp8", mx + 2 + 4 + 2}}) {
    SCOPED_TRACE(std::string(c.recipe) + "/" + c.state);
    Assumptions a;
    a.training_precision = c.recipe;
    a.optimizer_state = c.state;
    absl::StatusOr<TrainingPrecision> r = ChooseTrainingRecipe(*glm->row, a);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_DOUBLE_EQ(r->BytesPerParam(a.grad_bytes), c.bytes);
    // The memory model charges exactly that per trainable parameter (the frozen vision tower
    // aside, which stays bf16 weights only).
    TrainerShape s{"megatron", 32, 2, 1, 16, 16};
    MemoryBreakdown m = TrainerMemory(*glm->model, *glm->row, Mode::kFull, s, a);
    double shard = m.gradients / a.grad_bytes;
    EXPECT_NEAR(m.optimizer, (c.bytes - r->weight_bytes - 2) * shard, 1e-6 * m.optimizer);
  }
  // The fp8 recipe (Qwen-3.5 lists it) with fp8 moments: 2 + 2 + 4 + 2.
  absl::StatusOr<Catalog::Match> q35 = cat.Find("Qwen3.5-4B");
  ASSERT_TRUE(q35.ok());
  Assumptions f;
  f.training_precision = "fp8";
  f.optimizer_state = "fp8";
  ASSERT_TRUE(ChooseTrainingRecipe(*q35->row, f).ok());
  EXPECT_DOUBLE_EQ(ChooseTrainingRecipe(*q35->row, f)->BytesPerParam(2), 10);
  EXPECT_DOUBLE_EQ(OptimizerStateBytes("fp8"), 1);
  EXPECT_DOUBLE_EQ(OptimizerStateBytes("fp16"), 0);  // not a catalog choice
}

TEST(OptimizerStateTest, UnknownValuesAndNonMegatronTrainersAreRefusedNamingTheFlag) {
  const Catalog& cat = testing::RealCatalog();
  absl::StatusOr<Catalog::Match> qwen = cat.Find("Qwen3-8B");
  ASSERT_TRUE(qwen.ok());
  Assumptions a;
  a.optimizer_state = "fp4";
  absl::StatusOr<TrainingPrecision> bad = ChooseTrainingRecipe(*qwen->row, a);
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "--optimizer-state")) << bad.status();
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "\"fp4\"")) << bad.status();

  PlanRequest req;
  req.model = "Qwen3-8B";
  req.cluster = *ParseCluster("1x8xH100", cat.hardware());
  req.assumptions.optimizer_state = "fp4";
  absl::StatusOr<Plan> p = MakePlan(cat, req);
  EXPECT_TRUE(absl::IsInvalidArgument(p.status())) << p.status();
  // FSDP's Adam keeps the recipe's moments: another dtype needs Megatron's precision-aware
  // optimizer (Qwen3-8B runs on FSDP by default).
  req.assumptions.optimizer_state = "fp8";
  p = MakePlan(cat, req);
  EXPECT_TRUE(absl::IsInvalidArgument(p.status())) << p.status();
  EXPECT_TRUE(absl::StrContains(p.status().message(), "--optimizer-state: fp8 moments need Megatron-Core's"))
      << p.status();
  // Naming the recipe's own dtype is allowed anywhere; on Megatron any dtype, with bf16
  // training too (Megatron does not tie the moments to the training precision).
  req.assumptions.optimizer_state = "fp32";
  p = MakePlan(cat, req);
  EXPECT_TRUE(p.ok()) << p.status();
  req.backend = "megatron";
  req.assumptions.optimizer_state = "fp8";
  p = MakePlan(cat, req);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(std::any_of(p->notes.begin(), p->notes.end(), [](const std::string& n) {
    return absl::StrContains(n, "bf16 training with fp8 Adam moments") &&
           absl::StrContains(n, "--exp-avg-dtype fp8");
  }));
  // LoRA ignores it (the adapters' optimizer), saying so; its memory does not change.
  req.mode = Mode::kLora;
  absl::StatusOr<Plan> lora = MakePlan(cat, req);
  req.assumptions.optimizer_state = "";
  absl::StatusOr<Plan> lora0 = MakePlan(cat, req);
  ASSERT_TRUE(lora.ok() && lora0.ok());
  EXPECT_DOUBLE_EQ(lora->trainer.memory.total(), lora0->trainer.memory.total());
  EXPECT_TRUE(std::any_of(lora->notes.begin(), lora->notes.end(), [](const std::string& n) {
    return absl::StrContains(n, "--optimizer-state: not used for LoRA");
  }));
}

TEST(OptimizerStateTest, Glm53ReachesItsStatedMinimumOnlyWithFp8Moments) {
  // 743B trainable parameters on 32 B300: 12.06 B (MXFP8, bf16 moments) does not fit, 10.06 B
  // (fp8 moments) does, colocated; separate pools need 5x8 even so.
  const Catalog& cat = testing::RealCatalog();
  const Row& row = *cat.Find("GLM-5.3-753B")->row;
  const ModelEntry& m = *cat.Find("GLM-5.3-753B")->model;
  Cluster min = StatedMinimum(cat, row);
  PlanRequest opts;
  opts.assumptions.training_precision = "mxfp8";
  for (const char* state : {"", "bf16", "fp32"}) {
    opts.assumptions.optimizer_state = state;
    absl::StatusOr<Plan> p = PlanOn(cat, row, m, Mode::kFull, min, Placement::kColocated, opts);
    EXPECT_TRUE(absl::IsResourceExhausted(p.status())) << state;
    // The refusal names the reading's recipe and the flags that give it.
    EXPECT_TRUE(absl::StrContains(p.status().message(), "(colocated, mxfp8 training, fp8 Adam moments)"))
        << p.status();
    EXPECT_TRUE(absl::StrContains(p.status().message(), "try --optimizer-state fp8")) << p.status();
  }
  opts.assumptions.optimizer_state = "fp8";
  absl::StatusOr<Plan> p = PlanOn(cat, row, m, Mode::kFull, min, Placement::kColocated, opts);
  ASSERT_TRUE(p.ok()) << p.status();
  double trainable = p->trainer.memory.gradients / 2 * 32;
  EXPECT_NEAR(trainable / 1e9, 743, 5);
  double state = p->trainer.memory.weights + p->trainer.memory.gradients + p->trainer.memory.optimizer;
  EXPECT_LT(state * 32, 7.6e12);  // about 7.5 TB with the frozen tower's bf16 weights
  std::optional<HardwareSpec> separate =
      MinimumHardware(cat, row, m, Mode::kFull, min.gpu, Placement::kSeparate, opts);
  ASSERT_TRUE(separate.has_value());
  EXPECT_EQ(separate->ToString(), "5x8xB300");
  // The bare command on the stated minimum (separate pools, bf16) names every flag it lacks.
  PlanRequest bare;
  bare.model = "GLM-5.3-753B";
  bare.cluster = min;
  absl::StatusOr<Plan> b = MakePlan(cat, bare);
  ASSERT_TRUE(absl::IsResourceExhausted(b.status())) << b.status();
  EXPECT_TRUE(absl::StrContains(b.status().message(),
                                "try --colocate --training-precision mxfp8 --optimizer-state fp8"))
      << b.status();
}

}  // namespace
}  // namespace skyrl::catalog
