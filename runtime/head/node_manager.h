// The head's table of nodes: registration, heartbeats and liveness.
//
// Node lifecycle:  (register) -> ALIVE --(no heartbeat for period x misses)--> DEAD
//                                  ALIVE --(unregister)--> DEAD
// A DEAD node that registers again with its id becomes ALIVE again.
//
// Isolation guard: with two or more nodes ALIVE, a node is declared dead only while the head
// hears another. When none has been heard for half the death threshold, the head is more
// likely cut off from them than they all died at once: it declares none dead until one is
// heard again, and then gives every ALIVE node a fresh window.
//
// Confirmed deaths (with the guard and 4 misses or more, when workers fence): a node declared
// DEAD by silence is marked `death_unconfirmed`, and its actors restart elsewhere (the
// listener's OnNodeDead) only once its death is confirmed, by the rules of DeathQuorum
// (runtime/head/death_quorum.h), which this table feeds with what nodes say and do. A node
// back before its death is confirmed is announced ALIVE only once it is. After a head
// restart, an unconfirmed death (stored with the node) is confirmed afresh.
// Every state change is written to the store (table "nodes") before it is acknowledged;
// heartbeat times are kept in memory only and restart from "now" after Recover().
// Time comes from the injected Clock, so liveness is tested without sleeping.
// Safe for concurrent use.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "runtime/common/clock.h"
#include "runtime/common/ids.h"
#include "runtime/head/death_quorum.h"
#include "runtime/head/resource_tracker.h"
#include "runtime/store/store.h"
#include "skyrl/node.pb.h"

namespace skyrl::head {

struct NodeManagerOptions {
  absl::Duration heartbeat_period = absl::Seconds(1);
  int heartbeat_misses = 5;  // a node is dead after this many periods without a heartbeat
  // When two liveness checks are further apart than this, the head itself stalled (blocked
  // on its store, starved of CPU): heartbeats could not be received either, so every alive
  // node gets a fresh window instead of being declared dead. Zero: off.
  absl::Duration stall_grace = absl::ZeroDuration();
  // The isolation guard above. Off: a silent node is dead after the threshold, whatever else
  // is heard.
  bool isolation_guard = true;
  // Confirmed deaths, above (only where workers fence: the guard and 4 misses or more).
  bool confirm_deaths = true;
  // The keep limit K workers are given (RegisterNodeReply.headless_keep_ms): cut off from the
  // head, a worker keeps its actors on its peers' word only until K after it sent the last
  // request the head answered, so no lease of a node heard last at t runs past t + K + 0.9 T,
  // and its death is confirmed at t + K + T whoever is left to confirm it. Zero: no limit
  // (confirmed by the peers or the retry window only).
  absl::Duration headless_keep = absl::ZeroDuration();
  // Heartbeats a second the head takes from all nodes together: past heartbeat_period x this
  // many ALIVE nodes, the period asked of workers grows by whole periods (at 10,000 nodes and
  // 2,500 a second, 4 s), so heartbeats cost the head a bounded share of a core. A node is
  // declared dead after the longest period its worker may apply x the misses. 0: no bound.
  int heartbeats_per_s = 2500;
};

// A node's peers, for fencing: its ring neighbours (DeathQuorum::PeersOf).
struct PeerList {
  bool changed = false;  // false: the caller's version is current, `addresses` is empty
  uint64_t version = 0;
  std::vector<std::string> addresses;
  std::vector<std::string> node_ids;  // beside addresses
};

// A worker process: the node it serves, its pid and start time (NodeInfo.pid,
// NodeInfo.pid_start_ticks; v1::ProcessCheck).
struct ProcessCheck {
  NodeId node;
  int pid = 0;
  int64_t start_ticks = 0;
};

// A heartbeat as NodeService checked it (v1::HeartbeatRequest).
struct HeartbeatIn {
  NodeId node;
  uint64_t peers_version = 0;  // the peer list its worker holds (0: none)
  bool send_peers = true;      // whether the reply carries the list when it changed
  // The peers it counted alive lately, and the worker processes of its process space it
  // found gone (answering checks). (The starts it reports stopped go to the StopMailbox.)
  std::vector<PeerSupport> supports;
  std::vector<ProcessCheck> gone;
  // The keep limit its worker applies (zero: none) and the period (zero: not said). Before
  // the reply goes out, the longest each may be from then on is recorded with the node (in
  // the store), so that this head or the next never counts on less: the larger of the
  // applied and this head's keep limit, and of the applied (else the longest recorded) and
  // the told period. nullopt: not recorded (a reply that is never sent, in tests).
  std::optional<absl::Duration> keep;
  std::optional<absl::Duration> period;
};

// What a heartbeat's reply says (v1::HeartbeatReply).
struct HeartbeatOut {
  absl::Duration period;             // the period to apply (the one asked of every node)
  PeerList peers;                    // its peers, when the list changed since it last had one
  std::vector<ProcessCheck> checks;  // silent nodes' worker processes in its process space
};

inline constexpr char kNodesTable[] = "nodes";

// What a node's leaving the scheduler's view displaced: the actors and bundles placed there.
using Displaced = scheduler::Cluster::Displaced;

// Told of every node that becomes ALIVE (registered) or DEAD (unregistered, or silent too
// long), after the change is stored and the scheduler's view follows it, outside the
// manager's lock, in the order the changes happened.
class NodeListener {
 public:
  virtual ~NodeListener() = default;
  virtual void OnNodeAlive(const v1::NodeInfo& node) = 0;
  // `displaced`: what was placed on it when it left the scheduler's view (empty when it left
  // earlier, silent: OnNodeSilent had it).
  virtual void OnNodeDead(const NodeId& node, const std::string& reason, Displaced displaced) = 0;
  // Declared DEAD by silence, its death not yet confirmed: nothing new goes there, but its
  // actors stay until OnNodeDead.
  virtual void OnNodeSilent(const NodeId& /*node*/, Displaced /*displaced*/) {}
};

class NodeManager {
 public:
  // `steady` (default: `clock`) times the lease horizon: when the head last answered each
  // node, and when that horizon passes (a step of the wall clock must not shorten it).
  // `placement` (optional; outlives the manager): the scheduler's view of the nodes, which
  // this table owns: a node is in it exactly while the table holds it ALIVE and announced
  // (not back from a death still unconfirmed), changed in the same step as the table, so a
  // node is placeable exactly when it can start actors. Lock order: this manager, then it.
  NodeManager(store::Store& store, const Clock& clock, NodeManagerOptions options,
              const Clock* steady = nullptr, ResourceTracker* placement = nullptr);

