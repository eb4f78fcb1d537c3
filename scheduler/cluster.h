// The scheduler's picture of the cluster: alive nodes, the placement groups reserved on
// them, the actors placed on nodes or in bundles, and the decisions that change it.
//
// Pure: no RPC, no store, no clock. The head owns one Cluster, feeds it node and actor
// events, asks it where things go (Plan*), persists the answer, then commits it
// (Allocate*/Reserve*). Planning never changes anything, so a plan that cannot be persisted
// is simply dropped.
//
// Planning errors:
//   ResourceExhausted: the request cannot fit the current cluster even with every node idle
//                      ("infeasible": fail at once, or wait for nodes if the caller asked).
//   Unavailable:       it would fit if resources held by others were freed (stay pending).
// Both messages say which bundle, what it needs, and what the best node offers, e.g.
//   "pg trainer: bundle 3 needs GPU=8 accelerator=B200; best match node-.. has GPU=4 free of 8"
//
// Not synchronized: the owner serializes access (the head holds one mutex around it, which
// is what keeps concurrent creations from double-booking a GPU).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "scheduler/demand.h"
#include "scheduler/pool.h"

namespace skyrl::scheduler {

struct NodeSpec {
  std::string id;
  ResourceSet total;
  Labels labels;
  std::vector<int> gpu_ids;  // physical device ids; the GPU amount in `total` is their count
};

struct GroupRequest {
  std::string name;  // for messages; the group id when empty
  std::vector<Demand> bundles;
  Strategy strategy = Strategy::kPack;
  // When set, every bundle lands on nodes that share one value of this node label (one
  // NVLink domain, one rack).
  std::string domain_label;
  // Id of another group whose nodes this one prefers, so that weight sync between the two
  // (a trainer group and a generator group) stays inside nodes.
  std::string affinity_group;
};

// One recorded use of resources, for status and the invariant checker.
struct Allocation {
  std::string owner;  // actor id, or "<group id>#<bundle index>" for a bundle
  std::string node_id;
  ResourceSet resources;
  std::vector<int> gpu_ids;
  std::string group;  // an actor inside a bundle, or the bundle's own group
  int bundle = -1;
  ResourceSet lent;  // of `resources`, what an actor blocked waiting has lent out (LendCpu)
};

class Cluster {
 public:
  // ---- Nodes ----
  // Adds a node, or updates a known one (re-registration keeps what is placed on it). An
  // update whose totals cannot hold what is already placed there is FailedPrecondition.
  absl::Status AddNode(NodeSpec node);
  // What a node's removal displaced: actors placed on it (directly or in its bundles) and
  // bundles that were reserved on it (now unplaced: their groups need PlanGroup again).
  struct Displaced {
    std::vector<std::string> actors;
    std::vector<std::pair<std::string, int>> bundles;  // (group, index)
  };
  Displaced RemoveNode(const std::string& node_id);
  bool HasNode(const std::string& node_id) const { return nodes_.contains(node_id); }
  const NodeSpec* FindNode(const std::string& node_id) const;
  const Pool* NodePool(const std::string& node_id) const;
  std::vector<std::string> NodeIds() const;  // sorted

  // ---- Actors ----
  // Where an actor would go: on any node (group empty), in bundle `bundle` of `group`, or
  // in any bundle of it (bundle nullopt). On any node, the nodes are visited in the order of
  // an index by free resources (below), so a placement costs O(log n) plus one look per
  // node that cannot take it ahead of the one chosen, not a scan of every node. Nodes in
  // `avoid` are passed over (the head's: nodes its node table no longer holds alive).
  absl::StatusOr<Slot> PlanActor(const Demand& demand, const std::string& group = "",
                                 std::optional<int> bundle = std::nullopt,
                                 const absl::flat_hash_set<std::string>* avoid = nullptr) const;
  // Records an actor where PlanActor (or the store, after a head restart) says it is.
  // FailedPrecondition when it does not fit there; nothing changes then.
  absl::Status AllocateActor(const std::string& actor, const ResourceSet& need, const Slot& slot,
                             const std::string& group = "", int bundle = -1);
  // Frees an actor's resources; unknown actors are ignored.
  void ReleaseActor(const std::string& actor);
  bool HasActor(const std::string& actor) const { return actors_.contains(actor); }
  // Ray's blocked tasks: an actor blocked waiting (a task in get()) lends its CPU to others
  // (GPUs and the rest stay held) until ReclaimCpu, which takes it back when it is free; one
  // that is not stays lent (the actor runs on without it counted, as Ray oversubscribes) and
  // is taken back by a later ReclaimCpu. Unknown actors, and lending twice, are ignored.
  void LendCpu(const std::string& actor);
  // Whether the actor holds all of its CPU again.
  bool ReclaimCpu(const std::string& actor);

