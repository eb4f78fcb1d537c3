// What the head does when a node joins or dies: the scheduler's picture follows the node
// table, displaced actors restart elsewhere, and lost bundles are placed again.
#pragma once

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "runtime/head/actor_manager.h"
#include "runtime/head/node_manager.h"
#include "runtime/head/placement_group_manager.h"
#include "runtime/head/resource_tracker.h"

namespace skyrl::head {

class SchedulingNodeListener final : public NodeListener {
 public:
  SchedulingNodeListener(ResourceTracker& resources, ActorManager& actors, PlacementGroupManager& groups)
      : resources_(resources), actors_(actors), groups_(groups) {}
  void OnNodeAlive(const v1::NodeInfo& node) override;
  void OnNodeDead(const NodeId& node, const std::string& reason) override;
  void OnNodeSilent(const NodeId& node) override;

 private:
  ResourceTracker& resources_;
  ActorManager& actors_;
  PlacementGroupManager& groups_;
  // Taken off the scheduler when silent (nothing new goes there), handled once confirmed.
  absl::Mutex mu_;
  absl::flat_hash_map<NodeId, scheduler::Cluster::Displaced> silent_ ABSL_GUARDED_BY(mu_);
};

// After a head restart: gives the tracker every ALIVE node of the recovered table.
void AddAliveNodes(const NodeManager& nodes, ResourceTracker& resources);

}  // namespace skyrl::head
