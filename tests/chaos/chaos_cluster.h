// The chaos workload over real processes: Redis, a head on it, workers, and
// skyrl-chaos-driver calling echo actors, while faults are injected by signal:
//   worker_kill    SIGKILL a worker, start a fresh one
//   worker_freeze  SIGSTOP a worker past the head's death threshold, then SIGCONT: it comes
//                  back with a node id the head declared dead
//   actor_kill     SIGKILL an actor's process
//   actor_freeze   SIGSTOP an actor's process for a few seconds, then SIGCONT
//   head_kill      SIGKILL the head, start it again on the same Redis
//   redis_kill     SIGKILL Redis, start it again on its data a few seconds later
// A watchdog dumps every thread's stack of the driver (gdb) when it makes no progress for
// `stall`. After the run the cluster must settle: every actor ALIVE with exactly one process,
// no actor process the cluster does not know of, and each node's used resources equal to what
// its live actors hold.
//
// With `churn`, only worker kills (each replaced) after an early head kill: peers die with the
// nodes they could confirm dead, so their deaths are confirmed by the keep limit or by the
// replacement finding the old worker's process gone.
//
// Used by tests/chaos/chaos_test.cc (about 2 minutes each mode in scripts/test) and
// scripts/soak.
// Not synchronized: one thread runs it.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "runtime/common/subprocess.h"
#include "skyrl/actor_directory.pb.h"
#include "skyrl/node.pb.h"
#include "tests/util/redis_server.h"

namespace skyrl::testing {

struct ChaosOptions {
  absl::Duration duration = absl::Seconds(90);  // faults are injected for this long
  absl::Duration fault_period = absl::Seconds(5);
  int workers = 4;
  int actors = 8;
  int driver_threads = 4;
  absl::Duration stall = absl::Seconds(60);  // no progress this long: dump stacks and fail
  uint64_t seed = 1;
  // Churn: the head SIGKILLed and restarted at the first fault, then a worker SIGKILLed at
  // every fault and a fresh one started in its place (the head again every five minutes);
  // nothing else. Otherwise the mix of every kind above.
  bool churn = false;
  // Where every log goes (kept for people to read after a failure).
  std::string dir;
};

struct ChaosReport {
  std::map<std::string, int> faults;      // by kind
  std::string driver_summary;             // the driver's "chaos ..." line
  std::map<std::string, int64_t> driver;  // its counters: calls, lost, wrong, ...
  int leaked_processes = 0;               // actor processes the cluster does not account for
  int missing_processes = 0;              // ALIVE actors with no process
  std::vector<std::string> problems;      // what went wrong, for people; empty when all held
};

class ChaosRun {
 public:
  explicit ChaosRun(ChaosOptions options);
  ~ChaosRun();

  // Runs the whole workload and the checks; every problem found is in the report.
  ChaosReport Run();

 private:
  struct Worker {
    std::string name;
    Subprocess process;
    absl::Time thaw = absl::InfiniteFuture();  // SIGCONT due then (frozen)
  };

  absl::Status StartHead();
  absl::Status StartWorker();
  absl::Status StartDriver();
  std::string Token() const;
  std::map<std::string, std::string> Env() const;

  // One fault, chosen by the schedule; says what it did.
  std::string InjectFault(absl::Duration elapsed);
  void ThawDue(bool all);
  // Progress seen in the driver's log ("progress calls=N"); -1 before the first line.
  int64_t DriverProgress() const;
  void DumpDriverStacks(const std::string& why);

  // Checks after the run; adds problems to the report.
  void CheckSettled(ChaosReport& report);
  absl::StatusOr<std::vector<v1::NodeInfo>> ListNodes();
  absl::StatusOr<std::vector<v1::ActorInfo>> ListActors();
  // Actor processes of this cluster running on this machine: actor id -> pids.
  std::map<std::string, std::vector<int>> ActorProcesses() const;

  ChaosOptions options_;
  std::mt19937_64 rng_;
  std::unique_ptr<RedisServer> redis_;
  std::optional<Subprocess> head_;
  int head_port_ = 0;
  std::string address_;
  std::vector<Worker> workers_;
  int next_worker_ = 0;
  std::optional<Subprocess> driver_;
  std::map<int, absl::Time> frozen_actors_;  // pid -> SIGCONT due
  ChaosReport report_;
  int fault_index_ = 0;
  bool head_killed_ = false, redis_killed_ = false;
};

}  // namespace skyrl::testing
