// The planner against the table: every row plans at its stated minimum (for the size, mode and
// placement its reading names) and is refused one step below it, with the reason and the
// minimum; rows whose minimum the memory model cannot reproduce say so (row.conflict).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/match.h"
#include "catalog/params.h"
#include "catalog/planner.h"
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
  opts.assumptions.training_precision = r.reference.training_precision;  // a listed mode, if any
  absl::StatusOr<Plan> at = PlanOn(cat, r, m, r.reference.mode, min, r.reference.placement, opts);
  if (r.reference.conservative_minimum) {
    // The table asks for more than the model needs: it plans at the stated minimum, and the
    // "refused below" half is checked at the model's own minimum, which must be smaller.
    ASSERT_TRUE(at.ok()) << r.family << " at " << min.shape.ToString() << ": " << at.status();
    std::optional<HardwareSpec> own = MinimumHardware(cat, r, m, r.reference.mode, min.gpu, r.reference.placement, opts);
    ASSERT_TRUE(own.has_value()) << r.family;
    EXPECT_LT(own->total_gpus(), min.shape.total_gpus()) << "not conservative any more: drop reference.minimum";
    EXPECT_TRUE(std::any_of(at->notes.begin(), at->notes.end(),
                            [](const std::string& n) { return absl::StrContains(n, "conservative"); }));
    Cluster own_min = min;
    own_min.shape = *own;
    ASSERT_TRUE(PlanOn(cat, r, m, r.reference.mode, own_min, r.reference.placement, opts).ok());
    std::vector<Cluster> below = BelowMinimum(cat, own_min);
    ASSERT_FALSE(below.empty());
    for (const Cluster& b : below) {
      absl::StatusOr<Plan> p = PlanOn(cat, r, m, r.reference.mode, b, r.reference.placement, opts);
      ASSERT_TRUE(absl::IsResourceExhausted(p.status())) << r.family << " should not fit " << b.shape.ToString();
      std::string msg(p.status().message());
      EXPECT_TRUE(absl::StrContains(msg, "does not fit " + b.shape.Describe())) << msg;
      EXPECT_TRUE(absl::StrContains(msg, "the trainer") || absl::StrContains(msg, "generator")) << msg;
      EXPECT_TRUE(absl::StrContains(msg, "needs at least")) << msg;
    }
    std::printf("%s: table says %s (conservative), the model's own minimum is %s\n", r.family.c_str(),
                min.shape.ToString().c_str(), own->ToString().c_str());
    return;
  }
  if (!r.conflict.empty()) {
    // The honest model disagrees with the table, either way: the stated minimum is refused
    // (the refusal says so and names the model's own minimum), or it plans and so does a
    // cluster one step below. Either way the model's own minimum plans. When the model changes
    // so that the row agrees, this fails and the conflict note must go.
    std::optional<HardwareSpec> own = MinimumHardware(cat, r, m, r.reference.mode, min.gpu, r.reference.placement, opts);
    ASSERT_TRUE(own.has_value()) << r.family;
    if (at.ok()) {
      bool below_fits = false;
      for (const Cluster& b : BelowMinimum(cat, min))
        below_fits |= PlanOn(cat, r, m, r.reference.mode, b, r.reference.placement, opts).ok();
      EXPECT_TRUE(below_fits) << r.family << ": no conflict left, remove it";
      EXPECT_LT(own->total_gpus(), min.shape.total_gpus() + 1);
      EXPECT_TRUE(std::any_of(at->notes.begin(), at->notes.end(),
                              [](const std::string& n) { return absl::StrContains(n, "calibration conflict"); }));
    } else {
      ASSERT_TRUE(absl::IsResourceExhausted(at.status())) << r.family << ": " << at.status();
      EXPECT_TRUE(absl::StrContains(at.status().message(), "needs at least " + own->Describe())) << at.status();
      EXPECT_TRUE(absl::StrContains(at.status().message(), "calibration conflict")) << at.status();
      EXPECT_GT(own->total_gpus(), min.shape.total_gpus());
    }
    Cluster c = min;
    c.shape = *own;
    EXPECT_TRUE(PlanOn(cat, r, m, r.reference.mode, c, r.reference.placement, opts).ok());
    std::printf("%s: table says %s, the model's own minimum is %s\n", r.family.c_str(), min.shape.ToString().c_str(),
                own->ToString().c_str());
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
    EXPECT_TRUE(absl::StrContains(msg, "the table's minimum for " + r.family + " is " + r.min_hardware.Describe()))
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
                           for (char c : info.param) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return s;
                         });

TEST(PlannerTest, KimiFullFineTuningIsRefusedNamingLoraMinimum) {
  PlanRequest req;
  req.model = "Kimi-K2.7";
  req.mode = Mode::kFull;
  absl::StatusOr<Plan> p = MakePlan(RealCatalog(), req);
  ASSERT_TRUE(absl::IsFailedPrecondition(p.status())) << p.status();
  EXPECT_EQ(p.status().message(), "Kimi-K2.7: full fine-tuning is known not to work; LoRA needs at least 2 nodes x 8 B300");
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
  EXPECT_EQ(p->groups[0].name, "trainer");
  int gpus = 0;
  for (const PlacementGroupSpec& g : p->groups) {
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
  EXPECT_GE(p->weight_sync.lower_bound_s,
            p->weight_sync.bytes / p->generator.engines / (p->generator.tp * p->weight_sync.link_gb_s * 1e9) * 0.999);
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
  EXPECT_EQ(col->groups[0].bundles.size(), 8u);
  EXPECT_EQ(col->groups[0].domain_label, "nvlink_domain");  // one node: one NVLink domain
  // Across nodes the group cannot be held to one NVLink domain.
  req.cluster = *ParseCluster("2x8xH100", cat.hardware());
  absl::StatusOr<Plan> two = MakePlan(cat, req);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->groups[0].strategy, "PACK");
  EXPECT_EQ(two->groups[0].domain_label, "");
  EXPECT_EQ(two->weight_sync.link, "NIC");
}

}  // namespace
}  // namespace skyrl::catalog

