#include "runtime/head/node_events.h"

namespace skyrl::head {

void SchedulingNodeListener::OnNodeAlive(const v1::NodeInfo& node) {
  if (absl::StatusOr<NodeId> id = NodeId::Parse(node.node_id()); id.ok()) actors_.OnNodeAlive(*id);
  // It is in the scheduler's view already (the node table put it there).
  groups_.RetryPending();
}

void SchedulingNodeListener::OnNodeSilent(const NodeId& node, Displaced displaced) {
  {
    absl::MutexLock lock(&mu_);
    silent_[node] = std::move(displaced);
  }
  // Actors that passed over it while its death was being announced may fit elsewhere.
  groups_.RetryPending();
}

void SchedulingNodeListener::OnNodeDead(const NodeId& node, const std::string& reason, Displaced displaced) {
  {
    absl::MutexLock lock(&mu_);
    if (auto it = silent_.find(node); it != silent_.end()) {
      for (auto& b : it->second.bundles) displaced.bundles.push_back(std::move(b));
      silent_.erase(it);
    }
  }
  actors_.OnNodeDead(node, reason);
  groups_.OnBundlesLost(displaced.bundles, reason);
}

}  // namespace skyrl::head
