#include "catalog/placement.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace skyrl::catalog {
namespace {

constexpr double kGB = 1e9;

// "0-7", or "3" for one value.
std::string Range(int lo, int hi) { return lo == hi ? absl::StrCat(lo) : absl::StrCat(lo, "-", hi); }

// A run of bundles [first, last] on nodes [node_lo, node_hi], each node holding devices
// [gpu_lo, gpu_hi] in bundle order. `contiguous` false: one bundle whose devices are not a
// plain range (shown as a list).
struct Run {
  int first = 0, last = 0;
  int node_lo = 0, node_hi = 0;
  int gpu_lo = 0, gpu_hi = -1;  // gpu_hi < gpu_lo: no device
  bool contiguous = true;
  std::vector<int> ids;  // when !contiguous
};

bool IsRange(const std::vector<int>& ids) {
  for (size_t i = 1; i < ids.size(); ++i)
    if (ids[i] != ids[i - 1] + 1) return false;
  return true;
}

}  // namespace

absl::StatusOr<scheduler::GroupRequest> ToGroupRequest(const PlacementGroupSpec& spec) {
  scheduler::GroupRequest r;
  r.name = spec.name;
  absl::StatusOr<scheduler::Strategy> strategy = scheduler::ParseStrategy(spec.strategy);
  if (!strategy.ok())
    return absl::InvalidArgumentError(
        absl::StrCat("placement group ", spec.name, ": ", strategy.status().message()));
  r.strategy = *strategy;
  r.domain_label = spec.domain_label;
  r.affinity_group = spec.affinity_group;
  for (size_t i = 0; i < spec.bundles.size(); ++i) {
    const BundleSpec& b = spec.bundles[i];
    scheduler::Demand d;
    for (auto [name, value] : {std::pair<absl::string_view, double>{kGPU, b.gpu}, {kCPU, b.cpu}}) {
      if (value == 0) continue;
      if (absl::Status s = d.resources.Set(name, value); !s.ok())
        return absl::InvalidArgumentError(
            absl::StrCat("placement group ", spec.name, ": bundles[", i, "].", name, ": ", s.message()));
    }
    d.selector = scheduler::Labels(b.selector.begin(), b.selector.end());
    if (absl::Status s = scheduler::ValidateDemand(absl::StrCat("bundles[", i, "]"), d); !s.ok())
      return absl::InvalidArgumentError(absl::StrCat("placement group ", spec.name, ": ", s.message()));
    r.bundles.push_back(std::move(d));
  }
  return r;
}

