// The head's actor table: placement on a node, start through the node's worker, and the
// lifecycle with restarts.
//
//   PENDING -> ALIVE <-> RESTARTING -> DEAD
// PENDING: placed on a node, its process starting. ALIVE: serving at `address`.
// RESTARTING: died unexpectedly with restarts left; being placed and started again (on any
// node that fits, so on another node when its node is gone), waiting as long as it takes for
// a node with room. DEAD: killed by the user, out of restarts, its constructor failed, or no
// node could take it at creation; `death_reason` says which.
// Actors waiting for room (RESTARTING ones, and creations with return_pending: PENDING with
// no node) wait in the head's DemandQueue, tried again in creation order when resources are
// released or nodes join: no thread per waiting actor, and no cap on how many wait.
// Every transition is written to the store (table "actors") before it is visible.
//
// Placement is the scheduler's (scheduler::Cluster through the shared ResourceTracker): on
// any node that fits, or in a placement group's bundle; fractions of a GPU share a device.
// An actor holds its resources while PENDING or ALIVE and gives them back on every other
// transition.
//
// The table lives on the head's EventLoop (event_loop.h): every change runs there, one at a
// time, so this manager takes no lock. Asynchronous methods post their work and return (or,
// with the loop idle, run it at once on the caller's thread: EventLoop::Dispatch); the others
// run on the loop and wait for it (on the loop itself, inline). Answers of the workers
// (starts, kills) post back to the loop: the loop thread takes them in batches and finishes
// their RPCs together (answering each on its own gRPC thread cost the head and its callers
// more CPU per create). Safe for concurrent use; Create, Kill and KillJob wait for workers
// and must not be called on the loop.
//
// DEAD is final, and DEAD actors are kept only up to RetentionOptions::keep_terminal (the
// head's --keep-terminal): past it, the actor that died first is evicted from memory and
// from the store, and Get, GetByName, Kill and List no longer know it (NotFound). Live
// actors (PENDING, ALIVE, RESTARTING) are never evicted.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "runtime/common/clock.h"
#include "runtime/head/demand_queue.h"
#include "runtime/head/event_loop.h"
#include "runtime/head/node_manager.h"
#include "runtime/head/resource_tracker.h"
#include "runtime/head/retention.h"
#include "runtime/head/stop_mailbox.h"
#include "runtime/head/worker_client.h"
#include "skyrl/actor_directory.pb.h"

namespace skyrl::head {

inline constexpr char kActorsTable[] = "actors";

class ActorManager {
 public:
  using CreateDone = std::function<void(absl::StatusOr<v1::ActorInfo>)>;
  using BatchDone = std::function<void(std::vector<absl::StatusOr<v1::ActorInfo>>)>;
  using StatusDone = std::function<void(absl::Status)>;

  // `clock` stamps deaths (died_unix_ms), which order eviction across head restarts.
  // Actors waiting for room wait in `demand`; the table lives on `loop`. Both must outlive
  // this manager.
  ActorManager(store::Store& store, NodeManager& nodes, ResourceTracker& resources, WorkerClient& workers,
               DemandQueue& demand, EventLoop& loop, const Clock& clock, RetentionOptions retention = {});
  ~ActorManager();  // Stop()
  // Takes no more waiting work and drains the loop: starts and kills in flight answer, and
  // their answers run, while what they call is still there. The head calls it before it
  // destroys the managers. Idempotent. Not on the loop.
  void Stop();

