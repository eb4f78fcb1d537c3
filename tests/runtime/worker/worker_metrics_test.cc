// WorkerMetrics over a real child process (its /proc entries) and recorded exits.
#include "runtime/worker/worker_metrics.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <string>

#include "gtest/gtest.h"
#include "tests/runtime/metrics/flatten.h"

namespace skyrl::worker {
namespace {

using ::skyrl::testing::Flatten;

TEST(WorkerMetricsTest, ReportsEachRunningActorsCpuAndMemoryAndCountsExitsByCause) {
  const pid_t child = fork();
  if (child == 0) {
    volatile double x = 0;  // some CPU time, then wait to be killed
    for (long i = 0; i < 200000000L; ++i) x += i;
    pause();
    _exit(0);
  }
  ASSERT_GT(child, 0);
  pid_t gone = 999999999;  // no such process: left out
  WorkerMetrics m(
      [&] {
        return std::vector<std::pair<std::string, pid_t>>{{"actor-a", child}, {"actor-b", gone}};
      },
      4);
  sleep(1);
  std::map<std::string, double> v = Flatten(m.Collect());
  EXPECT_EQ(v["skyrl_worker_actor_processes"], 2);
  EXPECT_GT(v["skyrl_worker_actor_resident_bytes{actor=actor-a}"], 100 * 1024);
  EXPECT_GT(v["skyrl_worker_actor_cpu_seconds_total{actor=actor-a}"], 0.05);
  EXPECT_EQ(v.count("skyrl_worker_actor_cpu_seconds_total{actor=actor-b}"), 0u);
  EXPECT_EQ(v["skyrl_worker_gpus"], 4);
  EXPECT_EQ(v.count("skyrl_worker_actor_exits_total{cause=failed}"), 1u);
  EXPECT_EQ(v["skyrl_worker_actor_exits_total{cause=failed}"], 0);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);

  v1::ActorExitInfo e;
  e.set_exit_code(3);
  m.RecordExit(e);
  m.RecordExit(e);
  e.set_exit_code(0);
  m.RecordExit(e);
  e.set_signal(9);
  m.RecordExit(e);
  e.set_killed_by_request(true);
  m.RecordExit(e);
  v = Flatten(m.Collect());
  EXPECT_EQ(v["skyrl_worker_actor_exits_total{cause=failed}"], 2);
  EXPECT_EQ(v["skyrl_worker_actor_exits_total{cause=exited}"], 1);
  EXPECT_EQ(v["skyrl_worker_actor_exits_total{cause=signaled}"], 1);
  EXPECT_EQ(v["skyrl_worker_actor_exits_total{cause=killed}"], 1);
}

TEST(WorkerMetricsTest, ReportsWhatEachActorHostCountedAndTheStartsAndGpusInUse) {
  const pid_t self = getpid();  // any live process: its CPU and memory are read, not checked here
  int asked = 0;
  WorkerMetrics::Hosts hosts{
      .gpus_in_use = [] { return 3; },
      .telemetry = [&](const std::string& actor) -> absl::StatusOr<v1::ActorTelemetryReply> {
        ++asked;
        if (actor == "actor-b") return absl::DeadlineExceededError("frozen");  // left out
        v1::ActorTelemetryReply r;
        r.set_enabled(true);
        r.set_class_name("grpo_trainer");
        r.add_latency_bounds_s(0.1);
        r.add_latency_bounds_s(1);
        v1::MethodCallStats* m = r.add_methods();
        m->set_method("train");
        (*m->mutable_calls_by_code())[0] = 5;
        (*m->mutable_calls_by_code())[4] = 1;
        for (uint64_t n : {1, 4, 1}) m->add_latency_counts(n);
        m->set_latency_sum_s(7.5);
        r.set_queued(2);
        r.set_running(1);
        return r;
      }};
  WorkerMetrics m(
      [&] {
        return std::vector<std::pair<std::string, pid_t>>{{"actor-a", self}, {"actor-b", self}};
      },
      4, "/proc", hosts);
  m.RecordStart(absl::Milliseconds(300));
  m.RecordStart(absl::Seconds(2));
  std::map<std::string, double> v = Flatten(m.Collect());
  EXPECT_EQ(asked, 2) << "each running actor's host, once per scrape";
  const std::string a = "actor=actor-a,class=grpo_trainer";
  EXPECT_EQ(v["skyrl_actor_calls_total{" + a + ",code=OK,method=train}"], 5);
  EXPECT_EQ(v["skyrl_actor_calls_total{" + a + ",code=DEADLINE_EXCEEDED,method=train}"], 1);
  EXPECT_EQ(v["skyrl_actor_call_seconds_count{" + a + ",method=train}"], 6);
  EXPECT_EQ(v["skyrl_actor_call_seconds_sum{" + a + ",method=train}"], 7.5);
  EXPECT_EQ(v["skyrl_actor_queued_calls{" + a + "}"], 2);
  EXPECT_EQ(v["skyrl_actor_running_calls{" + a + "}"], 1);
  for (const auto& [key, value] : v) EXPECT_EQ(key.find("actor=actor-b,class"), std::string::npos) << key;
  EXPECT_EQ(v["skyrl_worker_gpus_in_use"], 3);
  EXPECT_EQ(v["skyrl_worker_actor_start_seconds_count"], 2);
  EXPECT_NEAR(v["skyrl_worker_actor_start_seconds_sum"], 2.3, 1e-9);
}

}  // namespace
}  // namespace skyrl::worker
