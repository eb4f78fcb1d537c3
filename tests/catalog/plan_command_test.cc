// RunPlanCommand: `--json` output parses and carries the plan; refusals and bad input map to
// exit codes 1 and 2 with JSON errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "catalog/plan_command.h"

namespace skyrl::catalog {
namespace {

struct Result {
  int rc;
  std::string out, err;
};

Result Exec(PlanCommandOptions o) {
  o.models_dir = SKYRL_TEST_MODELS_DIR;
  std::ostringstream out, err;
  int rc = RunPlanCommand(o, out, err);
  return {rc, out.str(), err.str()};
}

TEST(PlanCommandTest, JsonPlanParses) {
  PlanCommandOptions o;
  o.model = "Kimi-K2.7";
  o.mode = "lora";
  o.cluster = "2x8xB300";
  o.json = true;
  Result r = Exec(o);
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("ok").get<bool>());
  EXPECT_EQ(j.at("model"), "Kimi-K2.7");
  EXPECT_EQ(j.at("mode"), "lora");
  EXPECT_EQ(j.at("cluster").at("gpu"), "B300");
  int trainer = j.at("trainer").at("gpus"), generator = j.at("generator").at("gpus");
  EXPECT_EQ(trainer + generator, 16);
  EXPECT_EQ(j.at("trainer").at("tp").get<int>() * j.at("trainer").at("pp").get<int>() *
                j.at("trainer").at("dp").get<int>(),
            trainer);
  EXPECT_LE(j.at("trainer").at("memory_per_gpu").at("total_gb").get<double>(),
            j.at("cluster").at("usable_gb_per_gpu").get<double>());
  EXPECT_EQ(j.at("generator").at("precision"), "int4");
  EXPECT_FALSE(j.at("placement_groups").empty());
  EXPECT_GT(j.at("weight_sync").at("lower_bound_s").get<double>(), 0);
  // The weight_sync planner's figures: a prediction no faster than its bound.
  const nlohmann::json& ws = j.at("weight_sync");
  EXPECT_GE(ws.at("predicted_s").get<double>(), ws.at("lower_bound_s").get<double>());
  const nlohmann::json& plan = ws.at("plan");
  EXPECT_EQ(plan.at("senders").get<int>(), trainer);
  EXPECT_EQ(plan.at("receivers").get<int>(), generator);
  EXPECT_EQ(plan.at("synced"), "LoRA adapters only");
  EXPECT_GT(plan.at("bytes").get<int64_t>(), 0);
  EXPECT_DOUBLE_EQ(plan.at("predicted_s").get<double>(), ws.at("predicted_s").get<double>());
  for (const char* f : {"sender_layout", "receiver_layout", "params", "lower_bound_s", "planning_ms"})
    EXPECT_TRUE(plan.contains(f)) << f;
}

TEST(PlanCommandTest, TextPlanNamesTheLayout) {
  PlanCommandOptions o;
  o.model = "Qwen3-8B";
  o.cluster = "1x8xH100";
  Result r = Exec(o);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("trainer"), std::string::npos);
  EXPECT_NE(r.out.find("placement groups"), std::string::npos);
  EXPECT_NE(r.out.find("lower bound"), std::string::npos);
}

TEST(PlanCommandTest, RefusalIsExitOneAndParsesAsJson) {
  PlanCommandOptions o;
  o.model = "Kimi-K2.7";
  o.mode = "full";
  o.json = true;
  Result r = Exec(o);
  EXPECT_EQ(r.rc, 1);
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j.at("ok").get<bool>());
  EXPECT_EQ(j.at("code"), "FAILED_PRECONDITION");
  EXPECT_NE(j.at("error").get<std::string>().find("known not to work"), std::string::npos);
}