  // Loads the actor table and gives PENDING/ALIVE actors their resources back in the
  // tracker; DEAD actors are queued for eviction by died_unix_ms (0 for old records: first),
  // ties by id, and those over the cap are evicted (from the store as well) at once.
  // REQUIRES: the tracker has the alive nodes and the placement groups already.
  absl::Status Recover();
  // Places and starts the actor; returns it ALIVE, or DEAD with the reason (e.g. the
  // constructor's error). Errors: InvalidArgument (spec), AlreadyExists (name taken),
  // FailedPrecondition (its placement group is not placed), ResourceExhausted (nothing fits
  // now: says what it needs and what the best node offers, and whether it could ever fit).
  absl::StatusOr<v1::ActorInfo> Create(v1::ActorSpec spec);
  // Create without holding the caller's thread while the worker starts the process: `done`
  // runs once with what Create would return, inline for an invalid spec, else on the loop
  // (which may be this thread, while the loop is idle: EventLoop::Dispatch). The caller
  // holds no lock a task of the loop takes.
  // With `return_pending`, `done` runs as soon as the actor is recorded PENDING, and its
  // start goes on in the background (ending ALIVE, or DEAD with the reason); when no node has
  // room now but one could, or its placement group is not placed yet (PENDING or
  // RESCHEDULING), the actor stays PENDING with its pending_reason until it can be placed
  // (as a restart waits), instead of ResourceExhausted or FailedPrecondition.
  void CreateAsync(v1::ActorSpec spec, CreateDone done, bool return_pending = false);
  // Many creates at once: each spec is validated, placed and started on its own, all or
  // nothing per item, never per batch (a failed item leaves nothing behind and the others go
  // on). `done` gets one result per spec, in order, once every item is settled. Items are
  // admitted in order, so a name taken by an earlier item of the batch is AlreadyExists.
  void CreateBatchAsync(std::vector<v1::ActorSpec> specs, BatchDone done);
  absl::StatusOr<v1::ActorInfo> Get(const ActorId& id) const;
  // The live actor of that name (from the live-name index), else a DEAD one still kept (a
  // scan: only for names no live actor holds), else NotFound. Empty `ns`: "default".
  absl::StatusOr<v1::ActorInfo> GetByName(absl::string_view ns, absl::string_view name) const;
  absl::Status Kill(const ActorId& id);
  // Kill, with `done` once the worker has been told (or could not be reached: logged).
  void KillAsync(const ActorId& id, StatusDone done);
  // Ray's kill(no_restart=False): an ALIVE actor's process is stopped and the actor restarts
  // as after a crash, if its max_restarts allow (DEAD otherwise, the process killed). An actor
  // that is not ALIVE is left as it is. `done` once that is decided.
  void RestartAsync(const ActorId& id, StatusDone done);
  // Ray's blocked tasks: an ALIVE actor blocked waiting lends its CPU to others until it is
  // unblocked (scheduler::Cluster::LendCpu). Returns whether it holds its CPU now (unblocked
  // while others use it: false, and a later unblock takes it back). NotFound for an unknown
  // actor; one that is not ALIVE is left as it is.
  absl::StatusOr<bool> SetBlocked(const ActorId& id, bool blocked);
  std::vector<v1::ActorInfo> List() const;
  // How actors learn whether a placement group is waiting to be placed (PENDING or
  // RESCHEDULING): an actor of such a group created with return_pending waits for it. Set
  // once, before the manager is used; called on the loop, so it must not wait on the loop
  // (the group manager takes its own lock, and never waits on the loop holding it).
  void SetGroupWaiting(std::function<bool(const std::string& group_id)> waiting);

  // A worker reports that an actor's process ended.
  void OnActorExit(const NodeId& node, const v1::ActorExitInfo& exit);
  // The node manager declared a node dead (its death confirmed), or announced it ALIVE.
  void OnNodeDead(const NodeId& node, const std::string& reason);
  void OnNodeAlive(const NodeId& node) { stops_.NodeBack(node); }
  // The worker of `node` reported `start` stopped (through the StopMailbox).
  void OnStopReported(const NodeId& node, const ActorStart& start);
  // The stops asked through heartbeat replies of workers the head could not reach.
  StopMailbox& stops() { return stops_; }
  // Their placement group was removed: every actor of `group` that is not DEAD becomes
  // DEAD with `reason`, and its process is killed; `done` once every worker has been told.
  // Parks no thread.
  void KillGroupAsync(const std::string& group, const std::string& reason, std::function<void()> done);
  // Their job ended: every non-detached actor of `job_id` that is not DEAD becomes DEAD with
  // `reason`, and its process is killed.
  void KillJob(const std::string& job_id, const std::string& reason);