  // Loads the node table from the store (after a head restart). The listener is not told.
  absl::Status Recover();
  // REQUIRES: called before the manager is shared; `listener` outlives it.
  void SetListener(NodeListener* listener) { listener_ = listener; }
  // Validates `info` (resources, labels, GPU ids) and records the node ALIVE. `was_dead`
  // (optional) says whether the head had declared this node id DEAD (and has not heard a
  // heartbeat from it since it registered again). `peers_version`: the peer list the worker
  // holds until it has the reply (0: none).
  // `period` (optional) gets the heartbeat period to tell the worker (recorded first).
  absl::StatusOr<NodeId> Register(v1::NodeInfo info, bool* was_dead = nullptr, uint64_t peers_version = 0,
                                  absl::Duration* period = nullptr);
  // A heartbeat, in one step under the manager's lock with at most one store write: records
  // the limits its worker applies, the liveness and peer-list facts it carries, and returns
  // what the reply says. NotFound for an unknown or dead node; a store error when the limits
  // could not be recorded (the heartbeat then counts for nothing).
  absl::StatusOr<HeartbeatOut> Heartbeat(const HeartbeatIn& in);
  // The period heartbeats are asked to come at now (NodeManagerOptions::heartbeats_per_s).
  absl::Duration HeartbeatPeriod() const;
  absl::Status Unregister(const NodeId& id, absl::string_view reason);
  // Marks every ALIVE node whose last heartbeat is older than period x misses DEAD and
  // returns those nodes; tells the listener of every death confirmed (see above).
  std::vector<NodeId> CheckLiveness();
  // Whether workers fence: the head then confirms deaths.
  bool fencing() const { return options_.isolation_guard && options_.heartbeat_misses >= 4; }
  // DEAD by silence and not yet confirmed (its actors have not restarted elsewhere).
  bool DeathUnconfirmed(absl::string_view node_id) const;
  std::vector<v1::NodeInfo> List() const;
  // The node's row; nullopt when unknown (or not a node id).
  std::optional<v1::NodeInfo> Find(absl::string_view node_id) const;
  const NodeManagerOptions& options() const { return options_; }

 private:
  struct Check {
    std::vector<NodeId> declared;
    absl::flat_hash_map<NodeId, Displaced> displaced;       // the declared's
    std::vector<std::pair<NodeId, std::string>> confirmed;  // for the listener
    std::vector<v1::NodeInfo> back;                         // confirmed and ALIVE again: after their deaths
  };

