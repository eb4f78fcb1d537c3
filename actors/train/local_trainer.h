// The single-process GRPO loop (TP = 1, one generator, sync mode): the algorithm the
// distributed job runs, without the runtime, so that the job can be checked against it
// step for step (issue 6's equivalence test) and so the demo task can be calibrated.
//
// One step: sample train_batch_size prompts from the task, generate group_size responses per
// prompt with the current policy, score them, compute group advantages and the frozen
// reference policy's log-probs, then GrpoLearner::Update. Everything is seeded from
// trainer.seed: the same config gives the same numbers.
//
// Not thread-safe; one run per call.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "actors/train/job_config.h"

namespace skyrl::actors {

struct StepMetrics {
  int step = 0;  // 1-based
  double mean_reward = 0;  // over this step's samples, before its update
  double exact_fraction = 0;  // share of samples with reward 1
  double loss = 0, policy_loss = 0, kl = 0, clip_fraction = 0, grad_norm = 0;
  int64_t response_tokens = 0;
  double tokens_per_s = 0;  // response tokens / step seconds
  double generate_s = 0, reward_s = 0, train_s = 0, step_s = 0;
  double elapsed_s = 0;  // since the run started (pure compute; excludes set-up)
};

struct RunSummary {
  double baseline_reward = 0;  // the initial (random) policy's mean reward on the first step
  double final_reward = 0;     // mean over the last min(5, steps) steps
  int first_step_at_target = -1;  // first step whose mean reward reached the target, or -1
  double seconds_to_target = -1;
  double total_s = 0;
  int steps = 0;
  std::vector<StepMetrics> history;
};

// Runs trainer.steps steps (or stops early after `stop_after_target` consecutive steps at
// or above environment.target_reward, when > 0). `on_step` (may be empty) sees each step as it
// ends. Writes nothing to disk except the final checkpoint under trainer.output_dir when
// trainer.ckpt_interval >= 0 and `write_checkpoint` is true.
// Errors: InvalidArgument naming the config field; Internal from LibTorch.
absl::StatusOr<RunSummary> RunLocalGrpo(const JobConfig& config, const std::function<void(const StepMetrics&)>& on_step,
                                        int stop_after_target = 0, bool write_checkpoint = false);

// "step 12 reward 0.453 exact 0.20 kl 0.0012 loss -0.01 tok/s 8123 gen 0.12s train 0.20s elapsed 3.4s"
std::string FormatStep(const StepMetrics& m);

}  // namespace skyrl::actors
