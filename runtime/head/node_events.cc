#include "runtime/head/node_events.h"

#include "runtime/common/logging.h"

namespace skyrl::head {

void SchedulingNodeListener::OnNodeAlive(const v1::NodeInfo& node) {
  absl::Status s = resources_.With([&](scheduler::Cluster& c) { return c.AddNode(ToNodeSpec(node)); });
  if (!s.ok()) spdlog::error("node {}: the scheduler cannot take it: {}", node.node_id(), s.message());
  groups_.RetryPending();
}

void SchedulingNodeListener::OnNodeSilent(const NodeId& node) {
  scheduler::Cluster::Displaced displaced =
      resources_.With([&](scheduler::Cluster& c) { return c.RemoveNode(node.ToString()); });
  {
    absl::MutexLock lock(&mu_);
    silent_[node] = std::move(displaced);
  }
  // Actors that passed over it while its death was being announced may fit elsewhere.
  groups_.RetryPending();
}

void SchedulingNodeListener::OnNodeDead(const NodeId& node, const std::string& reason) {
  scheduler::Cluster::Displaced displaced =
      resources_.With([&](scheduler::Cluster& c) { return c.RemoveNode(node.ToString()); });
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

void AddAliveNodes(const NodeManager& nodes, ResourceTracker& resources) {
  for (const v1::NodeInfo& n : nodes.List()) {
    // Back from a death not yet confirmed: announced (OnNodeAlive) once it is.
    if (n.state() != v1::NODE_ALIVE || n.death_unconfirmed()) continue;
    absl::Status s = resources.With([&](scheduler::Cluster& c) { return c.AddNode(ToNodeSpec(n)); });
    if (!s.ok()) spdlog::error("node {}: the scheduler cannot take it: {}", n.node_id(), s.message());
  }
}

}  // namespace skyrl::head
