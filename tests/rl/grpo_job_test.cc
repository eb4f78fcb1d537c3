// The distributed GRPO job (actors/job/grpo_driver.h) on a real local cluster: a skyrl-head
// and two skyrl-worker processes, the RL actors in skyrl-actor-host-rl processes.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <optional>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include <nlohmann/json.hpp>
#include "rl/job/grpo_driver.h"
#include "rl/job/role_protocol.h"
#include "rl/train/job_config.h"
#include "rl/train/local_trainer.h"
#include "tests/cluster/cluster_fixture.h"

namespace skyrl::rl {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class GrpoJobTest : public testing::LocalClusterTest {
 protected:
  // Flags every worker gets (GrpoJobGpuTest declares devices).
  virtual std::vector<std::string> WorkerFlags() const { return {}; }
  void SetUp() override {
    LocalClusterTest::SetUp();
    // Training and generation fill both cores: a 400 ms stall must not fence the actors.
    heartbeat_period_ms_ = 300;
    head_ = StartHead();
    w1_ = StartWorker("w1", "CPU=4,memory=8Gi", WorkerFlags());
    w2_ = StartWorker("w2", "CPU=4,memory=8Gi", WorkerFlags());
    ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 2; }));
    ClientOptions o;
    o.call_timeout = absl::Seconds(60);
    o.restart_wait = absl::Seconds(60);
    auto c = Client::Connect(address_, Token(), o);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
    yaml_ = ReadFile(std::string(SKYRL_SOURCE_DIR) + "/examples/grpo_copy_distributed.yaml");
    auto config = ParseJobConfig(yaml_, "grpo_copy_distributed.yaml");
    ASSERT_TRUE(config.ok()) << config.status();
    config_ = *config;
    ASSERT_EQ(config_.trainer.tp_size, 2);
    ASSERT_EQ(config_.generator.num_engines, 2);
  }

  std::optional<Subprocess> head_, w1_, w2_;
  std::unique_ptr<Client> client_;
  std::string yaml_;
  JobConfig config_;
};

// A short run learns (reward above the random policy's) and after every step every engine
// holds the trainer's new version.
TEST(WeightSyncModeTest, TheFlagsNamesParseAndAnythingElseIsRefusedNamingTheFlag) {
  EXPECT_EQ(*ParseWeightSyncMode("tcp", "--weight-sync"), WeightSyncMode::kTcp);
  EXPECT_EQ(*ParseWeightSyncMode("push", "--weight-sync"), WeightSyncMode::kPush);
  absl::StatusOr<WeightSyncMode> bad = ParseWeightSyncMode("nccl-ish", "--weight-sync");
  ASSERT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
  EXPECT_EQ(bad.status().message(), "--weight-sync: tcp or push, got 'nccl-ish'");
}

TEST_F(GrpoJobTest, ShortRunBeatsBaselineAndEveryEngineAdvances) {
  config_.trainer.steps = 20;
  auto run = RunDistributedGrpo(*client_, yaml_, config_, {}, nullptr);
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->run.steps, 20);
  ASSERT_EQ(run->engine_versions.size(), 20u);
  for (int s = 0; s < 20; ++s) {
    ASSERT_EQ(run->engine_versions[s].size(), 2u);
    for (int64_t v : run->engine_versions[s]) EXPECT_EQ(v, s + 1) << "step " << s + 1;
  }
  double last3 = 0;
  for (int s = 17; s < 20; ++s) last3 += run->run.history[s].mean_reward / 3;
  EXPECT_GT(last3, run->run.baseline_reward + 0.05) << "baseline " << run->run.baseline_reward;
  EXPECT_GT(run->overhead_fraction, 0);
  EXPECT_LT(run->overhead_fraction, 1);
  EXPECT_EQ(run->recovered.engine_calls, 0);
  EXPECT_EQ(run->recovered.sync_fallbacks, 0) << "the TCP weight sync failed and the push path stood in";
  // Every process is on this host: the shards reach the engines over Unix sockets and write
  // into their buffers (across hosts it is TCP: tests/netns/hosts_test.cc).
  EXPECT_GT(run->sync_local_connections, 0);
  EXPECT_EQ(run->sync_tcp_connections, 0);
  EXPECT_GT(run->sync_direct_write_bytes, 0);
}

