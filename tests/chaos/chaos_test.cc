// The chaos workload (tests/chaos/chaos_cluster.h) as tests: about 90 s of mixed faults and
// 60 s of churn in scripts/test; scripts/soak runs either for longer. SKYRL_CHAOS_SECONDS
// sets the length (SKYRL_CHURN_SECONDS the churn's alone) and SKYRL_CHAOS_SEED the fault
// schedule's seed. Each ends with RESULT chaos_max_unavailable_s and chaos_lost lines.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "tests/chaos/chaos_cluster.h"
#include "tests/util/paths.h"

namespace skyrl::testing {
namespace {

int64_t EnvInt(const char* name, int64_t fallback) {
  int64_t v = 0;
  const char* text = std::getenv(name);
  return text != nullptr && absl::SimpleAtoi(text, &v) ? v : fallback;
}

// Runs the workload, prints its report (and the RESULT lines), and checks what must hold
// whatever the faults: nothing lost, wrong or leaked.
ChaosReport RunAndCheck(ChaosOptions o, const char* name) {
  o.seed = uint64_t(EnvInt("SKYRL_CHAOS_SEED", 1));
  o.dir = MakeTempDir(name);
  std::printf("%s: %s of faults, seed %llu, logs in %s\n", name, absl::FormatDuration(o.duration).c_str(),
              (unsigned long long)o.seed, o.dir.c_str());
  ChaosRun run(o);
  ChaosReport r = run.Run();

  std::vector<std::string> faults;
  int total = 0;
  for (const auto& [kind, n] : r.faults) {
    faults.push_back(absl::StrCat(kind, "=", n));
    total += n;
  }
  // One line for people and scripts/soak.
  std::printf("chaos-report faults=%d %s leaked=%d missing=%d | %s\n", total,
              absl::StrJoin(faults, " ").c_str(), r.leaked_processes, r.missing_processes,
              r.driver_summary.c_str());
  EXPECT_TRUE(r.problems.empty()) << absl::StrJoin(r.problems, "\n") << "\nlogs: " << o.dir;
  EXPECT_GT(r.driver["calls"], 0);
  EXPECT_EQ(r.driver["lost"], 0);
  EXPECT_EQ(r.driver["wrong"], 0);
  EXPECT_EQ(r.leaked_processes, 0);
  // The longest any call waited, first attempt to the right answer: for an actor to restart
  // after its node died, at worst.
  std::printf("RESULT chaos_max_unavailable_s %.2f\nRESULT chaos_lost %lld\n",
              double(r.driver["longest_call_ms"]) / 1000, (long long)r.driver["lost"]);
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(o.dir);
  return r;
}

TEST(ChaosTest, ClientAndClusterComeThroughFaults) {
  ChaosOptions o;
  o.duration = absl::Seconds(EnvInt("SKYRL_CHAOS_SECONDS", 90));
  ChaosReport r = RunAndCheck(o, "chaos");
  for (const char* kind :
       {"worker_kill", "worker_freeze", "actor_kill", "actor_freeze", "head_kill", "redis_kill"})
    EXPECT_GE(r.faults[kind], 1) << kind << " was never injected";
}

// Under churn (a worker killed every 5 s and a fresh one started, after an early head kill)
// the peers that could confirm a node's death die too: the keep limit and the replacements'
// process checks confirm them instead, so no call waits long.
TEST(ChaosTest, ChurnAfterAHeadKillLosesNoCall) {
  ChaosOptions o;
  o.churn = true;
  o.duration = absl::Seconds(EnvInt("SKYRL_CHURN_SECONDS", EnvInt("SKYRL_CHAOS_SECONDS", 60)));
  ChaosReport r = RunAndCheck(o, "churn");
  EXPECT_GE(r.faults["head_kill"], 1) << "one early, then every 5 min";
  // A fault every period, the head's restarts taking their turns.
  EXPECT_GE(r.faults["worker_kill"] + r.faults["head_kill"], int(o.duration / o.fault_period) - 2);
}

}  // namespace
}  // namespace skyrl::testing
