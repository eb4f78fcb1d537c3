// What the head does when a node joins or dies, once the node table (and with it the
// scheduler's view) has changed: displaced actors restart elsewhere, lost bundles are placed
// again, and waiting groups are tried on a node that joined.
#pragma once

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "runtime/head/actor_manager.h"
#include "runtime/head/node_manager.h"
#include "runtime/head/placement_group_manager.h"

namespace skyrl::head {

class SchedulingNodeListener final : public NodeListener {
 public:
  SchedulingNodeListener(ActorManager& actors, PlacementGroupManager& groups)
      : actors_(actors), groups_(groups) {}
  void OnNodeAlive(const v1::NodeInfo& node) override;
  void OnNodeDead(const NodeId& node, const std::string& reason, Displaced displaced) override;
  void OnNodeSilent(const NodeId& node, Displaced displaced) override;

 private:
  ActorManager& actors_;
  PlacementGroupManager& groups_;
  // What left the scheduler's view with a silent node, handled once its death is confirmed.
  absl::Mutex mu_;
  absl::flat_hash_map<NodeId, scheduler::Cluster::Displaced> silent_ ABSL_GUARDED_BY(mu_);
};

}  // namespace skyrl::head
