// skyrl-grpo-local: the GRPO job in one process (TP = 1, sync mode), for calibrating the demo
// task and as the reference the distributed `skyrl-grpo` must match. Wiring only.
#include <cstdio>

#include "CLI/CLI.hpp"
#include "actors/train/job_config.h"
#include "actors/train/local_trainer.h"

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
  CLI11_PARSE(app, argc, argv);

  auto config = skyrl::actors::LoadJobConfig(config_path);
  if (!config.ok()) {
    std::fprintf(stderr, "skyrl-grpo-local: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  if (steps > 0) config->trainer.steps = steps;
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
