// The worker's actor processes: one OS process per actor, each with exactly the GPUs it was
// given, its own log file, and a report of how it ended.
//
// Per actor:  Launch -> running --(exits, or Kill)--> reported (on_exit called once)
// A reaper thread polls the children (every `poll_period`) and calls `on_exit` for each that
// ended, from that thread, with the exit code or signal and the last lines of its log.
// Safe for concurrent use. The destructor kills (SIGKILL) every actor still running, without
// reporting.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "runtime/common/ids.h"
#include "runtime/common/subprocess.h"
#include "runtime/worker/fork_server.h"

namespace skyrl::worker {

struct ActorLaunch {
  ActorId actor_id;
  std::vector<std::string> argv;           // the actor host and its arguments
  std::vector<int> gpu_ids;                // physical ids: CUDA_VISIBLE_DEVICES (runtime/common/actor_env.h)
  std::map<std::string, std::string> env;  // extra environment
  std::string working_dir;                 // the process starts here (empty: the worker's)
  int64_t incarnation = 0;                 // which start of the actor (0: not said)
};

struct ActorExit {
  ActorId actor_id;
  ExitInfo exit;
  bool killed_by_request = false;  // Kill() was called for it
  std::string log_path;
  std::vector<std::string> last_lines;  // the end of its log, oldest first
  std::string fenced;                   // why Fence() killed it; empty otherwise
  int64_t incarnation = 0;              // ActorLaunch::incarnation of the process that ended
  // "exit code 3" / "killed by signal 9 (SIGKILL)", then the last lines.
  std::string Describe() const;
};

struct ActorProcessesOptions {
  std::string log_dir;     // actor-<id>.log files go here
  std::string lease_path;  // each actor's SKYRL_ACTOR_LEASE (runtime/common/lease.h); empty: none
  size_t tail_lines = 20;
  absl::Duration poll_period = absl::Milliseconds(20);
  std::function<void(const ActorExit&)> on_exit;
  // Python actors in milliseconds (fork_server.h): a launch whose argv[0] is this host (the
  // worker's skyrl-actor-host-python) is forked by a server started from it, unless its
  // environment rules that out (ForkServerSuits) or the server fails (then it is spawned).
  // Makes this process a child subreaper, and reaps orphans re-parented to it. Empty: off.
  std::string fork_server_host;
  std::map<std::string, std::string> fork_server_env;  // the server's own (SKYRL_PYTHON, ...)
};

class ActorProcesses {
 public:
  explicit ActorProcesses(ActorProcessesOptions options);
  ~ActorProcesses();

  // Starts the process. AlreadyExists when the actor already runs here; Aborted when a kill
  // of this start (or a newer one) came before it (a late start the head has given up on).
  absl::Status Launch(const ActorLaunch& launch);
  // Before start `incarnation` of `id`: when a previous process of it is being stopped (Kill,
  // Fence) or is of an older start, SIGKILLs it (as killed by request) and waits (at most
  // `timeout`) until it is gone and its exit reported, so that the new one may start.
  void AwaitStopped(const ActorId& id, int64_t incarnation, absl::Duration timeout);
  // Sends SIGTERM, then SIGKILL after `grace`; the exit is reported as usual, with
  // killed_by_request set. NotFound when the actor does not run here, or runs a start newer
  // than `incarnation` (0: whichever start runs). A killed start (`incarnation` > 0), or an
  // older one, that arrives later is refused (Launch).
  absl::Status Kill(const ActorId& id, absl::Duration grace, int64_t incarnation = 0);
  // Fencing (the node lost the head): SIGKILLs every actor at once, after writing `reason` to
  // its log; each exit is reported with `reason` (ActorExit::fenced) and not as killed by
  // request, so the head restarts the actor elsewhere. Returns how many it killed.
  int Fence(const std::string& reason);
  std::vector<ActorId> Running() const;
  // Whether a process of `id` from start `incarnation` or an older one (or one that did not
  // say which) is still here.
  bool Runs(const ActorId& id, int64_t incarnation) const;
  // The same with each process's pid (for the worker's metrics).
  std::vector<std::pair<ActorId, pid_t>> RunningPids() const;
  // How many launches the fork server made, and how many it was asked for but could not.
  int64_t forked() const;
  int64_t fork_fallbacks() const;
  // Distinct GPUs given to running actors (fractional ones share a device).
  int GpusInUse() const;
  std::string LogPath(const ActorId& id) const;

 private:
  struct Child {
    Subprocess process;
    bool kill_requested = false;
    absl::Time kill_deadline = absl::InfiniteFuture();
    std::string fenced;
    std::vector<int> gpu_ids;
    int64_t incarnation = 0;
  };
  void ReapLoop();
  // Reaps exited processes re-parented here that are not actors (an actor's own children
  // whose parent died), while no fork is in flight.
  void ReapOrphans() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The process for `o`: forked by the fork server when it suits, else spawned.
  absl::StatusOr<Subprocess> StartProcess(const SpawnOptions& o,
                                          const std::map<std::string, std::string>& env)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(launch_mu_) ABSL_LOCKS_EXCLUDED(mu_);
  void StartForkServerLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(launch_mu_) ABSL_LOCKS_EXCLUDED(mu_);

  // Every actor process is spawned from this one thread, which lives as long as the worker:
  // a child's PR_SET_PDEATHSIG fires when the *thread* that spawned it exits, and
  // gRPC retires idle server threads, which would SIGKILL actors started from them.
  class Spawner;
  std::unique_ptr<Spawner> spawner_;

  const ActorProcessesOptions options_;
  // Launches one at a time: the check that the actor is not here yet, the start (outside mu_:
  // a fork server's first answer may take a while) and the record.
  absl::Mutex launch_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::unique_ptr<ForkServer> fork_server_ ABSL_GUARDED_BY(launch_mu_);
  absl::Time fork_server_started_ ABSL_GUARDED_BY(launch_mu_) = absl::InfinitePast();
  mutable absl::Mutex mu_;
  bool subreaper_ ABSL_GUARDED_BY(mu_) = false;
  int forks_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  pid_t fork_server_pid_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t forked_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t forked_at_server_start_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t fork_fallbacks_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<ActorId, Child> children_ ABSL_GUARDED_BY(mu_);
  // Reaped, their exits being reported (on_exit not yet returned).
  absl::flat_hash_map<ActorId, int> reporting_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Per actor, the newest start killed here, and when: Launch refuses it and older ones.
  // Kept for 10 minutes (a start is long abandoned by then), at most 16384 of them.
  struct Refusal {
    int64_t incarnation = 0;
    absl::Time at;
  };
  absl::flat_hash_map<ActorId, Refusal> refused_ ABSL_GUARDED_BY(mu_);
  void Refuse(const ActorId& id, int64_t incarnation) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::thread reaper_;
};

// "3,5" for {3, 5}; "" for none (which hides every GPU from the actor).
std::string CudaVisibleDevices(const std::vector<int>& gpu_ids);
// Whether Ray's switch (actor_env::kNoSetCudaVisibleDevices) is set, non-empty, in the actor's
// `env` or, when `env` does not name it, in this worker's own environment.
bool NoSetCudaVisibleDevices(const std::map<std::string, std::string>& env);

}  // namespace skyrl::worker
