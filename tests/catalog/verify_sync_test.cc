// The weight check of every catalog row (catalog/verify_sync.h): each model's plan at its row's
// stated minimum, synced at small scale over TCP with every rank its own process, every engine
// byte checked; and a wrong split rule must fail it, naming the parameter.
#include "catalog/verify_sync.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/catalog/test_catalog.h"

namespace skyrl::catalog {
namespace {

using ::skyrl::catalog::testing::RealCatalog;
using ::testing::HasSubstr;

absl::StatusOr<Plan> PlanAtRowMinimum(const std::string& model) {
  PlanRequest req;
  req.model = model;
  return MakePlan(RealCatalog(), req);
}

TEST(VerifySyncTest, EveryModelOfEveryRowArrivesIntactInItsEngines) {
  int verified = 0, unplanned = 0;
  for (const Row& row : RealCatalog().rows())
    for (const ModelEntry& m : row.models) {
      SCOPED_TRACE(m.name);
      absl::StatusOr<Plan> plan = PlanAtRowMinimum(m.name);
      if (absl::IsResourceExhausted(plan.status())) {
        // A size the row's minimum cannot hold in full fine-tuning (the catalog says so, and
        // names its own minimum): its LoRA plan there.
        PlanRequest req;
        req.model = m.name;
        req.mode = Mode::kLora;
        plan = MakePlan(RealCatalog(), req);
      }
      if (absl::IsResourceExhausted(plan.status())) {
        ++unplanned;
        continue;
      }
      ASSERT_TRUE(plan.ok()) << plan.status();
      absl::StatusOr<VerifyResult> r = VerifyWeightSync(*plan);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_TRUE(r->verified) << r->failure;
      EXPECT_GT(r->synced_params, 0);
      EXPECT_GT(r->synced_bytes, 0);
      verified += r->verified;
    }
  EXPECT_GE(verified, 40);
  EXPECT_LE(unplanned, 2);
}

TEST(VerifySyncTest, AWrongSplitRuleFailsTheCheckNamingTheParameter) {
  absl::StatusOr<Plan> plan = PlanAtRowMinimum("Qwen3-8B");
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_GT(plan->generator.tp, 1) << "the check needs engines split by TP";
  VerifyOptions o;
  const std::string name = "model.layers.1.self_attn.o_proj.weight";
  o.corrupt = [&](weight_sync::Model& m) {
    for (weight_sync::Param& p : m.params)
      if (p.name == name) {
        ASSERT_EQ(p.split_dim, 1);
        p.split_dim = 0;  // row-parallel taken as column-parallel
        p.head_rows.clear();
      }
  };
  absl::StatusOr<VerifyResult> r = VerifyWeightSync(*plan, o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->verified);
  EXPECT_EQ(r->failed_param, name) << r->failure;
  EXPECT_THAT(r->failure, HasSubstr("its bytes differ from the engines' layout of the full model"));
  EXPECT_THAT(FormatVerifyResult(*r), HasSubstr("weights NOT verified"));
}

TEST(VerifySyncTest, FpEightRolloutsArriveConvertedAndAWrongRuleIsNamed) {
  absl::StatusOr<Plan> plan = PlanAtRowMinimum("GLM-5.3-753B");  // the row lists FP8 rollouts
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->generator.precision.name, "fp8");
  absl::StatusOr<VerifyResult> clean = VerifyWeightSync(*plan);
  ASSERT_TRUE(clean.ok()) << clean.status();
  EXPECT_TRUE(clean->verified) << clean->failure;
  EXPECT_THAT(clean->scaled, HasSubstr("fp8 rollouts"));
  VerifyOptions o;
  std::string name;
  o.corrupt = [&](weight_sync::Model& m) {
    for (weight_sync::Param& p : m.params)
      if (name.empty() && p.split_dim == 1 && p.name.size() > 14 &&
          p.name.compare(p.name.size() - 14, 14, ".o_proj.weight") == 0) {
        name = p.name;
        p.split_dim = 0;
        p.head_rows.clear();
      }
  };
  absl::StatusOr<VerifyResult> r = VerifyWeightSync(*plan, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_FALSE(name.empty());
  EXPECT_FALSE(r->verified);
  EXPECT_EQ(r->failed_param, name) << r->failure;
}

TEST(VerifySyncTest, AParameterTheSyncShouldLeaveOutIsCaughtArriving) {
  absl::StatusOr<Plan> plan = PlanAtRowMinimum("MiMo-7B-RL");  // MTP layers, dropped by default
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_GT(plan->model->arch.mtp_layers, 0);
  absl::StatusOr<VerifyResult> clean = VerifyWeightSync(*plan);
  ASSERT_TRUE(clean.ok()) << clean.status();
  ASSERT_TRUE(clean->verified) << clean->failure;
  EXPECT_LT(clean->synced_params, clean->params);
  // The same sync with an MTP weight renamed out of the filter's reach: it now arrives.
  VerifyOptions o;
  std::string renamed;
  o.corrupt = [&](weight_sync::Model& m) {
    for (weight_sync::Param& p : m.params)
      if (renamed.empty() && p.name.rfind("mtp.", 0) == 0 && p.split_dim < 0) {
        renamed = p.name;
        p.name = "head_" + p.name.substr(4);  // no "mtp." left for the filter to match
      }
  };
  absl::StatusOr<VerifyResult> r = VerifyWeightSync(*plan, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_FALSE(renamed.empty());
  EXPECT_FALSE(r->verified);
  EXPECT_EQ(r->failed_param, renamed) << r->failure;
  EXPECT_THAT(r->failure, HasSubstr("it arrived although the sync leaves it out"));
}

}  // namespace
}  // namespace skyrl::catalog
