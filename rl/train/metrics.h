// Per-step metrics of a GRPO run and the job's outputs built from them: one progress line,
// a JSONL metrics file (one object per step) and an SVG reward curve. Torch-free, so the
// distributed driver can use the same code. Plain values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace skyrl::rl {

// One phase of a step on the wall clock (microseconds since the Unix epoch), for timelines.
struct PhaseSpan {
  std::string phase;  // generate, reward, train, wait, sync
  int64_t start_unix_us = 0, end_unix_us = 0;
};

struct StepMetrics {
  int step = 0;               // 1-based
  double mean_reward = 0;     // over this step's samples, before its update
  double exact_fraction = 0;  // share of samples with reward 1
  double loss = 0, policy_loss = 0, kl = 0, clip_fraction = 0, grad_norm = 0;
  int64_t response_tokens = 0;
  double tokens_per_s = 0;  // response tokens / step seconds
  double generate_s = 0, reward_s = 0, train_s = 0;
  // The reference model's own compute for its log-probs, inside reward_s (the two run at once;
  // 0 where not measured).
  double reference_s = 0;
  double sync_s = 0;            // weight sync (a copy in the single-process run)
  int64_t sync_bytes = 0;       // sent by the trainer shards in the sync (0: not measured)
  double wait_s = 0;            // async: waiting for the next step's generation after training
  int64_t staleness = 0;        // trainer version minus the version the samples were generated with
  int64_t dropped_samples = 0;  // samples too stale to train on
  double step_s = 0;
  double elapsed_s = 0;           // since the first step started (excludes set-up)
  int64_t start_unix_us = 0;      // when the step started, on the wall clock
  std::vector<PhaseSpan> phases;  // its phases in the order they ran
};

// "step   12  reward 0.453  exact 0.20  kl 0.0012  loss -0.0100  grad 0.512  tok/s 8123
//  gen 0.12s  train 0.20s  sync 0.00s  elapsed 3.4s"
std::string FormatStep(const StepMetrics& m);

// One step's fields as one JSON object (what the dashboard plots; job_metrics_keys.h).
std::string StepJson(const StepMetrics& m);

// One JSON object per line with every field above, in step order.
std::string MetricsJsonl(const std::vector<StepMetrics>& history);

// A self-contained SVG: mean reward (and exact-match share) against step, reward axis
// 0..1, with a dashed line at `target`.
std::string RewardCurveSvg(const std::vector<StepMetrics>& history, double target, const std::string& title);

// Writes `text` to `path` (replacing it). Internal error naming the path on failure.
absl::Status WriteTextFile(const std::string& path, const std::string& text);

}  // namespace skyrl::rl