  absl::Status Persist(const v1::NodeInfo& info) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Check CheckLivenessLocked() ABSL_LOCKS_EXCLUDED(mu_);
  // The period asked of workers now: options.heartbeat_period, in whole multiples when the
  // ALIVE nodes would send more than options.heartbeats_per_s.
  absl::Duration PeriodLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The longest period the worker of `info` may apply, and its death threshold (x misses).
  absl::Duration PeriodOf(const v1::NodeInfo& info) const;
  absl::Duration LimitOf(const v1::NodeInfo& info) const {
    return PeriodOf(info) * options_.heartbeat_misses;
  }
  // The longest threshold any worker may apply (the longest period told or recovered).
  absl::Duration LimitMax() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return longest_period_ * options_.heartbeat_misses;
  }
  // The latest the death of `id`, declared now, waits until (DeathQuorum::Deadlines).
  DeathQuorum::Deadlines DeadlinesOf(const NodeId& id, const v1::NodeInfo& info) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // When no lease renewed by the worker of `info`, last answered at `last_answered` (steady
  // clock), can still run: InfiniteFuture when it may apply no keep limit.
  absl::Time Horizon(const v1::NodeInfo& info, absl::Time last_answered) const;
  // The keep limit a worker applying `applied` may apply once it has this head's reply.
  int64_t KeepBoundMs(int64_t applied_ms) const;
  // Heartbeat's parts. The worker processes of the silent nodes (DEAD and unconfirmed, or
  // ALIVE and unheard for two periods, as the last CheckLiveness found them) in the process
  // space of `asker`'s worker.
  std::vector<ProcessCheck> ProcessChecksLocked(const NodeId& asker) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `reporter`'s worker found these processes gone from its process space. Each that is the
  // current process of a silent node there makes that node's death certain: it is declared
  // and confirmed by the next CheckLiveness. Other reports are ignored.
  void ReportGoneLocked(const NodeId& reporter, const std::vector<ProcessCheck>& gone)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whose worker process may be checked: DEAD and unconfirmed (not back), or ALIVE and
  // unheard for two periods.
  bool Silent(const NodeId& id, const v1::NodeInfo& info, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The scheduler's view follows the table (`placement`): the node joins it, or leaves it
  // (what was placed there is returned).
  void JoinPlacement(const v1::NodeInfo& info) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Displaced LeavePlacement(const NodeId& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records the confirmation of a DEAD node; false when the store refused (retried later).
  bool Confirm(const NodeId& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gone for good (dead and confirmed, or left): what was kept to confirm its death, and
  // about its worker, is dropped.
  void ForgetLocked(const NodeId& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fills `peers` for node `id`, which holds `known`.
  void FillPeers(const NodeId& id, uint64_t known, PeerList& peers) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  store::Store& store_;
  const Clock& clock_;
  const Clock& steady_;
  NodeListener* listener_ = nullptr;
  ResourceTracker* const placement_;
  const NodeManagerOptions options_;
  // Held across a state change and its listener call, so listeners see node events in the
  // order they happened (a late "dead" never follows the re-registration it preceded).
  absl::Mutex events_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  absl::flat_hash_map<NodeId, v1::NodeInfo> nodes_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Time> last_check_ ABSL_GUARDED_BY(mu_);
  bool isolated_ ABSL_GUARDED_BY(mu_) = false;  // the isolation guard holds
  // Nodes registered again after being declared dead that have not heartbeated since: a
  // repeated registration still answers was_dead (the first reply may have been lost).
  absl::flat_hash_set<NodeId> unacknowledged_deaths_ ABSL_GUARDED_BY(mu_);
  // The peer lists (PeerList::version changes whenever the set of ALIVE nodes or an
  // address does) and the deaths waiting for confirmation.
  DeathQuorum quorum_ ABSL_GUARDED_BY(mu_);
  absl::Duration longest_period_ ABSL_GUARDED_BY(mu_);  // LimitMax's
  // Silent nodes whose worker process another worker in its process space found gone: why.
  absl::flat_hash_map<NodeId, std::string> gone_ ABSL_GUARDED_BY(mu_);
  // When this head last answered each node (steady clock): registered, or heartbeated.
  absl::flat_hash_map<NodeId, absl::Time> answered_ ABSL_GUARDED_BY(mu_);
  // The silent nodes with a process space, as the last liveness check found them.
  std::vector<NodeId> suspects_ ABSL_GUARDED_BY(mu_);
};

// Validates a node description from outside; errors name the field.
absl::Status ValidateNodeInfo(const v1::NodeInfo& info);

}  // namespace skyrl::head