  // ---- Placement groups ----
  // Where the unplaced bundles of a group would go; `placed` (one entry per bundle, or
  // empty for a new group) holds the bundles that stay where they are. The result has a
  // slot for every bundle. All or nothing.
  absl::StatusOr<std::vector<Slot>> PlanGroup(const GroupRequest& request,
                                              const std::vector<std::optional<Slot>>& placed = {}) const;
  // Records a group with its bundles where `slots` says (nullopt: not placed, after a head
  // restart found its node gone). FailedPrecondition, with nothing changed, when a bundle
  // does not fit its slot or the group exists.
  absl::Status ReserveGroup(const std::string& group, const GroupRequest& request,
                            const std::vector<std::optional<Slot>>& slots);
  // Places bundles of a recorded group that had lost their node.
  absl::Status PlaceBundles(const std::string& group, const std::vector<Slot>& slots);
  // Frees a group's bundles and returns the actors that were inside (now released too).
  std::vector<std::string> RemoveGroup(const std::string& group);
  bool HasGroup(const std::string& group) const { return groups_.contains(group); }
  // One entry per bundle; nullopt for a bundle without a node. NotFound for an unknown group.
  absl::StatusOr<std::vector<std::optional<Slot>>> GroupSlots(const std::string& group) const;
  const GroupRequest* FindGroup(const std::string& group) const;

  // ---- Views ----
  std::vector<Allocation> Allocations() const;  // actors and bundles, sorted by owner
  ResourceSet TotalResources() const;
  ResourceSet FreeResources() const;  // free on nodes (bundles count as used)
  // A copy with the same nodes and nothing placed: asks "could this ever fit?".
  Cluster Idle() const;
  // Whether the placement index agrees with every node's pool (for the invariant checker).
  absl::Status CheckIndex() const;

 private:
  struct IndexKeys {
    int64_t gpu = 0, cpu = 0;
    int whole = 0;  // free whole GPUs, for its domains' totals
  };
  // The nodes sharing one value of one label (a placement group's domain, e.g. a rack), and
  // their free whole GPUs in all: groups with a domain_label visit domains in that order
  // without a walk over every node.
  struct Domain {
    std::set<std::string> nodes;  // by id
    int64_t free_whole = 0;
  };
  struct NodeEntry {
    NodeSpec spec;
    Pool pool;
    IndexKeys keys;  // where it is in the index, as last indexed
  };
  struct BundleEntry {
    Demand demand;
    std::optional<Slot> slot;
    Pool pool;  // what the bundle reserved; actors inside take from it
  };
  struct GroupEntry {
    GroupRequest request;
    std::vector<BundleEntry> bundles;
  };
  struct ActorEntry {
    ResourceSet need;
    Slot slot;
    std::string group;
    int bundle = -1;
    ResourceSet lent;  // the part of `need` lent out (LendCpu): not taken from its pool now
  };
  // The pool an actor takes from (its bundle's, or its node's); null when that is gone.
  Pool* PoolOf(const ActorEntry& a);
  // The placement index: alive nodes ordered as PlanActor prefers them. GPU requests go
  // where they fit most tightly: `by_gpu_` orders nodes by free GPU units, so the search
  // starts at the first node with enough. Other requests prefer nodes without GPUs, then
  // the most free CPU: `by_cpu_` orders by (has GPUs ? 2^50 : 0) - free CPU units. Ties go
  // by node id. Every change of a node's own pool re-indexes that node (Reindex).
  static IndexKeys KeysOf(const NodeEntry& n);
  void Index(NodeEntry& n);
  // Puts node `id` into (or takes it out of) the ordered indexes under `keys`.
  void OrderIndexes(const std::string& id, const IndexKeys& keys, bool in);
  void Unindex(const NodeEntry& n);
  void Reindex(const std::string& node_id);
  // The nodes of the smallest domain named by `selector` (every node matching it is there)
  // when that is at most 1/kFewMatching of the nodes, else null (the index walk is cheaper).
  // A selector naming a label value no node has: an empty set.
  const std::set<std::string>* FewMatching(const Labels& selector) const;
  static constexpr size_t kFewMatching = 8;
  friend class GroupPlanner;

  static Pool BundlePool(const ResourceSet& need, const std::vector<int>& gpu_ids);

  std::map<std::string, NodeEntry> nodes_;  // alive nodes, ordered by id
  std::set<std::pair<int64_t, std::string>> by_gpu_, by_cpu_;
  // Nodes as groups fill or spread over them: the most free whole GPUs, then the most free
  // GPU units, then by id (keys negated).
  std::set<std::tuple<int64_t, int64_t, std::string>> by_spread_;
  std::map<std::string, std::map<std::string, Domain>> domains_;  // label -> value -> nodes
  absl::flat_hash_map<std::string, GroupEntry> groups_;
  absl::flat_hash_map<std::string, ActorEntry> actors_;
};

// "node-3f.. has GPU=4 free of 8, CPU=..."; the resources of `need` that `pool` lacks, or
// all of them when none is short (a device-shape problem).
std::string DescribeShortfall(const Pool& pool, const ResourceSet& need);

}  // namespace skyrl::scheduler
