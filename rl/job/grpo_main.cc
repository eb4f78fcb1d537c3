// skyrl-grpo: the distributed GRPO job (grpo_driver.h). Run as a job (`skyrl job submit --
// skyrl-grpo --config ...`) it finds the cluster through SKYRL_ADDRESS / SKYRL_TOKEN; by hand,
// --address HOST:PORT and the token from $SKYRL_TOKEN or ~/.skyrl/token. Wiring only.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rl/job/grpo_driver.h"
#include "rl/train/job_config.h"
#include "rl/train/metrics.h"
#include "runtime/common/job_metrics_keys.h"
#include "runtime/rpc/auth.h"

namespace {

struct Options {
  std::string config_path, address, output_dir;
  int steps = 0, stop_after = 0, call_timeout_s = 120;
  std::string weight_sync = "tcp";
};

int Fail(const std::string& msg, int code) {
  std::fprintf(stderr, "skyrl-grpo: %s\n", msg.c_str());
  return code;
}

// Reads --config into `yaml` and parses it, applies the overrides and creates the output
// directory. An error's message is what to say (exit code 2).
absl::StatusOr<skyrl::rl::JobConfig> LoadConfig(const Options& opts, std::string* yaml) {
  std::ifstream in(opts.config_path);
  if (!in) return absl::InvalidArgumentError("--config " + opts.config_path + ": cannot read");
  std::stringstream text;
  text << in.rdbuf();
  *yaml = text.str();
  auto config = skyrl::rl::ParseJobConfig(*yaml, opts.config_path);
  if (!config.ok()) return config;
  if (absl::Status s = skyrl::rl::ApplyRunOverrides(*config, opts.steps, opts.output_dir); !s.ok()) return s;
  return config;
}

// Writes metrics.jsonl and reward.svg and prints the summary and RESULT lines; the exit code.
int Report(const skyrl::rl::JobConfig& config, const skyrl::rl::DistributedSummary& run, double wall) {
  const std::string dir = config.trainer.output_dir;
  for (auto [name, body] :
       {std::pair<const char*, std::string>{"metrics.jsonl", skyrl::rl::MetricsJsonl(run.run.history)},
        {"reward.svg", skyrl::rl::RewardCurveSvg(run.run.history, config.environment.target_reward,
                                                 "GRPO on " + config.environment.task + " (skyrl-grpo)")}}) {
    if (auto s = skyrl::rl::WriteTextFile(dir + "/" + name, body); !s.ok()) {
      return Fail(std::string(s.message()), 1);
    }
  }
  std::printf("wrote %s/metrics.jsonl and %s/reward.svg\n", dir.c_str(), dir.c_str());
  std::printf(
      "baseline reward %.3f, final reward %.3f (mean of last steps), first step at target %d (%.1fs), "
      "%d steps in %.1fs after %.1fs of set-up; %d engine recoveries, %d weight-sync fallbacks\n",
      run.run.baseline_reward, run.run.final_reward, run.run.first_step_at_target, run.run.seconds_to_target,
      run.run.steps, run.run.total_s, run.setup_s, run.recovered.engine_calls, run.recovered.sync_fallbacks);
  if (run.sync_tcp_connections + run.sync_local_connections > 0)
    std::printf(
        "weight sync connections: %lld over TCP, %lld over Unix sockets (same host), %lld bytes written "
        "straight into same-host engines\n",
        (long long)run.sync_tcp_connections, (long long)run.sync_local_connections,
        (long long)run.sync_direct_write_bytes);
  std::printf("RESULT baseline_reward %.4f\n", run.run.baseline_reward);
  std::printf("RESULT final_reward %.4f\n", run.run.final_reward);
  std::printf("RESULT overhead_fraction %.4f\n", run.overhead_fraction);
  std::printf("RESULT wall_s %.2f\n", wall);
  return 0;
}

int Run(const Options& opts) {
  std::string yaml;
  auto config = LoadConfig(opts, &yaml);
  if (!config.ok()) return Fail(std::string(config.status().message()), 2);
  absl::StatusOr<skyrl::rl::WeightSyncMode> mode =
      skyrl::rl::ParseWeightSyncMode(opts.weight_sync, "--weight-sync");
  if (!mode.ok()) return Fail(std::string(mode.status().message()), 2);

  std::string address = opts.address;
  if (address.empty() && std::getenv("SKYRL_ADDRESS")) address = std::getenv("SKYRL_ADDRESS");
  if (address.empty()) return Fail("--address: not given and SKYRL_ADDRESS is unset", 2);
  auto token = skyrl::rpc::LoadToken("", false);
  if (!token.ok()) return Fail(std::string(token.status().message()), 2);
  skyrl::ClientOptions co;
  co.call_timeout = absl::Seconds(opts.call_timeout_s);
  co.restart_wait = absl::Seconds(60);
  auto client = skyrl::Client::Connect(address, *token, co);
  if (!client.ok()) return Fail("--address " + address + ": " + std::string(client.status().message()), 1);

  skyrl::rl::DistributedOptions dopts;
  dopts.stop_after_target = opts.stop_after;
  dopts.weight_sync = *mode;
  std::printf("skyrl-grpo: trainer tp %d, %d engine(s), task %s, up to %d steps\n", config->trainer.tp_size,
              config->generator.num_engines, config->environment.task.c_str(), config->trainer.steps);
  std::fflush(stdout);
  const auto t0 = std::chrono::steady_clock::now();
  // Run as a job: each step's metrics also go to the head's KV store, for the dashboard's plots.
  const char* job_env = std::getenv("SKYRL_JOB_ID");
  const std::string job_id = job_env ? job_env : "";
  bool publish_failed = false;
  auto run = skyrl::rl::RunDistributedGrpo(
      **client, yaml, *config, dopts,
      [&](const skyrl::rl::StepMetrics& m) {
        std::printf("%s\n", skyrl::rl::FormatStep(m).c_str());
        if (!job_id.empty() && !publish_failed) {
          absl::Status s = (*client)->KvPut(skyrl::JobMetricsKey(job_id, m.step), skyrl::rl::StepJson(m));
          if (!s.ok()) {  // the run goes on; only the dashboard's plots miss the steps
            publish_failed = true;
            std::printf("skyrl-grpo: cannot publish step metrics to the head (%s); not trying again\n",
                        std::string(s.message()).c_str());
          }
        }
        std::fflush(stdout);
      },
      [](const skyrl::rl::JobActors& a) {
        std::printf(
            "skyrl-grpo: actors up: %zu trainer shard(s), %zu engine(s), reward, reference (group %s)\n",
            a.trainers.size(), a.engines.size(), a.placement_group.c_str());
        std::fflush(stdout);
      });
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!run.ok()) return Fail("the job failed: " + run.status().ToString(), 1);
  return Report(*config, *run, wall);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"skyrl-grpo: GRPO with trainer shards, engines, reward and reference as actors"};
  Options o;
  app.add_option("--config", o.config_path, "job config (examples/grpo_<task>.yaml)")->required();
  app.add_option("--address", o.address, "head HOST:PORT (default: $SKYRL_ADDRESS)");
  app.add_option("--steps", o.steps, "override trainer.steps")->check(CLI::PositiveNumber);
  app.add_option("--stop-after-target", o.stop_after,
                 "stop after this many consecutive steps at environment.target_reward (0: run all steps)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--output-dir", o.output_dir, "override trainer.output_dir (metrics.jsonl, reward.svg)");
  app.add_option("--call-timeout-s", o.call_timeout_s, "deadline of every actor call")
      ->check(CLI::PositiveNumber);
  app.add_option(
         "--weight-sync", o.weight_sync,
         "tcp: weight_sync's TCP transport on the planned shard-to-shard transfers; push: each trainer "
         "shard pushes to each engine with actor calls")
      ->check(CLI::IsMember({"tcp", "push"}));
  CLI11_PARSE(app, argc, argv);
  return Run(o);
}