  // Why actors died since this head started, for its metrics: "killed" (by the user, with
  // their placement group or job), "exited" (the process ended), "node_lost",
  // "start_failed" (the constructor or the start failed), "unplaceable" (no node could take
  // it). A death with restarts left is a restart, counted as one, and not as a death.
  enum class DeathCause { kKilled, kExited, kNodeLost, kStartFailed, kUnplaceable };
  static constexpr int kDeathCauses = static_cast<int>(DeathCause::kUnplaceable) + 1;
  static const char* DeathCauseName(DeathCause cause);
  struct LifeCounts {
    uint64_t restarts = 0;
    std::map<std::string, uint64_t> deaths;  // by DeathCauseName, every cause present
  };
  LifeCounts Counts() const;

 private:
  // Plans and takes resources for the actor (PENDING's share) on a node whose worker can
  // start it: a node the scheduler still holds but the node table no longer holds alive (its
  // death is being announced) is passed over, and the plan made again without it.
  struct Placement {
    scheduler::Slot slot;
    std::string address;  // the node's worker
  };
  absl::StatusOr<Placement> Place(const ActorId& id, const v1::ActorSpec& spec)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_);
  // One plan (passing over `avoid`), and its resources taken.
  absl::StatusOr<scheduler::Slot> PlanAndTake(const ActorId& id, const v1::ActorSpec& spec,
                                              const absl::flat_hash_set<std::string>& avoid)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_);
  // Gives the actor's resources back; with `kick`, the demand queue looks for what fits now.
  void Release(const ActorId& id, bool kick = true) ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_);
  // A process to stop: the actor's start `incarnation` on `node_id`.
  struct ProcessAt {
    std::string node_id;
    ActorId actor_id;
    int64_t incarnation = 0;
  };
  // DEAD with `reason`, resources released; the process to kill goes into `kills`.
  void MarkKilled(const ActorId& id, const std::string& reason, std::vector<ProcessAt>& kills)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_);
  void KillProcessesAsync(const std::vector<ProcessAt>& kills, std::function<void()> done);
  // Kills `process` at its worker (`address`), then calls `after`. A kill that fails (the
  // worker cannot be reached) is asked in its node's heartbeat replies instead (`what` the
  // process is, for the log).
  void SendKill(const std::string& address, const ProcessAt& process, const char* what,
                std::function<void()> after);
  // A restart waiting for the process of an earlier start to stop (StartRestart's
  // `stop_first`), by that start. It ends (ResolveStopLocked: the restart is queued) when the
  // worker stops the process or says it does not run it, when the worker reports it stopped
  // through a heartbeat (the StopMailbox), or when the node's death is confirmed or it is
  // gone for good (its worker fenced its actors). The kill is retried on the demand queue's
  // clock, 200 ms after the first failure, doubling up to 2 s; no thread waits.
  struct AwaitedStop {
    ProcessAt at;
    std::optional<NodeId> node;  // at.node_id, parsed once (none: not a node id)
    absl::Duration delay;        // the restart's own delay, once the process is stopped
    int tries = 0;
    bool said = false;  // the actor's pending_reason says what it waits for
  };
  // One attempt to stop `start` (on the demand queue's thread).
  DemandQueue::Outcome TryStop(const ActorStart& start);
  // A kill of `start` answered `s`.
  void OnStopAnswer(const ActorStart& start, const absl::Status& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_);
  void ResolveStopLocked(const ActorStart& start) ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_);
  void QueueStopTry(const ActorStart& start, absl::Duration delay);
  // A start to make: where, and which incarnation it is for.
  struct StartTicket {
    std::string worker_address, node_id;
    int64_t incarnation = 0;
    v1::StartActorRequest request;
  };
  // The bodies of the public methods of those names, on the loop.
  void CreateOnLoop(const v1::ActorSpec& spec, CreateDone done, bool return_pending)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_);
  absl::Status RecoverTable(const std::vector<store::Entry>& entries) ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_);
  DemandQueue::Outcome PlaceWaiting(const ActorId& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_);
  void ExitedOnLoop(const NodeId& node, const ActorId& id, const v1::ActorExitInfo& exit)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_);
  void NodeDeadOnLoop(const NodeId& node, const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_);
  absl::StatusOr<v1::ActorInfo> FindByName(absl::string_view ns, absl::string_view name) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_);
  absl::StatusOr<bool> BlockOnLoop(const ActorId& id, bool blocked) ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_);
  // A new actor, its spec validated (ValidateSpec): checks the name, places it and records
  // it PENDING (or DEAD when its node has no worker address); sets `id`. Returns the start to
  // make, or its final state. Nothing is recorded on error. With `wait_for_room`, an actor no
  // node has room for now (but one could), or whose group is waiting to be placed
  // (GroupWaiting), is recorded PENDING with no node, queued in the demand queue, and
  // returned so.
  absl::StatusOr<std::variant<v1::ActorInfo, StartTicket>> Admit(const v1::ActorSpec& spec, ActorId& id,
                                                                 bool wait_for_room)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_);
  // Whether the actor's placement group is waiting to be placed (group_waiting_).
  bool GroupWaiting(const v1::ActorSpec& spec) const;
  // Sets `a` PENDING at `slot` (not persisted) and returns the start that goes with it.
  StartTicket MarkPending(const ActorId& id, v1::ActorInfo& a, const scheduler::Slot& slot,
                          const std::string& address) ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_);
  // The demand queue's attempt for a waiting actor: places it, records it PENDING and starts
  // it (kPlaced); kWaiting with its pending_reason updated while nothing fits; kGone when it
  // no longer waits (killed, evicted, or started meanwhile).
  DemandQueue::Outcome TryPlaceWaiting(const ActorId& id);
  // Queues a waiting actor in the demand queue, tried after `delay`.
  void Enqueue(const ActorId& id, const v1::ActorSpec& spec, absl::Duration delay = absl::ZeroDuration());
  // Sends `ticket`'s start without holding a thread; FinishStart records the answer, then
  // `done` (when set) gets the outcome.
  void StartAsync(const ActorId& id, StartTicket ticket, CreateDone done);
  // Records the worker's answer to `ticket`: ALIVE, DEAD (constructor error) or a death.
  absl::StatusOr<v1::ActorInfo> FinishStart(const ActorId& id, const StartTicket& ticket,
                                            absl::StatusOr<v1::StartActorReply> started)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_);
  std::string WorkerAddress(const std::string& node_id) const;
  // An unexpected death: restart if allowed, else DEAD. `unknown` is a start whose outcome
  // is not known (it may run): it is stopped before the actor starts elsewhere.
  void HandleDeath(const ActorId& id, const std::string& reason, DeathCause cause,
                   std::optional<ProcessAt> unknown = std::nullopt) ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_);
  // Queues it to be placed and started again, after `delay`; when `stop_first` is given,
  // only once that process is stopped (AwaitedStop).
  void StartRestart(const ActorId& id, std::optional<ProcessAt> stop_first,
                    absl::Duration delay = absl::ZeroDuration()) ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_);
  // Writes the actor's record. A failure is logged here, naming the actor; the head's store
  // then refuses every later write and says why (store::StickyStore), so a caller that
  // answers nobody may go on. Returns it for the callers that answer a user.
  absl::Status Persist(const v1::ActorInfo& info) ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_);
  // Every change of an actor's state in the table, but for a placement (MarkPending), goes
  // through here: sets `to` and what goes with it, then persists (Persist's error).
  //   - leaving PENDING or ALIVE: its resources are released (the demand queue kicked);
  //   - DEAD or RESTARTING: no address; RESTARTING: no node either (placed again);
  //   - DEAD: stamped with the time, counted under `cause`, its name freed, queued for
  //     eviction; final (a DEAD actor does not change again);
  //   - `reason` becomes its death_reason (empty: the one it has is kept).
  // REQUIRES: `a` is actors_[id].
  absl::Status Transition(const ActorId& id, v1::ActorInfo& a, v1::ActorState to, std::string reason,
                          DeathCause cause = DeathCause::kKilled) ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_);
  // Evicts the DEAD actors over the cap, oldest first, from memory and from the store (or,
  // with `deletes`, appends the store's deletes there for the caller to apply).
  // REQUIRES: the caller holds no reference into actors_.
  void Trim(std::vector<store::Write>* deletes = nullptr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop_);

  // Runs `fn` on the loop, waiting for its answer, then trims (Trim): an eviction never
  // happens while a task still refers to an entry. On the loop: inline, and the task
  // around it trims.
  template <typename F>
  std::invoke_result_t<F> OnLoop(F&& fn);
  // `task`, then a trim (and in_task_ set while it runs).
  EventLoop::Task Trimming(std::function<void()> task);
  // Posts `task` to the loop; it trims after it runs.
  void PostTask(std::function<void()> task);
  // PostTask, or at once on this thread while the loop is idle (EventLoop::Dispatch): for
  // callers that hold no lock a task takes (RPC handlers).
  void DispatchTask(std::function<void()> task);
  // The completion to give work outside the loop (a worker's start or kill): it holds the
  // loop until the answer has run `fn` there (PostTask), so Stop waits for it.
  template <typename Answer>
  std::function<void(Answer)> AnswerOnLoop(std::function<void(Answer)> fn);

  store::Store& store_;
  NodeManager& nodes_;
  StopMailbox stops_;
  ResourceTracker& resources_;
  WorkerClient& workers_;
  DemandQueue& demand_;
  EventLoop& loop_;
  const Clock& clock_;
  std::function<bool(const std::string&)> group_waiting_;  // set once, before use
  // DEAD actors in the order they died: the eviction queue.
  TerminalFifo<ActorId> dead_ ABSL_GUARDED_BY(loop_);
  absl::flat_hash_map<ActorId, v1::ActorInfo> actors_ ABSL_GUARDED_BY(loop_);
  // Live (not DEAD) named actors by NameKey(namespace, name): names are unique among them,
  // checked without scanning every actor. An actor enters when admitted or recovered live and
  // leaves when it becomes DEAD (Transition); restarts keep it, and eviction touches only DEAD
  // actors, which are already out.
  absl::flat_hash_map<std::string, ActorId> live_names_ ABSL_GUARDED_BY(loop_);
  // Placement group id -> its actors, so removing a group does not scan every actor.
  absl::flat_hash_map<std::string, absl::flat_hash_set<ActorId>> by_group_ ABSL_GUARDED_BY(loop_);
  absl::flat_hash_set<ActorId> exited_while_starting_ ABSL_GUARDED_BY(loop_);
  // Starts that failed in a row (not the constructor's error): each restart after the first
  // waits longer, so a node that keeps refusing is not asked thousands of times a second.
  absl::flat_hash_map<ActorId, int> failed_starts_ ABSL_GUARDED_BY(loop_);
  absl::flat_hash_map<ActorStart, AwaitedStop> awaited_stops_ ABSL_GUARDED_BY(loop_);
  bool stopping_ ABSL_GUARDED_BY(loop_) = false;
  bool in_task_ ABSL_GUARDED_BY(loop_) = false;  // a task of ours (PostTask, OnLoop) is running
  uint64_t restarts_total_ ABSL_GUARDED_BY(loop_) = 0;
  uint64_t deaths_[kDeathCauses] ABSL_GUARDED_BY(loop_) = {};  // by DeathCause
};

}  // namespace skyrl::head