std::vector<scheduler::NodeSpec> SimulatedNodes(const Cluster& cluster) {
  const int nodes = cluster.shape.nodes, gpn = cluster.shape.gpus_per_node;
  const int width = std::max<int>(2, absl::StrCat(std::max(0, nodes - 1)).size());
  std::vector<scheduler::NodeSpec> out;
  out.reserve(nodes);
  for (int n = 0; n < nodes; ++n) {
    scheduler::NodeSpec s;
    s.id = absl::StrFormat("node-%0*d", width, n);
    // Values that ResourceSet always accepts (finite, non-negative); a failed Set would only
    // leave the resource out, which the placement then reports.
    (void)s.total.Set(kGPU, gpn);
    (void)s.total.Set(kCPU, cluster.cpus_per_node > 0 ? cluster.cpus_per_node : gpn);
    if (cluster.host_memory_gb > 0) (void)s.total.Set(kMemory, std::floor(cluster.host_memory_gb * kGB));
    for (int g = 0; g < gpn; ++g) s.gpu_ids.push_back(g);
    s.labels[std::string(kAcceleratorLabel)] = cluster.gpu.name;
    s.labels[std::string(kNvlinkDomainLabel)] = s.id;
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<std::vector<GroupPlacement>> PlaceGroups(const Cluster& cluster,
                                                        const std::vector<PlacementGroupSpec>& groups) {
  scheduler::Cluster sim;
  std::map<std::string, int> index;
  for (scheduler::NodeSpec& n : SimulatedNodes(cluster)) {
    index[n.id] = static_cast<int>(index.size());
    if (absl::Status s = sim.AddNode(std::move(n)); !s.ok())
      return absl::InternalError(
          absl::StrCat("simulated cluster ", cluster.shape.ToString(), ": ", s.message()));
  }
  std::vector<GroupPlacement> out;
  for (const PlacementGroupSpec& g : groups) {
    auto bug = [&](const absl::Status& s) {
      return absl::InternalError(
          absl::StrCat("internal consistency: the scheduler would refuse placement group ", g.name, " (",
                       g.strategy, ", ", g.bundles.size(), " bundles) on ", cluster.shape.Describe(), ": ",
                       s.message(), " (a planner bug)"));
    };
    absl::StatusOr<scheduler::GroupRequest> req = ToGroupRequest(g);
    if (!req.ok()) return bug(req.status());
    absl::StatusOr<std::vector<scheduler::Slot>> slots = sim.PlanGroup(*req);
    if (!slots.ok()) return bug(slots.status());
    if (absl::Status s = sim.ReserveGroup(g.name, *req, {slots->begin(), slots->end()}); !s.ok())
      return bug(s);
    GroupPlacement placed{g.name, {}};
    for (const scheduler::Slot& slot : *slots)
      placed.bundles.push_back(BundlePlacement{index.at(slot.node_id), slot.node_id, slot.gpu_ids});
    out.push_back(std::move(placed));
  }
  return out;
}

std::vector<std::string> PlacementMismatches(const std::vector<PlacementGroupSpec>& groups,
                                             const std::vector<GroupPlacement>& placed) {
  std::vector<std::string> out;
  for (size_t g = 0; g < groups.size() && g < placed.size(); ++g) {
    GroupPlacement expected{groups[g].name, {}};
    for (const BundleSpec& b : groups[g].bundles)
      expected.bundles.push_back(BundlePlacement{b.node, "", {b.gpu_id}});
    bool same = expected.bundles.size() == placed[g].bundles.size();
    for (size_t i = 0; same && i < expected.bundles.size(); ++i)
      same = expected.bundles[i].node == placed[g].bundles[i].node &&
             expected.bundles[i].gpu_ids == placed[g].bundles[i].gpu_ids;
    if (!same)
      out.push_back(absl::StrCat(groups[g].name, ": ", DescribePlacement(placed[g]), "; expected ",
                                 DescribePlacement(expected)));
  }
  return out;
}

std::string DescribePlacement(const GroupPlacement& placement) {
  // Runs on one node first, then runs of those on consecutive nodes with the same devices.
  std::vector<Run> runs;
  for (int i = 0; i < static_cast<int>(placement.bundles.size()); ++i) {
    const BundlePlacement& b = placement.bundles[i];
    const bool range = IsRange(b.gpu_ids);
    const int lo = b.gpu_ids.empty() ? 0 : b.gpu_ids.front();
    const int hi = b.gpu_ids.empty() ? -1 : b.gpu_ids.back();
    if (!runs.empty()) {
      Run& r = runs.back();
      const bool any = hi >= lo, r_any = r.gpu_hi >= r.gpu_lo;
      if (r.contiguous && range && r.node_lo == b.node && r.node_hi == b.node && any && r_any &&
          lo == r.gpu_hi + 1) {
        r.last = i;
        r.gpu_hi = hi;
        continue;
      }
    }
    Run r{i, i, b.node, b.node, lo, hi, range, range ? std::vector<int>{} : b.gpu_ids};
    runs.push_back(std::move(r));
  }
  std::vector<Run> merged;
  for (Run& r : runs) {
    if (!merged.empty()) {
      Run& m = merged.back();
      if (m.contiguous && r.contiguous && m.gpu_lo == r.gpu_lo && m.gpu_hi == r.gpu_hi &&
          r.node_lo == m.node_hi + 1 && r.first == m.last + 1 && m.gpu_hi >= m.gpu_lo) {
        m.last = r.last;
        m.node_hi = r.node_hi;
        continue;
      }
    }
    merged.push_back(std::move(r));
  }
  std::vector<std::string> parts;
  for (const Run& r : merged) {
    std::string bundles = absl::StrCat(r.first == r.last ? "bundle " : "bundles ", Range(r.first, r.last));
    std::string gpus;
    if (!r.contiguous)
      gpus = absl::StrCat("GPUs ", absl::StrJoin(r.ids, ","));
    else if (r.gpu_hi < r.gpu_lo)
      gpus = "no GPU";
    else
      gpus = absl::StrCat(r.gpu_lo == r.gpu_hi ? "GPU " : "GPUs ", Range(r.gpu_lo, r.gpu_hi));
    std::string nodes = r.node_lo == r.node_hi ? absl::StrCat("node ", r.node_lo, " ")
                                               : absl::StrCat("nodes ", Range(r.node_lo, r.node_hi), " x ");
    parts.push_back(absl::StrCat(bundles, " -> ", nodes, gpus));
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace skyrl::catalog
