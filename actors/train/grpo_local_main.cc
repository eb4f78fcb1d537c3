// skyrl-grpo-local: the GRPO job in one process (TP = 1, sync mode), for calibrating the demo
// task and as the reference the distributed `skyrl-grpo` must match. Wiring only.
#include <cstdio>
#include <filesystem>

#include "CLI/CLI.hpp"
#include "actors/train/job_config.h"
#include "actors/train/local_trainer.h"
#include "actors/train/metrics.h"

int main(int argc, char** argv) {
  CLI::App app{"skyrl-grpo-local: single-process GRPO on a toy task"};
  std::string config_path;
  int steps = 0, stop_after = 0;
  bool checkpoint = false;
  app.add_option("--config", config_path, "job config (examples/grpo_<task>.yaml)")->required();
  app.add_option("--steps", steps, "override trainer.steps")->check(CLI::PositiveNumber);
  app.add_option("--stop-after-target", stop_after,
                 "stop after this many consecutive steps at environment.target_reward (0: run all steps)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--checkpoint", checkpoint, "save a checkpoint under trainer.output_dir at the end");
  std::string output_dir;
  app.add_option("--output-dir", output_dir,
                 "override trainer.output_dir (metrics.jsonl, reward.svg and the checkpoint go there)");
  CLI11_PARSE(app, argc, argv);

  auto config = skyrl::actors::LoadJobConfig(config_path);
  if (!config.ok()) {
    std::fprintf(stderr, "skyrl-grpo-local: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  if (steps > 0) config->trainer.steps = steps;
  if (!output_dir.empty()) config->trainer.output_dir = output_dir;
  std::error_code ec;
  std::filesystem::create_directories(config->trainer.output_dir, ec);
  if (ec) {
    std::fprintf(stderr, "skyrl-grpo-local: trainer.output_dir %s: %s\n", config->trainer.output_dir.c_str(),
                 ec.message().c_str());
    return 2;
  }
  auto run = skyrl::actors::RunLocalGrpo(
      *config,
      [](const skyrl::actors::StepMetrics& m) {
        std::printf("%s\n", skyrl::actors::FormatStep(m).c_str());
        std::fflush(stdout);
      },
      stop_after, checkpoint);
  if (!run.ok()) {
    std::fprintf(stderr, "skyrl-grpo-local: %s\n", std::string(run.status().ToString()).c_str());
    return 1;
  }
  const std::string dir = config->trainer.output_dir;
  for (auto [name, text] :
       {std::pair<const char*, std::string>{"metrics.jsonl", skyrl::actors::MetricsJsonl(run->history)},
        {"reward.svg", skyrl::actors::RewardCurveSvg(run->history, config->environment.target_reward,
                                                     "GRPO on " + config->environment.task + " (skyrl-grpo-local)")}}) {
    if (auto s = skyrl::actors::WriteTextFile(dir + "/" + name, text); !s.ok()) {
      std::fprintf(stderr, "skyrl-grpo-local: %s\n", std::string(s.message()).c_str());
      return 1;
    }
  }
  std::printf("wrote %s/metrics.jsonl and %s/reward.svg\n", dir.c_str(), dir.c_str());
  std::printf("baseline reward %.3f, final reward %.3f (mean of last steps), first step at target %d (%.1fs), "
              "%d steps in %.1fs\n",
              run->baseline_reward, run->final_reward, run->first_step_at_target, run->seconds_to_target, run->steps,
              run->total_s);
  std::printf("RESULT baseline_reward %.4f\n", run->baseline_reward);
  std::printf("RESULT final_reward %.4f\n", run->final_reward);
  std::printf("RESULT seconds_to_target %.2f\n", run->seconds_to_target);
  std::printf("RESULT wall_s %.2f\n", run->total_s);
  return 0;
}
