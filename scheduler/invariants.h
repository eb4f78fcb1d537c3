// The scheduler's invariant checker, used by tests after any sequence of operations
// (including head restarts): recomputes every node's and bundle's usage from what the
// tables record and checks that
//   1. every allocation is on a known node, and actors in a bundle are on the bundle's node
//      and on its devices;
//   2. no node gives out more than it has, per resource and per GPU device (fractions of
//      one device add up to at most 1); no bundle gives its actors more than it reserved;
//   3. when a Cluster is given, its own accounting equals the recorded allocations (usage
//      leaves out what actors blocked waiting lent out: Cluster::LendCpu), and its placement
//      index agrees with its nodes' free resources.
// Returns OK or Internal listing every violation.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "scheduler/cluster.h"

namespace skyrl::scheduler {

absl::Status CheckInvariants(const std::vector<NodeSpec>& nodes, const std::vector<Allocation>& recorded,
                             const Cluster* cluster = nullptr);

}  // namespace skyrl::scheduler
