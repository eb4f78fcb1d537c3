// The single-process GRPO loop (one generator, sync mode): the algorithm the distributed job
// runs, without the runtime, so that the job can be checked against it step for step (issue
// 6's equivalence test) and so the demo task can be calibrated. trainer.tp_size > 1 runs the
// TP ranks as threads over an in-process collective (each rank generates with its shard; the
// samples are the same on every rank), which checks TP against TP = 1 over whole runs.
// trainer.async.enabled (TP = 1 only) overlaps generation for step k + 1 with training step k
// on a second thread: those samples come from weights one version old, are trained on with
// the engine's log-probs as the behaviour policy's, and are dropped (counted) when older than
// trainer.async.max_staleness versions.
//
// One step: sample train_batch_size prompts from the task, generate group_size responses per
// prompt with the current policy, score them, compute group advantages and the frozen
// reference policy's log-probs, then GrpoLearner::Update. Everything is seeded from
// trainer.seed: the same config gives the same numbers.
//
// Not thread-safe; one run per call. Sets LibTorch's process-wide intra-op thread count to
// trainer.num_threads.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rl/train/job_config.h"
#include "rl/train/metrics.h"

namespace skyrl::rl {

struct RunSummary {
  int64_t dropped_samples = 0;    // async mode: samples older than trainer.async.max_staleness
  double baseline_reward = 0;     // the initial (random) policy's mean reward on the first step
  double final_reward = 0;        // mean over the last min(5, steps) steps
  int first_step_at_target = -1;  // first step whose mean reward reached the target, or -1
  double seconds_to_target = -1;
  double total_s = 0;
  int steps = 0;
  std::vector<StepMetrics> history;
};

// Bookkeeping shared by the single-process loop and the distributed driver. After step `step`
// (1-based) whose metrics `m` are already in sum.history: records the baseline (step 1) and
// the first step at `target`; returns true once `stop_after` (> 0) consecutive steps reached
// it. `at_target_run` is the caller's running count, starting at 0.
bool RecordStep(RunSummary& sum, const StepMetrics& m, int step, double target, int stop_after,
                int& at_target_run);
// Fills steps, total_s and final_reward (mean of the last min(5, steps) steps) from history.
void FinishSummary(RunSummary& sum);

// Runs trainer.steps steps (or stops early after `stop_after_target` consecutive steps at
// or above environment.target_reward, when > 0). `on_step` (may be empty) sees each step as it
// ends. Writes nothing to disk unless `write_checkpoint`: then each rank's checkpoint goes to
// trainer.output_dir every trainer.ckpt_interval steps (> 0) and at the end (>= 0), each
// save replacing the last.
// Errors: InvalidArgument naming the config field; Internal from LibTorch.
absl::StatusOr<RunSummary> RunLocalGrpo(const JobConfig& config,
                                        const std::function<void(const StepMetrics&)>& on_step,
                                        int stop_after_target = 0, bool write_checkpoint = false);

}  // namespace skyrl::rl
