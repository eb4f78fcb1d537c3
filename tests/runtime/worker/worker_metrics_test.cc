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

}  // namespace
}  // namespace skyrl::worker
