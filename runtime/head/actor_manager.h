// The head's actor table: placement on a node, start through the node's worker, and the
// lifecycle with restarts.
//
//   PENDING -> ALIVE <-> RESTARTING -> DEAD
// PENDING: placed on a node, its process starting. ALIVE: serving at `address`.
// RESTARTING: died unexpectedly with restarts left; being placed and started again (on any
// node that fits, so on another node when its node is gone), waiting as long as it takes for
// a node with room. DEAD: killed by the user, out of restarts, its constructor failed, or no
// node could take it at creation; `death_reason` says which.
// Every transition is written to the store (table "actors") before it is visible.
//
// Placement is the scheduler's (scheduler::Cluster through the shared ResourceTracker): on
// any node that fits, or in a placement group's bundle; fractions of a GPU share a device.
// An actor holds its resources while PENDING or ALIVE and gives them back on every other
// transition. Safe for concurrent use.
#pragma once

#include <memory>
#include <string>
#include <atomic>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "runtime/head/node_manager.h"
#include "runtime/head/resource_tracker.h"
#include "skyrl/actor_directory.pb.h"
#include "skyrl/worker.pb.h"

namespace skyrl::head {

inline constexpr char kActorsTable[] = "actors";

// How the head reaches workers; injected so tests can replace the network.
class WorkerClient {
 public:
  virtual ~WorkerClient() = default;
  virtual absl::StatusOr<v1::StartActorReply> StartActor(const std::string& worker_address,
                                                         const v1::StartActorRequest& request) = 0;
  virtual absl::Status KillActor(const std::string& worker_address, const std::string& actor_id) = 0;
};

// WorkerClient over gRPC with the cluster token.
std::unique_ptr<WorkerClient> MakeGrpcWorkerClient(std::string token);

class ActorManager {
 public:
  ActorManager(store::Store& store, NodeManager& nodes, ResourceTracker& resources, WorkerClient& workers);
  ~ActorManager();  // waits for restarts in progress

  // Loads the actor table and gives PENDING/ALIVE actors their resources back in the
  // tracker. REQUIRES: the tracker has the alive nodes and the placement groups already.
  absl::Status Recover();
  // Places and starts the actor; returns it ALIVE, or DEAD with the reason (e.g. the
  // constructor's error). Errors: InvalidArgument (spec), AlreadyExists (name taken),
  // FailedPrecondition (its placement group is not placed), ResourceExhausted (nothing fits
  // now: says what it needs and what the best node offers, and whether it could ever fit).
  absl::StatusOr<v1::ActorInfo> Create(v1::ActorSpec spec);
  absl::StatusOr<v1::ActorInfo> Get(const ActorId& id) const;
  absl::StatusOr<v1::ActorInfo> GetByName(absl::string_view ns, absl::string_view name) const;
  absl::Status Kill(const ActorId& id);
  std::vector<v1::ActorInfo> List() const;

  // A worker reports that an actor's process ended.
  void OnActorExit(const NodeId& node, const v1::ActorExitInfo& exit);
  // The node manager declared a node dead.
  void OnNodeDead(const NodeId& node, const std::string& reason);
  // Their placement group was removed: every actor of `group` that is not DEAD becomes
  // DEAD with `reason`, and its process is killed.
  void KillGroup(const std::string& group, const std::string& reason);
  // Their job ended: every non-detached actor of `job_id` that is not DEAD becomes DEAD with
  // `reason`, and its process is killed.
  void KillJob(const std::string& job_id, const std::string& reason);

 private:
  // Plans and takes resources for the actor (PENDING's share).
  absl::StatusOr<scheduler::Slot> Place(const ActorId& id, const v1::ActorSpec& spec) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Release(const ActorId& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // DEAD with `reason`, resources released; the processes to kill go into `kills` as
  // (node, actor id).
  void MarkKilled(const ActorId& id, const std::string& reason,
                  std::vector<std::pair<std::string, std::string>>& kills) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void KillProcesses(const std::vector<std::pair<std::string, std::string>>& kills);
  std::string WorkerAddress(const std::string& node_id) const;
  // Places, starts and records the actor; the caller holds no lock. With `wait_for_room` (a
  // restart), waits until some node can take it, it is killed, or the head stops.
  absl::StatusOr<v1::ActorInfo> PlaceAndStart(const ActorId& id, bool wait_for_room);
  // An unexpected death: restart if allowed, else DEAD.
  void HandleDeath(const ActorId& id, const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Places and starts it again on a thread of its own, after killing a leftover process at
  // `kill_first_at` (a worker address) when one is given.
  void StartRestart(const ActorId& id, const std::string& kill_first_at) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Persist(const v1::ActorInfo& info) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  store::Store& store_;
  NodeManager& nodes_;
  ResourceTracker& resources_;
  WorkerClient& workers_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<ActorId, v1::ActorInfo> actors_ ABSL_GUARDED_BY(mu_);
  // Placement group id -> its actors, so removing a group does not scan every actor.
  absl::flat_hash_map<std::string, absl::flat_hash_set<ActorId>> by_group_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<ActorId> exited_while_starting_ ABSL_GUARDED_BY(mu_);
  // Restarts in progress, each on its own thread; finished ones are joined when the next
  // restart starts, so the list stays as long as the restarts actually waiting.
  struct Restart {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<Restart> restarts_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace skyrl::head