// The two weight-sync paths (weight_sync's TCP transport on the plan; actor-call pushes) deliver
// the same weights: the same samples and losses step for step.
TEST_F(GrpoJobTest, PushAndTcpWeightSyncAgree) {
  config_.trainer.steps = 4;
  DistributedOptions tcp, push;
  push.weight_sync = WeightSyncMode::kPush;
  auto a = RunDistributedGrpo(*client_, yaml_, config_, tcp, nullptr);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = RunDistributedGrpo(*client_, yaml_, config_, push, nullptr);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->recovered.sync_fallbacks, 0);
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(a->run.history[s].mean_reward, b->run.history[s].mean_reward) << "step " << s + 1;
    EXPECT_EQ(a->run.history[s].loss, b->run.history[s].loss) << "step " << s + 1;
    EXPECT_EQ(b->engine_versions[s], a->engine_versions[s]);
  }
}

// SIGKILL an engine's process mid-job: the runtime restarts it, the driver gives it the current
// weights, and the job finishes with every engine on the last version.
TEST_F(GrpoJobTest, KilledEngineRestartsWithCurrentWeightsAndTheJobContinues) {
  config_.trainer.steps = 6;
  JobActors actors;
  std::string killed;
  auto run = RunDistributedGrpo(
      *client_, yaml_, config_, {},
      [&](const StepMetrics& m) {
        if (m.step != 2) return;
        auto state = client_->CallProto(ActorHandle{actors.engines[1]}, role::engine::kState, pb::Empty());
        ASSERT_TRUE(state.ok()) << state.status();
        ASSERT_GT(state->pid(), 0);
        ASSERT_EQ(kill(static_cast<pid_t>(state->pid()), SIGKILL), 0);
        killed = actors.engines[1];
      },
      [&](const JobActors& a) { actors = a; });
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_FALSE(killed.empty());
  EXPECT_EQ(run->run.steps, 6);
  EXPECT_GE(run->recovered.engine_calls, 1);
  for (size_t s = 0; s < run->engine_versions.size(); ++s) {
    for (int64_t v : run->engine_versions[s]) EXPECT_EQ(v, static_cast<int64_t>(s) + 1) << "step " << s + 1;
  }
  // The driver kills its actors at the end; the head keeps the DEAD record (retention), with
  // the restart it went through.
  auto info = client_->Describe(ActorHandle{killed});
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_GE(info->restarts(), 1);
}

// A trainer shard that dies cannot be recovered (its optimizer state is gone): the job ends
// with an error naming it, promptly, never a hang.
TEST_F(GrpoJobTest, DeadTrainerShardEndsTheJobWithAClearError) {
  config_.trainer.steps = 50;
  JobActors actors;
  const absl::Time t0 = absl::Now();
  auto run = RunDistributedGrpo(
      *client_, yaml_, config_, {},
      [&](const StepMetrics& m) {
        if (m.step == 2) {
          EXPECT_TRUE(client_->Kill(ActorHandle{actors.trainers[1]}).ok());
        }
      },
      [&](const JobActors& a) { actors = a; });
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("trainer rank"), absl::string_view::npos) << run.status();
  EXPECT_LT(absl::Now() - t0, absl::Seconds(60));
}

// Proof that the runtime changes nothing: TP = 2 shards and 2 engines over the runtime give
// the single-process TP = 1 run's rewards and losses (the local run splits the prompts over
// the same two engine seeds).
TEST_F(GrpoJobTest, MatchesTheSingleProcessTp1Run) {
  config_.trainer.steps = 8;
  auto dist = RunDistributedGrpo(*client_, yaml_, config_, {}, nullptr);
  ASSERT_TRUE(dist.ok()) << dist.status();
  JobConfig local = config_;
  local.trainer.tp_size = 1;
  auto ref = RunLocalGrpo(local, nullptr);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_EQ(dist->run.history.size(), ref->history.size());
  for (size_t s = 0; s < ref->history.size(); ++s) {
    const StepMetrics &a = dist->run.history[s], &b = ref->history[s];
    EXPECT_NEAR(a.mean_reward, b.mean_reward, 1e-6) << "step " << s + 1;
    EXPECT_NEAR(a.loss, b.loss, 1e-3) << "step " << s + 1;
    EXPECT_NEAR(a.kl, b.kl, 1e-3) << "step " << s + 1;
    EXPECT_EQ(a.response_tokens, b.response_tokens) << "step " << s + 1;
  }
}