namespace skyrl::catalog {
namespace {

// Calibration aid, not a check: for every row, which (size, mode, placement) readings plan at
// the stated minimum and fail every step below. Run with
//   build/bin/tests/catalog_test --gtest_also_run_disabled_tests --gtest_filter='*Explore*'
TEST(PlannerCalibration, DISABLED_ExploreReadings) {
  const Catalog& cat = testing::RealCatalog();
  PlanRequest opts;
  // Try other assumptions without rebuilding: SKYRL_CAL_SEQ, SKYRL_CAL_KV, SKYRL_CAL_USABLE.
  if (const char* v = std::getenv("SKYRL_CAL_SEQ")) opts.assumptions.seq_len = std::atoll(v);
  if (const char* v = std::getenv("SKYRL_CAL_KV")) opts.assumptions.kv_sequences = std::atoi(v);
  if (const char* v = std::getenv("SKYRL_CAL_USABLE")) opts.assumptions.usable_fraction = std::atof(v);
  // SKYRL_CAL_OFFLOAD=1: allow the CPU optimizer (--optimizer-offload) for every row.
  if (const char* v = std::getenv("SKYRL_CAL_OFFLOAD")) opts.assumptions.optimizer_offload = std::atoi(v) != 0;
  for (const Row& r : cat.rows()) {
    Cluster min = StatedMinimum(cat, r);
    std::string line = r.family + " @" + min.shape.ToString() + ":";
    for (Placement pl : {Placement::kSeparate, Placement::kColocated})
      for (Mode mode : {Mode::kFull, Mode::kLora}) {
        if (r.SupportFor(mode) == Support::kNotWorking) continue;
        for (const ModelEntry& m : r.models) {
          if (!PlanOn(cat, r, m, mode, min, pl, opts).ok()) continue;
          bool below_fits = false;
          for (const Cluster& b : BelowMinimum(cat, min)) below_fits |= PlanOn(cat, r, m, mode, b, pl, opts).ok();
          if (!below_fits) line += " [" + m.name + " " + std::string(ModeName(mode)) + " " + std::string(PlacementName(pl)) + "]";
        }
      }
    std::printf("%s\n", line.c_str());
  }
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
  EXPECT_NEAR(bf16->generator.memory.weights * bf16->generator.tp / (int4->generator.memory.weights * int4->generator.tp),
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
  EXPECT_NEAR(GeneratorMemory(*m->model, 4, bf16, on).weights - GeneratorMemory(*m->model, 4, bf16, off).weights,
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

  r.weight_sync_predictor = [](const Plan& p) -> absl::StatusOr<double> { return p.weight_sync.lower_bound_s / 2; };
  p = MakePlan(testing::RealCatalog(), r);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->weight_sync.predicted_s.has_value());
  EXPECT_TRUE(std::any_of(p->notes.begin(), p->notes.end(),
                          [](const std::string& n) { return absl::StrContains(n, "below the lower bound"); }));

  r.weight_sync_predictor = [](const Plan&) -> absl::StatusOr<double> { return absl::UnavailableError("no layout"); };
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
  PlanRequest opts;
  int checked = 0;
  for (const Row& r : cat.rows()) {
    if (!r.conflict.empty()) continue;
    opts.assumptions.training_precision = r.reference.training_precision;
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

  // The recipe lowers GLM-5.3's own minimum (7x8 -> 6x8 B300 with separate pools), not to the
  // table's 4x8 (the recorded conflict).
  Cluster b300 = StatedMinimum(cat, *glm->row);
  PlanRequest o;
  std::optional<HardwareSpec> in_bf16 =
      MinimumHardware(cat, *glm->row, *glm->model, Mode::kFull, b300.gpu, Placement::kSeparate, o);
  o.assumptions.training_precision = "mxfp8";
  std::optional<HardwareSpec> in_mx = MinimumHardware(cat, *glm->row, *glm->model, Mode::kFull, b300.gpu, Placement::kSeparate, o);
  ASSERT_TRUE(in_bf16 && in_mx);
  EXPECT_LT(in_mx->total_gpus(), in_bf16->total_gpus());
  EXPECT_GT(in_mx->total_gpus(), b300.shape.total_gpus());

  // Without a cluster, the row's minimum is planned with the recipe it was read for.
  PlanRequest none;
  none.model = "GLM-5.3-753B";
  absl::StatusOr<Plan> q = MakePlan(cat, none);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->assumptions.training_precision, "mxfp8");
  EXPECT_TRUE(std::any_of(q->notes.begin(), q->notes.end(),
                          [](const std::string& n) { return absl::StrContains(n, "mxfp8 training"); }));
}

}  // namespace
}  // namespace skyrl::catalog