TEST(PlanCommandTest, BadInputIsExitTwoNamingTheFlag) {
  PlanCommandOptions o;
  o.model = "Qwen3-8B";
  o.cluster = "2x8xA100";
  Result r = Exec(o);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--cluster"), std::string::npos) << r.err;
  o.cluster = "";
  o.model = "NoSuchModel";
  r = Exec(o);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--model"), std::string::npos) << r.err;
}

TEST(PlanCommandTest, TrainingPrecisionFlagFollowsTheRowAndTheGpu) {
  PlanCommandOptions o;
  o.model = "GLM-5.3-753B";
  o.mode = "full";
  o.cluster = "6x8xB300";
  o.json = true;
  o.training_precision = "mxfp8";
  Result r = Exec(o);
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("trainer").at("training_precision"), "mxfp8");
  // The same cluster in bf16 does not fit (GLM-5.3 needs 7x8 B300 in bf16): a refusal, exit 1.
  o.training_precision = "bf16";
  r = Exec(o);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("code"), "RESOURCE_EXHAUSTED");
  // A mode the row does not list is bad input naming the flag; MXFP8 on Hopper is a refusal.
  o.json = false;
  o.training_precision = "fp8";
  r = Exec(o);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--training-precision: GLM-5.3 supports bf16, mxfp8 training"), std::string::npos)
      << r.err;
  o.training_precision = "mxfp8";
  o.cluster = "8x8xH200";
  r = Exec(o);
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("H200 does not train in mxfp8"), std::string::npos) << r.err;
}

TEST(PlanCommandTest, OptimizerStateFlagShowsInJsonAndText) {
  PlanCommandOptions o;
  o.model = "GLM-5.3-753B";
  o.cluster = "4x8xB300";
  o.colocate = true;
  o.training_precision = "mxfp8";
  o.optimizer_state = "fp8";
  o.json = true;
  Result r = Exec(o);
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("trainer").at("optimizer_state"), "fp8");
  EXPECT_NEAR(j.at("trainer").at("state_bytes_per_param").get<double>(), 10.0625, 1e-9);
  o.json = false;
  r = Exec(o);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("fp8 Adam moments over an fp32 master (10.06 B per parameter)"), std::string::npos)
      << r.out;
  // Without the flag: the recipe's own bf16 moments, which do not fit 4x8 (exit 1).
  o.optimizer_state = "";
  o.json = true;
  r = Exec(o);
  EXPECT_EQ(r.rc, 1) << r.out;
  // The default recipe of a bf16 plan is fp32 moments at 16 B; LoRA has no such field.
  o = PlanCommandOptions();
  o.model = "Qwen3-8B";
  o.cluster = "1x8xH100";
  o.json = true;
  r = Exec(o);
  ASSERT_EQ(r.rc, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("trainer").at("optimizer_state"), "fp32");
  EXPECT_DOUBLE_EQ(j.at("trainer").at("state_bytes_per_param").get<double>(), 16);
  o.mode = "lora";
  r = Exec(o);
  ASSERT_EQ(r.rc, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("trainer").at("optimizer_state").is_null());
  // An unknown dtype is bad input naming the flag (exit 2).
  o.mode = "";
  o.optimizer_state = "fp16";
  o.json = false;
  r = Exec(o);
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("--optimizer-state"), std::string::npos) << r.err;
  // CLI11 refuses it before the planner sees it, naming the option.
  CLI::App app;
  PlanCommandOptions parsed;
  AddPlanFlags(&app, &parsed);
  EXPECT_THROW(app.parse(std::vector<std::string>{"fp4", "--optimizer-state"}), CLI::ValidationError);
  app.parse(std::vector<std::string>{"bf16", "--optimizer-state"});
  EXPECT_EQ(parsed.optimizer_state, "bf16");
}

TEST(PlanCommandTest, ListJsonParses) {
  PlanCommandOptions o;
  o.list = true;
  o.json = true;
  Result r = Exec(o);
  ASSERT_EQ(r.rc, 0);
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("rows").size(), 21u);
}

}  // namespace
}  // namespace skyrl::catalog
