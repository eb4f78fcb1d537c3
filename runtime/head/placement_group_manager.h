// The head's placement groups: all-or-nothing reservations of bundles, placed by the
// scheduler, persisted in table "placement_groups", and kept placed through node loss.
//
//   (create) -> CREATED                         fits now
//            -> PENDING -> CREATED              fits once resources free up (or, with
//                                               wait_for_nodes, once nodes join)
//            -> error, nothing stored           can never fit this cluster
//   CREATED -> RESCHEDULING -> CREATED          a node with bundles died; they are placed
//                                               again where room appears
//   any -> REMOVED                              bundles freed, actors in them killed
// PENDING and RESCHEDULING carry `pending_reason`: which bundle, what it needs, and what the
// best node offers. Waiting groups are entries of the head's DemandQueue (with the actors
// waiting for room), tried again, oldest first, when resources are released or nodes join;
// RetryPending() also places what has become placeable now, on the caller's thread.
// REMOVED is final, and REMOVED groups are kept only up to RetentionOptions::keep_terminal
// (the head's --keep-terminal): past it, the group removed first is evicted from memory and
// from the store, and Get, WaitAsync and Remove no longer know it (NotFound). Live groups are never
// evicted.
// Safe for concurrent use. Lock order: this manager, then the tracker. The actor table's
// tasks on the head's event loop take this manager's lock (IsWaiting), so it never waits on
// the loop while it holds it: what it asks of the actors (KillGroupAsync) is posted.
#pragma once

#include <functional>
#include <list>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "runtime/common/clock.h"
#include "runtime/head/actor_manager.h"
#include "runtime/head/demand_queue.h"
#include "runtime/head/resource_tracker.h"
#include "runtime/head/retention.h"
#include "runtime/store/store.h"
#include "skyrl/placement_group.pb.h"

namespace skyrl::head {

inline constexpr char kPlacementGroupsTable[] = "placement_groups";

class PlacementGroupManager {
 public:
  using GroupDone = std::function<void(absl::StatusOr<v1::PlacementGroupInfo>)>;
  using StatusDone = std::function<void(absl::Status)>;

  // `clock` stamps creations and removals (removed_unix_ms orders eviction across restarts).
  // Waiting groups wait in `demand`, which must outlive this manager.
  PlacementGroupManager(store::Store& store, ResourceTracker& resources, ActorManager& actors,
                        DemandQueue& demand, const Clock& clock, RetentionOptions retention = {});
  ~PlacementGroupManager();  // fails the waits still open (StopWaits) and joins their thread

  // Loads the table and reserves the bundles of placed groups on nodes the tracker knows;
  // bundles whose node is gone make their group RESCHEDULING. REQUIRES: the tracker has the
  // alive nodes, and actors are recovered after this. REMOVED groups are queued for eviction
  // by removed_unix_ms (created_unix_ms for old records without it), ties by id, and those
  // over the cap are evicted (from the store as well) at once.
  absl::Status Recover();
  // Errors: InvalidArgument (spec, naming the field), AlreadyExists (name), ResourceExhausted
  // (can never fit, unless wait_for_nodes), or the store's error.
  absl::StatusOr<v1::PlacementGroupInfo> Create(v1::PlacementGroupSpec spec);
  // Waits for the group without holding the caller's thread: `done` runs once with the group
  // once CREATED, FailedPrecondition once REMOVED, NotFound for an unknown (or evicted) group,
  // or DeadlineExceeded with its pending reason after `timeout`; inline when the outcome is
  // known now, else on this manager's wait thread (one thread for every open wait, started on
  // first use). `done` must not block for long.
  void WaitAsync(const PlacementGroupId& id, absl::Duration timeout, GroupDone done);
  // Fails every open wait and every later one with Unavailable ("the head is stopping"), so
  // that a server shutting down is not held by waits of up to ten minutes.
  void StopWaits();
  absl::Status Remove(const PlacementGroupId& id);
  // Remove, with `done` once the group's actors have been killed; parks no thread.
  void RemoveAsync(const PlacementGroupId& id, StatusDone done);
  // Removes the live, non-detached groups of a job that ended.
  void RemoveJobGroups(const std::string& job_id);
  absl::StatusOr<v1::PlacementGroupInfo> Get(const PlacementGroupId& id) const;
  absl::StatusOr<v1::PlacementGroupInfo> GetByName(absl::string_view ns, absl::string_view name) const;
  std::vector<v1::PlacementGroupInfo> List() const;

  // Places PENDING groups and lost bundles where there is room now, oldest first, and kicks
  // the demand queue (actors waiting for room or for a group).
  void RetryPending();
  // Whether the group is PENDING or RESCHEDULING (ActorManager::SetGroupWaiting).
  bool IsWaiting(const std::string& group_id) const;
  // Bundles lost with their node (the tracker has already dropped them).
  void OnBundlesLost(const std::vector<std::pair<std::string, int>>& bundles, const std::string& reason);

 private:
  // Writes the record; a failure is logged here (the head's store then refuses every later
  // write and says why: store::StickyStore) and returned for callers that answer a user.
  absl::Status Persist(const v1::PlacementGroupInfo& info) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Evicts the REMOVED groups over the cap, oldest first, from memory and from the store.
  // With `deletes`, the store's deletes are appended there for the caller to apply.
  // REQUIRES: the caller holds no reference into groups_.
  void Trim(std::vector<store::Write>* deletes = nullptr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks the group waiting and queues it in the demand queue (once).
  void Queue(const PlacementGroupId& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The demand queue's attempt for a waiting group.
  DemandQueue::Outcome TryPlaceQueued(const PlacementGroupId& id);
  // Tries to place a PENDING or RESCHEDULING group; true when it changed.
  bool TryPlace(v1::PlacementGroupInfo& info) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Wakes the wait thread after a state change.
  void Changed() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What a wait for `id` returns now, or nothing while it should go on waiting.
  std::optional<absl::StatusOr<v1::PlacementGroupInfo>> WaitOutcome(const PlacementGroupId& id,
                                                                    bool expired) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // The wait thread: settles open waits as groups change or their deadlines pass.
  void ServeWaits();

  store::Store& store_;
  ResourceTracker& resources_;
  ActorManager& actors_;
  DemandQueue& demand_;
  const Clock& clock_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<PlacementGroupId, v1::PlacementGroupInfo> groups_ ABSL_GUARDED_BY(mu_);
  // PENDING and RESCHEDULING groups: what RetryPending looks at.
  absl::flat_hash_set<PlacementGroupId> waiting_ ABSL_GUARDED_BY(mu_);
  // Live (not REMOVED) named groups by NameKey(namespace, name): names are unique among them,
  // checked without scanning every group ever created.
  absl::flat_hash_map<std::string, PlacementGroupId> live_names_ ABSL_GUARDED_BY(mu_);
  // REMOVED groups in the order they were removed: the eviction queue.
  TerminalFifo<PlacementGroupId> removed_ ABSL_GUARDED_BY(mu_);
  struct OpenWait {
    PlacementGroupId id;
    absl::Time deadline;
    GroupDone done;
  };
  std::list<OpenWait> waits_ ABSL_GUARDED_BY(mu_);
  absl::CondVar waits_changed_;  // signalled on a change while waits_ is not empty
  bool waits_stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::thread wait_thread_ ABSL_GUARDED_BY(mu_);
};

absl::Status ValidatePlacementGroupSpec(v1::PlacementGroupSpec& spec);

}  // namespace skyrl::head
