// The head's table of nodes: registration, heartbeats and liveness.
//
// Node lifecycle:  (register) -> ALIVE --(no heartbeat for period x misses)--> DEAD
//                                  ALIVE --(unregister)--> DEAD
// A DEAD node that registers again with its id becomes ALIVE again.
//
// Isolation guard: with two or more nodes ALIVE, a node is declared dead only while the head
// hears another. When none has been heard for half the death threshold, the head is more
// likely cut off from them than they all died at once: it declares none dead until one is
// heard again, and then gives every ALIVE node a fresh window. Workers fence on the same
// rule (worker::HeadLink): a worker cut off from the head stops its actors unless every peer
// it asks is cut off too, so a node is not declared dead (its actors restarted elsewhere)
// while its own actors still serve. A lone node is declared dead by silence alone, as
// without the guard (it has no peers to ask, and does not fence): its actors wait for room
// elsewhere, and when it comes back its old actors are stopped.
// Every state change is written to the store (table "nodes") before it is acknowledged;
// heartbeat times are kept in memory only and restart from "now" after Recover().
// Time comes from the injected Clock, so liveness is tested without sleeping.
// Safe for concurrent use.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "runtime/common/clock.h"
#include "runtime/common/ids.h"
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
};

// The worker addresses of the ALIVE nodes other than the asking one, for fencing.
struct PeerList {
  bool changed = false;  // false: the caller's version is current, `addresses` is empty
  uint64_t version = 0;
  std::vector<std::string> addresses;
};

inline constexpr char kNodesTable[] = "nodes";

// Told of every node that becomes ALIVE (registered) or DEAD (unregistered, or silent too
// long), after the change is stored and outside the manager's lock.
class NodeListener {
 public:
  virtual ~NodeListener() = default;
  virtual void OnNodeAlive(const v1::NodeInfo& node) = 0;
  virtual void OnNodeDead(const NodeId& node, const std::string& reason) = 0;
};

class NodeManager {
 public:
  NodeManager(store::Store& store, const Clock& clock, NodeManagerOptions options);

  // Loads the node table from the store (after a head restart). The listener is not told.
  absl::Status Recover();
  // REQUIRES: called before the manager is shared; `listener` outlives it.
  void SetListener(NodeListener* listener) { listener_ = listener; }
  // Validates `info` (resources, labels, GPU ids) and records the node ALIVE. `was_dead`
  // (optional) says whether the head had declared this node id DEAD (and has not heard a
  // heartbeat from it since it registered again).
  absl::StatusOr<NodeId> Register(v1::NodeInfo info, bool* was_dead = nullptr);
  // NotFound for an unknown or dead node. With `peers`, also the other ALIVE nodes'
  // addresses when their list changed since `known_peers_version`.
  absl::Status Heartbeat(const NodeId& id, uint64_t known_peers_version = 0, PeerList* peers = nullptr);
  absl::Status Unregister(const NodeId& id, absl::string_view reason);
  // Marks every ALIVE node whose last heartbeat is older than period x misses DEAD, tells
  // the listener, and returns those nodes.
  std::vector<NodeId> CheckLiveness();
  std::vector<v1::NodeInfo> List() const;
  // The node's row; nullopt when unknown (or not a node id).
  std::optional<v1::NodeInfo> Find(absl::string_view node_id) const;
  const NodeManagerOptions& options() const { return options_; }

 private:
  absl::Status Persist(const v1::NodeInfo& info) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<std::pair<NodeId, std::string>> CheckLivenessLocked() ABSL_LOCKS_EXCLUDED(mu_);

  store::Store& store_;
  const Clock& clock_;
  NodeListener* listener_ = nullptr;
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
  // Changes whenever the set of ALIVE nodes or an address does (PeerList::version).
  uint64_t peers_version_ ABSL_GUARDED_BY(mu_) = 1;
};

// Validates a node description from outside; errors name the field.
absl::Status ValidateNodeInfo(const v1::NodeInfo& info);

}  // namespace skyrl::head
