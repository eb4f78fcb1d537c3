// The chaos workload (tests/chaos/chaos_cluster.h) as a test: about 90 s of faults in
// scripts/test; scripts/soak runs it for longer. SKYRL_CHAOS_SECONDS sets the length and
// SKYRL_CHAOS_SEED the fault schedule's seed.
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

TEST(ChaosTest, ClientAndClusterComeThroughFaults) {
  ChaosOptions o;
  o.duration = absl::Seconds(EnvInt("SKYRL_CHAOS_SECONDS", 90));
  o.seed = uint64_t(EnvInt("SKYRL_CHAOS_SEED", 1));
  o.dir = MakeTempDir("chaos");
  std::printf("chaos: %s of faults, seed %llu, logs in %s\n", absl::FormatDuration(o.duration).c_str(),
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
  for (const char* kind :
       {"worker_kill", "worker_freeze", "actor_kill", "actor_freeze", "head_kill", "redis_kill"})
    EXPECT_GE(r.faults[kind], 1) << kind << " was never injected";
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(o.dir);
}

}  // namespace
}  // namespace skyrl::testing
