// A plan's placement groups, and the check that the real scheduler places them.
//
// The planner describes its groups as plain data (PlacementGroupSpec). Before a plan is
// printed, PlaceGroups converts every spec into a scheduler::GroupRequest and places it with
// scheduler::Cluster (the placement core the head runs) on a simulated cluster of the plan's
// nodes, labelled as workers label them, in the order the job creates the groups. So the
// bundle -> (node, GPU ids) the plan prints is the scheduler's decision, not the planner's
// guess, and a group the scheduler would refuse is a planner bug caught before anyone
// launches the job.
//
// Pure functions over values: thread-safe.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "catalog/hardware.h"
#include "scheduler/cluster.h"

namespace skyrl::catalog {

// Node labels, as `skyrl-worker --labels accelerator=H100,nvlink-domain=rack3` sets them
// (docs/operations.md): the GPU type, and the NVLink domain a node's GPUs belong to.
inline constexpr absl::string_view kAcceleratorLabel = "accelerator";
inline constexpr absl::string_view kNvlinkDomainLabel = "nvlink-domain";

// Placement-group bundle specs as plain data, in the scheduler's terms (scheduler::GroupRequest:
// bundles with resources and a label selector, a strategy, a domain label, an affinity group).
struct BundleSpec {
  double gpu = 0;
  double cpu = 0;
  std::map<std::string, std::string> selector;  // node labels the bundle requires
  // Where the plan's cost model (weight-sync ranks, receivers after the trainer) expects the
  // bundle: node index and device id. The scheduler decides; PlaceGroups compares.
  int node = 0;
  int gpu_id = 0;
};

struct PlacementGroupSpec {
  std::string name;
  std::string strategy;        // PACK | STRICT_PACK | SPREAD | STRICT_SPREAD
  std::string domain_label;    // every bundle on nodes sharing this label's value, or empty
  std::string affinity_group;  // prefer the nodes of this group (weight sync stays local)
  std::vector<BundleSpec> bundles;
};

// Where the scheduler put one bundle.
struct BundlePlacement {
  int node = 0;              // index in the plan's cluster (0 .. nodes-1)
  std::string node_id;       // the simulated node's id ("node-00")
  std::vector<int> gpu_ids;  // device ids on that node, ascending
  friend bool operator==(const BundlePlacement&, const BundlePlacement&) = default;
};

// Where the scheduler put one group's bundles, in bundle order.
struct GroupPlacement {
  std::string group;
  std::vector<BundlePlacement> bundles;
};

// The scheduler's request for `spec`. InvalidArgument naming the group and the field when the
// strategy is unknown or a bundle asks for what the scheduler refuses (scheduler::ValidateDemand).
absl::StatusOr<scheduler::GroupRequest> ToGroupRequest(const PlacementGroupSpec& spec);

// The plan's nodes as workers would register them: ids "node-00", "node-01", ... (zero-padded
// so that the scheduler's id order is the index order), GPU ids 0..G-1, CPU = cpus_per_node
// (unknown: one per GPU, what the bundles then ask), memory = the node's host memory
// (Cluster::host_memory_gb, from the cluster file or hardware.yaml), labels
// accelerator=<type> and nvlink-domain=<node id>: NVLink stops at the node on the HGX/DGX
// systems of hardware.yaml, which is also what the planner assumes (TP within a node).
std::vector<scheduler::NodeSpec> SimulatedNodes(const Cluster& cluster);

// Places every group, in order, on SimulatedNodes(cluster) with scheduler::Cluster: plans it
// (PlanGroup), then reserves it (ReserveGroup, under the spec's name) so that later groups see
// it taken and may name it as their affinity group. Internal, naming the group and quoting the
// scheduler, when the scheduler refuses a group (the planner made a group that cannot be
// placed: a bug, never a property of the input).
absl::StatusOr<std::vector<GroupPlacement>> PlaceGroups(const Cluster& cluster,
                                                        const std::vector<PlacementGroupSpec>& groups);

// One line per group whose placement differs from what its spec expected (BundleSpec::node
// and gpu_id; one whole device each), e.g. "generator-0: bundles 0-3 -> node 3 GPUs 0-3;
// expected bundles 0-3 -> node 2 GPUs 4-7"; empty when they agree.
// REQUIRES: `placed` came from PlaceGroups(_, groups).
std::vector<std::string> PlacementMismatches(const std::vector<PlacementGroupSpec>& groups,
                                             const std::vector<GroupPlacement>& placed);

// Compact text: runs of bundles on one node with consecutive devices, and runs of such runs
// on consecutive nodes with the same devices ("x": every node of the range), e.g.
//   "bundles 0-15 -> nodes 0-1 x GPUs 0-7, bundles 16-19 -> node 2 GPUs 0-3".
std::string DescribePlacement(const GroupPlacement& placement);

}  // namespace skyrl::catalog