// Engines of TP = 2 (each engine two actors over their own TCP group, weights through the plan
// to four receivers): still the single-process TP = 1 run's numbers.
TEST_F(GrpoJobTest, TensorParallelEnginesMatchTheSingleProcessRun) {
  config_.trainer.steps = 4;
  config_.generator.tensor_parallel_size = 2;
  JobActors actors;
  auto dist =
      RunDistributedGrpo(*client_, yaml_, config_, {}, nullptr, [&](const JobActors& a) { actors = a; });
  ASSERT_TRUE(dist.ok()) << dist.status();
  EXPECT_EQ(actors.engines.size(), 4u);
  EXPECT_EQ(dist->recovered.sync_fallbacks, 0);
  JobConfig local = config_;
  local.trainer.tp_size = 1;
  local.generator.tensor_parallel_size = 1;
  auto ref = RunLocalGrpo(local, nullptr);
  ASSERT_TRUE(ref.ok()) << ref.status();
  for (size_t s = 0; s < ref->history.size(); ++s) {
    EXPECT_NEAR(dist->run.history[s].mean_reward, ref->history[s].mean_reward, 1e-6) << "step " << s + 1;
    EXPECT_NEAR(dist->run.history[s].loss, ref->history[s].loss, 1e-3) << "step " << s + 1;
    for (int64_t v : dist->engine_versions[s]) EXPECT_EQ(v, static_cast<int64_t>(s) + 1);
  }
}

TEST_F(GrpoJobTest, RefusesWhatItDoesNotRun) {
  JobConfig c = config_;
  c.trainer.async_enabled = true;
  c.trainer.colocate_all = true;  // colocated engines sleep while training: nothing to overlap
  auto run = RunDistributedGrpo(*client_, yaml_, c, {}, nullptr);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("trainer.async.enabled"), absl::string_view::npos) << run.status();
  c.trainer.colocate_all = false;
  c.trainer.max_staleness = -1;
  run = RunDistributedGrpo(*client_, yaml_, c, {}, nullptr);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("trainer.async.max_staleness"), absl::string_view::npos)
      << run.status();
  c = config_;
  c.generator.tensor_parallel_size = 3;  // does not divide the 4 heads
  run = RunDistributedGrpo(*client_, yaml_, c, {}, nullptr);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("generator.tensor_parallel_size"), absl::string_view::npos)
      << run.status();
}

// Async mode: step k + 1's samples come from the weights before step k's update (staleness
// 1, within the bound), never staler; nothing is dropped at max_staleness 1; the run learns and
// every engine ends each step on the trainer's version.
TEST_F(GrpoJobTest, AsyncRunStaysWithinTheStalenessBoundAndLearns) {
  config_.trainer.async_enabled = true;
  config_.trainer.colocate_all = false;
  config_.trainer.max_staleness = 1;
  config_.trainer.steps = 20;
  auto run = RunDistributedGrpo(*client_, yaml_, config_, {}, nullptr);
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->run.steps, 20);
  EXPECT_EQ(run->run.dropped_samples, 0);
  for (int s = 0; s < 20; ++s) {
    const StepMetrics& m = run->run.history[s];
    EXPECT_EQ(m.staleness, s == 0 ? 0 : 1) << "step " << s + 1;
    EXPECT_EQ(m.dropped_samples, 0);
    for (int64_t v : run->engine_versions[s]) EXPECT_EQ(v, s + 1) << "step " << s + 1;
  }
  double last3 = 0;
  for (int s = 17; s < 20; ++s) last3 += run->run.history[s].mean_reward / 3;
  EXPECT_GT(last3, run->run.baseline_reward + 0.05) << "baseline " << run->run.baseline_reward;
}

// max_staleness 0: samples one version old are dropped and counted (not trained on, so no new
// version that step); every trained step used samples of the trainer's own version.
TEST_F(GrpoJobTest, AsyncDropsAndCountsSamplesStalerThanTheBound) {
  config_.trainer.async_enabled = true;
  config_.trainer.colocate_all = false;
  config_.trainer.max_staleness = 0;
  config_.trainer.steps = 5;
  auto run = RunDistributedGrpo(*client_, yaml_, config_, {}, nullptr);
  ASSERT_TRUE(run.ok()) << run.status();
  int64_t dropped = 0, trained = 0;
  for (const StepMetrics& m : run->run.history) {
    if (m.dropped_samples > 0) {
      EXPECT_GT(m.staleness, 0) << "step " << m.step;
      dropped += m.dropped_samples;
    } else {
      EXPECT_EQ(m.staleness, 0) << "step " << m.step;
      ++trained;
    }
  }
  EXPECT_GT(dropped, 0);
  EXPECT_GE(trained, 2);
  EXPECT_EQ(dropped, run->run.dropped_samples);
  // Versions advance only on trained steps.
  EXPECT_EQ(run->engine_versions.back()[0], trained);
}

