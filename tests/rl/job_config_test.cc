#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_replace.h"
#include "rl/tasks/tokenizer.h"
#include "rl/train/job_config.h"

namespace skyrl::rl {
namespace {

constexpr char kMinimal[] = R"(
trainer:
  tp_size: 2
  placement: {colocate_all: false}
  async: {enabled: true, max_staleness: 2}
  model: {layers: 3, d_model: 32, heads: 4}
  algorithm: {group_size: 4, kl_coef: 0.05, lr: 0.01, loss_reduction: sequence_mean}
generator:
  num_engines: 2
  tensor_parallel_size: 2
  sampling_params: {temperature: 0.7, top_p: 0.9, max_generate_length: 5}
environment: {task: reverse, min_digits: 2, max_digits: 4}
)";

TEST(JobConfig, ReadsEveryGroupOfKeys) {
  auto c = ParseJobConfig(kMinimal, "t.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->trainer.tp_size, 2);
  EXPECT_FALSE(c->trainer.colocate_all);
  EXPECT_TRUE(c->trainer.async_enabled);
  EXPECT_EQ(c->trainer.max_staleness, 2);
  EXPECT_EQ(c->trainer.model.layers, 3);
  EXPECT_EQ(c->trainer.model.d_model, 32);
  EXPECT_EQ(c->trainer.model.vocab, Tokenizer::kVocab);
  EXPECT_EQ(c->trainer.algorithm.group_size, 4);
  EXPECT_DOUBLE_EQ(c->trainer.algorithm.kl_coef, 0.05);
  EXPECT_EQ(c->trainer.algorithm.loss_reduction, "sequence_mean");
  EXPECT_DOUBLE_EQ(c->trainer.algorithm.eps_clip_low, 0.2) << "defaults stay";
  EXPECT_EQ(c->generator.num_engines, 2);
  EXPECT_DOUBLE_EQ(c->generator.top_p, 0.9);
  EXPECT_EQ(c->generator.max_generate_length, 5);
  EXPECT_EQ(c->environment.task, "reverse");
  EXPECT_EQ(c->environment.options.max_digits, 4);
}

TEST(JobConfig, ExampleFilesLoad) {
  for (const char* f : {"grpo_copy.yaml"}) {
    auto c = LoadJobConfig(std::string(SKYRL_SOURCE_DIR) + "/examples/" + f);
    EXPECT_TRUE(c.ok()) << f << ": " << c.status();
  }
}

// Each case: text replaced in kMinimal, and the dotted key the error must name.
struct Bad {
  std::string from, to, key;
};

TEST(JobConfig, BadInputNamesTheKey) {
  const Bad cases[] = {
      {"tp_size: 2", "tp_size: 2\n  tp_sise: 2", "trainer.tp_sise: unknown key"},
      {"colocate_all: false", "colocate_all: false, pack: 1", "trainer.placement.pack: unknown key"},
      {"group_size: 4", "group_size: 4, gamma: 1", "trainer.algorithm.gamma: unknown key"},
      {"environment: {", "extra: 1\nenvironment: {", "extra: unknown key"},
      {"group_size: 4", "group_size: 1", "trainer.algorithm.group_size: must be >= 2, got '1'"},
      {"group_size: 4", "group_size: four", "trainer.algorithm.group_size: must be an integer"},
      {"group_size: 4", "group_size: 4.5", "trainer.algorithm.group_size: must be an integer"},
      {"lr: 0.01", "lr: -1", "trainer.algorithm.lr: must be > 0"},
      {"lr: 0.01", "lr: .nan", "trainer.algorithm.lr: must be a finite number"},
      {"top_p: 0.9", "top_p: 1.5", "generator.sampling_params.top_p: must be in (0, 1]"},
      {"enabled: true", "enabled: maybe", "trainer.async.enabled: must be true or false"},
      {"max_staleness: 2", "max_staleness: -1", "trainer.async.max_staleness: must be >= 0"},
      {"num_engines: 2", "num_engines: 0", "generator.num_engines: must be >= 1"},
      {"task: reverse", "task: multiply", "environment.task: task \"multiply\" is not registered"},
      {"task: reverse, ", "", "environment.task: required"},
      {"loss_reduction: sequence_mean", "loss_reduction: sum",
       "trainer.algorithm.loss_reduction: must be token_mean"},
      {"tp_size: 2", "tp_size: 3", "trainer.tp_size: 3 does not divide model.heads 4"},
      {"tensor_parallel_size: 2", "tensor_parallel_size: 8",
       "generator.tensor_parallel_size: 8 does not divide model.heads 4"},
      {"min_digits: 2, max_digits: 4", "min_digits: 5, max_digits: 4",
       "environment.max_digits: 4 is below min_digits 5"},
      {"placement: {colocate_all: false}", "placement: 3", "trainer.placement: must be a map"},
      {"heads: 4}", "heads: 5}", "model.heads: 5 does not divide d_model 32"},
  };
  for (const Bad& b : cases) {
    std::string text = kMinimal;
    auto pos = text.find(b.from);
    ASSERT_NE(pos, std::string::npos) << b.from;
    text.replace(pos, b.from.size(), b.to);
    auto c = ParseJobConfig(text, "t.yaml");
    ASSERT_FALSE(c.ok()) << "accepted: " << b.to;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(c.status().message().find(b.key), absl::string_view::npos) << c.status() << "\nwant: " << b.key;
    EXPECT_NE(c.status().message().find("t.yaml"), absl::string_view::npos) << c.status();
  }
}

TEST(JobConfig, NotYamlOrMissingFile) {
  EXPECT_EQ(ParseJobConfig("trainer: [1, 2", "t.yaml").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseJobConfig("", "t.yaml").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseJobConfig("- 1\n- 2\n", "t.yaml").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadJobConfig("/nonexistent/x.yaml").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace skyrl::rl
