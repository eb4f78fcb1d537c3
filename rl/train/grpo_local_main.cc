// skyrl-grpo-local: the GRPO job in one process (TP = 1, sync mode), for calibrating the demo
// task and as the reference the distributed `skyrl-grpo` must match. Wiring only.
#include <cstdio>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rl/train/job_config.h"
#include "rl/train/local_trainer.h"
#include "rl/train/metrics.h"

namespace {

struct Options {
  std::string config_path;
  int steps = 0, stop_after = 0;
  bool checkpoint = false;
  std::string output_dir;
};

// Loads --config, applies the overrides and creates the output directory. An error's message
// is what to say (exit code 2).
absl::StatusOr<skyrl::rl::JobConfig> LoadConfig(const Options& opts) {
  auto config = skyrl::rl::LoadJobConfig(opts.config_path);
  if (!config.ok()) return config;
  if (absl::Status s = skyrl::rl::ApplyRunOverrides(*config, opts.steps, opts.output_dir); !s.ok()) return s;
  return config;
}

// Writes metrics.jsonl and reward.svg and prints the summary and RESULT lines; the exit code.
int Report(const skyrl::rl::JobConfig& config, const skyrl::rl::RunSummary& run) {
  const std::string dir = config.trainer.output_dir;
  for (auto [name, text] :
       {std::pair<const char*, std::string>{"metrics.jsonl", skyrl::rl::MetricsJsonl(run.history)},
        {"reward.svg",
         skyrl::rl::RewardCurveSvg(run.history, config.environment.target_reward,
                                   "GRPO on " + config.environment.task + " (skyrl-grpo-local)")}}) {
    if (auto s = skyrl::rl::WriteTextFile(dir + "/" + name, text); !s.ok()) {
      std::fprintf(stderr, "skyrl-grpo-local: %s\n", std::string(s.message()).c_str());
      return 1;
    }
  }
  std::printf("wrote %s/metrics.jsonl and %s/reward.svg\n", dir.c_str(), dir.c_str());
  std::printf(
      "baseline reward %.3f, final reward %.3f (mean of last steps), first step at target %d (%.1fs), "
      "%d steps in %.1fs\n",
      run.baseline_reward, run.final_reward, run.first_step_at_target, run.seconds_to_target, run.steps,
      run.total_s);
  std::printf("RESULT baseline_reward %.4f\n", run.baseline_reward);
  std::printf("RESULT final_reward %.4f\n", run.final_reward);
  std::printf("RESULT seconds_to_target %.2f\n", run.seconds_to_target);
  std::printf("RESULT wall_s %.2f\n", run.total_s);
  return 0;
}

int Run(const Options& opts) {
  auto config = LoadConfig(opts);
  if (!config.ok()) {
    std::fprintf(stderr, "skyrl-grpo-local: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  auto run = skyrl::rl::RunLocalGrpo(
      *config,
      [](const skyrl::rl::StepMetrics& m) {
        std::printf("%s\n", skyrl::rl::FormatStep(m).c_str());
        std::fflush(stdout);
      },
      opts.stop_after, opts.checkpoint);
  if (!run.ok()) {
    std::fprintf(stderr, "skyrl-grpo-local: %s\n", std::string(run.status().ToString()).c_str());
    return 1;
  }
  return Report(*config, *run);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"skyrl-grpo-local: single-process GRPO on a toy task"};
  Options o;
  app.add_option("--config", o.config_path, "job config (examples/grpo_<task>.yaml)")->required();
  app.add_option("--steps", o.steps, "override trainer.steps")->check(CLI::PositiveNumber);
  app.add_option("--stop-after-target", o.stop_after,
                 "stop after this many consecutive steps at environment.target_reward (0: run all steps)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--checkpoint", o.checkpoint, "save a checkpoint under trainer.output_dir at the end");
  app.add_option("--output-dir", o.output_dir,
                 "override trainer.output_dir (metrics.jsonl, reward.svg and the checkpoint go there)");
  CLI11_PARSE(app, argc, argv);
  return Run(o);
}
