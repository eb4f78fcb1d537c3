// The GRPO job's configuration, read from YAML (examples/grpo_<task>.yaml). Keys follow
// SkyRL's: trainer.placement.colocate_all, trainer.tp_size, trainer.algorithm.*,
// trainer.async.max_staleness, generator.num_engines, generator.tensor_parallel_size,
// generator.sampling_params.*, environment.*. Every key is optional (defaults below) except
// environment.task; an unknown key, a value of the wrong type or out of range is an
// InvalidArgument naming the dotted key ("trainer.algorithm.group_size: must be >= 2, got 1").
//
// Torch-free so that the job driver can read it without LibTorch. Plain values.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rl/policy/config.h"
#include "rl/tasks/tasks.h"

namespace skyrl::rl {

struct JobConfig {
  struct Algorithm {
    std::string advantage_estimator = "grpo";  // only grpo today
    int group_size = 8;                        // samples per prompt (G)
    double eps_clip_low = 0.2;
    double eps_clip_high = 0.2;
    double kl_coef = 0.01;  // beta of the k3 KL penalty against the reference model
    double advantage_eps = 1e-6;
    std::string loss_reduction = "token_mean";  // token_mean | sequence_mean
    double lr = 1e-3;
    double weight_decay = 0.0;
    double max_grad_norm = 1.0;
    int update_epochs = 1;
    int mini_batches = 1;
  };
  struct Trainer {
    int tp_size = 1;
    int dp_size = 1;
    bool colocate_all = true;    // trainer.placement.colocate_all
    bool async_enabled = false;  // trainer.async.enabled
    int max_staleness = 1;       // trainer.async.max_staleness, in weight versions
    int steps = 100;
    int train_batch_size = 16;  // prompts per step; samples = prompts * group_size
    int64_t seed = 1;
    int num_threads = 1;  // torch intra-op threads per process (see docs/rl.md: 1 wins here)
    std::string output_dir = "skyrl-grpo-out";
    int ckpt_interval = 0;  // steps between checkpoints; 0 = only at the end, -1 = never
    PolicyConfig model;     // trainer.model.*; vocab comes from the tokenizer
    Algorithm algorithm;
  };
  struct Generator {
    int num_engines = 1;
    int tensor_parallel_size = 1;
    double temperature = 1.0;     // generator.sampling_params.temperature
    double top_p = 1.0;           // generator.sampling_params.top_p
    int max_generate_length = 8;  // generator.sampling_params.max_generate_length
  };
  struct Environment {
    std::string task;  // a registered task name (tasks.h)
    TaskOptions options;
    double target_reward = 0.9;  // the run reports when the mean reward first reaches it
  };

  Trainer trainer;
  Generator generator;
  Environment environment;
};

// `source` names the text in errors (a file name).
absl::StatusOr<JobConfig> ParseJobConfig(absl::string_view yaml, absl::string_view source);
// NotFound when the file cannot be read.
absl::StatusOr<JobConfig> LoadJobConfig(const std::string& path);
// A run's command-line overrides over the file's: `steps` (> 0) and `output_dir` (non-empty);
// then creates the output directory (InvalidArgument naming trainer.output_dir when it cannot).
absl::Status ApplyRunOverrides(JobConfig& config, int steps, const std::string& output_dir);

}  // namespace skyrl::rl