// colocate_all on the CPU-only cluster: CPU bundles, but the engines still sleep before every
// training step and wake before every generation.
TEST_F(GrpoJobTest, ColocateAllOnCpuStillSleepsAndWakesEngines) {
  config_.trainer.colocate_all = true;
  config_.trainer.steps = 3;
  JobActors actors;
  auto run =
      RunDistributedGrpo(*client_, yaml_, config_, {}, nullptr, [&](const JobActors& a) { actors = a; });
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_FALSE(actors.gpu_colocated);
  EXPECT_EQ(run->engine_sleeps, 3 * 2);
  EXPECT_EQ(run->engine_wakes, 2 * 2);
  config_.trainer.colocate_all = false;
  auto plain = RunDistributedGrpo(*client_, yaml_, config_, {}, nullptr);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->engine_sleeps, 0);
  // Sleeping changes nothing the algorithm sees.
  for (int s = 0; s < 3; ++s)
    EXPECT_EQ(run->run.history[s].loss, plain->run.history[s].loss) << "step " << s + 1;
}

// Workers that declare two GPUs each (actors see exactly their CUDA_VISIBLE_DEVICES; LibTorch
// still computes on CPU here).
class GrpoJobGpuTest : public GrpoJobTest {
 protected:
  std::vector<std::string> WorkerFlags() const override { return {"--gpu-ids", "0,1"}; }
};

// colocate_all with GPUs: trainer rank r and engine rank r share one device through GPU=0.5
// each in bundle r; the engines are asleep (weights dropped) whenever the trainer trains and
// wake with the new version before generating; the run still learns.
TEST_F(GrpoJobGpuTest, ColocateAllSharesDevicesAndSleepsEnginesDuringTraining) {
  config_.trainer.colocate_all = true;
  config_.trainer.steps = 20;
  JobActors actors;
  int checked = 0;
  auto run = RunDistributedGrpo(
      *client_, yaml_, config_, {},
      [&](const StepMetrics& m) {
        ASSERT_TRUE(actors.gpu_colocated);
        ASSERT_EQ(actors.trainers.size(), actors.engines.size());
        for (size_t r = 0; r < actors.engines.size(); ++r) {
          // After the step's sync the engine is still asleep: it slept through training and
          // holds the new version staged, woken only at the next step's generation.
          auto j = client_->CallProto(ActorHandle{actors.engines[r]}, role::engine::kState, pb::Empty());
          ASSERT_TRUE(j.ok()) << j.status();
          EXPECT_EQ(j->state(), role::engine::kAsleep) << "engine " << r << " step " << m.step;
          EXPECT_EQ(j->sleeps(), m.step) << "engine " << r;
          EXPECT_EQ(j->wakes(), m.step - 1) << "engine " << r;
          EXPECT_EQ(j->version(), m.step) << "engine " << r;
          if (m.step != 1) continue;
          auto t = client_->Describe(ActorHandle{actors.trainers[r]});
          auto e = client_->Describe(ActorHandle{actors.engines[r]});
          ASSERT_TRUE(t.ok() && e.ok());
          ASSERT_EQ(t->gpu_ids_size(), 1) << "trainer rank " << r;
          ASSERT_EQ(e->gpu_ids_size(), 1) << "engine rank " << r;
          EXPECT_EQ(t->node_id(), e->node_id()) << "rank " << r;
          EXPECT_EQ(t->gpu_ids(0), e->gpu_ids(0)) << "rank " << r;
          EXPECT_EQ(t->bundle_index(), e->bundle_index());
          // The engine's process sees exactly that device.
          EXPECT_EQ(j->cuda_visible_devices(), std::to_string(e->gpu_ids(0)));
          ++checked;
        }
      },
      [&](const JobActors& a) { actors = a; });
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(checked, 2);
  EXPECT_EQ(run->engine_sleeps, 20 * 2);
  EXPECT_EQ(run->engine_wakes, 19 * 2);
  for (int s = 0; s < 20; ++s) {
    for (int64_t v : run->engine_versions[s]) EXPECT_EQ(v, s + 1) << "step " << s + 1;
  }
  double last3 = 0;
  for (int s = 17; s < 20; ++s) last3 += run->run.history[s].mean_reward / 3;
  EXPECT_GT(last3, run->run.baseline_reward + 0.05) << "baseline " << run->run.baseline_reward;
}

}  // namespace
}  // namespace skyrl::rl
