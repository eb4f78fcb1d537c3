// The worker's gRPC service: runs actor processes on request, through ActorProcesses, and keeps
// the reports of how they ended. Safe for concurrent use.
#pragma once

#include <deque>
#include <string>

#include <optional>

#include "absl/synchronization/mutex.h"
#include "runtime/common/lease.h"
#include "runtime/rpc/auth.h"
#include "runtime/worker/actor_processes.h"
#include "runtime/worker/working_dirs.h"
#include "skyrl/worker.grpc.pb.h"

namespace skyrl::worker {

struct WorkerServiceOptions {
  std::string actor_host;    // path of skyrl-actor-host
  std::string log_dir;       // actor logs
  std::string bind_host;     // what actors listen on and report in their address
  std::string token;         // passed to actors as SKYRL_TOKEN
  std::string head_address;  // passed to actors as SKYRL_ADDRESS, so they can reach the cluster
  std::string python;        // interpreter of Python actors (SKYRL_PYTHON); empty: the build's
  // Python actors forked from a prestarted interpreter (fork_server.h), when the host
  // skyrl-actor-host-python is beside actor_host.
  bool python_fork_server = false;
  // The lease actors stop by (its file is their SKYRL_ACTOR_LEASE); null: none. Outlives the
  // service.
  const LeaseWriter* actor_lease = nullptr;
  // Fetches a head KV value (working directories); unset: actors with one fail to start.
  WorkingDirs::Fetch fetch_working_dir;
  absl::Duration start_timeout = absl::Seconds(30);
  // Called (from the reaper thread) for every exit; the worker forwards it to the head.
  std::function<void(const v1::ActorExitInfo&)> on_exit;
  // Answers HeadContact (another worker asking whether this one reaches the head); unset:
  // UNIMPLEMENTED.
  std::function<absl::StatusOr<v1::HeadContactReply>(const std::string& asker)> head_contact;
  // Each actor that started serving, with how long it took from launch (may be null).
  std::function<void(absl::Duration)> on_started;
};

class WorkerServiceImpl final : public v1::WorkerService::Service {
 public:
  WorkerServiceImpl(WorkerServiceOptions options, const rpc::TokenAuth& auth);

  grpc::Status StartActor(grpc::ServerContext*, const v1::StartActorRequest*, v1::StartActorReply*) override;
  grpc::Status KillActor(grpc::ServerContext*, const v1::KillActorRequest*, v1::KillActorReply*) override;
  // The actors running now, and a way to stop some (the head declared this node dead).
  std::vector<ActorId> Running() const { return processes_.Running(); }
  std::vector<std::pair<ActorId, pid_t>> RunningPids() const { return processes_.RunningPids(); }
  int GpusInUse() const { return processes_.GpusInUse(); }
  void Stop(const std::vector<ActorId>& ids);
  // Stops start `incarnation` of `id` (or an older one) if it runs here (SIGKILL), and
  // refuses that start from now on (a late StartActor); true once none runs (it waits at
  // most 250 ms).
  bool StopStart(const ActorId& id, int64_t incarnation);
  // The node lost the head: every actor SIGKILLed now, saying why (ActorProcesses::Fence).
  int Fence(const std::string& reason) { return processes_.Fence(reason); }
  grpc::Status HeadContact(grpc::ServerContext*, const v1::HeadContactRequest*,
                           v1::HeadContactReply*) override;
  grpc::Status ListActors(grpc::ServerContext*, const v1::ListWorkerActorsRequest*,
                          v1::ListWorkerActorsReply*) override;

 private:
  void OnExit(const ActorExit& exit);

  const WorkerServiceOptions options_;
  const rpc::TokenAuth& auth_;
  absl::Mutex mu_;
  // Each exit with its sequence number, so StartActor sees only exits after its launch (an
  // actor restarted here keeps its id).
  std::deque<std::pair<uint64_t, v1::ActorExitInfo>> exits_ ABSL_GUARDED_BY(mu_);
  uint64_t exit_seq_ ABSL_GUARDED_BY(mu_) = 0;
  WorkingDirs working_dirs_;  // under log_dir/working_dirs
  // Declared last: its reaper thread calls OnExit, so it must stop before the rest goes.
  ActorProcesses processes_;
};

}  // namespace skyrl::worker
