#include "runtime/head/head_metrics.h"

#include <map>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "runtime/head/head.h"

namespace skyrl::head {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using Labels = std::vector<ClientMetric::Label>;

// "NODE_ALIVE" -> "alive", "PG_CREATED" -> "created": the enum name after its prefix.
std::string StateName(const std::string& enum_name, const std::string& prefix) {
  return absl::AsciiStrToLower(enum_name.substr(prefix.size()));
}

MetricFamily Gauges(std::string name, std::string help, const std::map<Labels, double>& values) {
  MetricFamily f{std::move(name), std::move(help), prometheus::MetricType::Gauge, {}};
  for (const auto& [labels, value] : values) {
    ClientMetric m;
    m.label = labels;
    m.gauge.value = value;
    f.metric.push_back(std::move(m));
  }
  return f;
}

// Every state from `first` to `last` (named by `name`), each at 0, keyed by its label.
template <typename NameFn>
std::map<Labels, double> AllStates(int first, int last, NameFn name, const std::string& prefix) {
  std::map<Labels, double> out;
  for (int s = first; s <= last; ++s) out[{{"state", StateName(name(s), prefix)}}] = 0;
  return out;
}

}  // namespace

std::vector<MetricFamily> HeadMetrics::Collect() const {
  std::vector<MetricFamily> out;

  auto nodes = AllStates(
      v1::NODE_ALIVE, v1::NODE_DEAD, [](int s) { return v1::NodeState_Name(static_cast<v1::NodeState>(s)); },
      "NODE_");
  std::map<Labels, double> resources;
  const std::vector<v1::NodeInfo> listed = head_.nodes().List();
  for (const v1::NodeInfo& n : listed)
    nodes[{{"state", StateName(v1::NodeState_Name(n.state()), "NODE_")}}] += 1;
  // Used = total - free, free as the scheduler books it (what `skyrl status` shows).
  head_.resources().With([&](const scheduler::Cluster& cluster) {
    for (const v1::NodeInfo& n : listed) {
      const scheduler::Pool* pool = n.state() == v1::NODE_ALIVE ? cluster.NodePool(n.node_id()) : nullptr;
      if (pool == nullptr) continue;
      const std::map<std::string, double> free = pool->free().ToMap();
      for (const auto& [kind, total] : n.resources_total()) {
        const auto f = free.find(kind);
        resources[{{"kind", "total"}, {"node", n.node_id()}, {"resource", kind}}] = total;
        resources[{{"kind", "used"}, {"node", n.node_id()}, {"resource", kind}}] =
            total - (f == free.end() ? 0.0 : f->second);
      }
    }
  });
  out.push_back(Gauges("skyrl_nodes", "Nodes the head knows, by state", nodes));
  out.push_back(Gauges(
      "skyrl_node_resources",
      "Resources of each alive node: total, and used by actors and bundles (memory in bytes)", resources));

  auto actors = AllStates(
      v1::ACTOR_PENDING, v1::ACTOR_DEAD,
      [](int s) { return v1::ActorState_Name(static_cast<v1::ActorState>(s)); }, "ACTOR_");
  std::map<Labels, double> by_class;
  for (const v1::ActorInfo& a : head_.actors().List()) {
    const std::string state = StateName(v1::ActorState_Name(a.state()), "ACTOR_");
    actors[{{"state", state}}] += 1;
    by_class[{{"class", a.spec().class_name()}, {"state", state}}] += 1;
  }
  out.push_back(Gauges("skyrl_actors", "Actors by state", actors));
  out.push_back(Gauges("skyrl_actors_by_class", "Actors by class and state", by_class));

  auto groups = AllStates(
      v1::PG_PENDING, v1::PG_REMOVED,
      [](int s) { return v1::PlacementGroupState_Name(static_cast<v1::PlacementGroupState>(s)); }, "PG_");
  for (const v1::PlacementGroupInfo& g : head_.groups().List())
    groups[{{"state", StateName(v1::PlacementGroupState_Name(g.state()), "PG_")}}] += 1;
  out.push_back(Gauges("skyrl_placement_groups", "Placement groups by state", groups));

  auto jobs = AllStates(
      v1::JOB_PENDING, v1::JOB_STOPPED, [](int s) { return v1::JobState_Name(static_cast<v1::JobState>(s)); },
      "JOB_");
  for (const v1::JobInfo& j : head_.jobs().List())
    jobs[{{"state", StateName(v1::JobState_Name(j.state()), "JOB_")}}] += 1;
  out.push_back(Gauges("skyrl_jobs", "Jobs by state", jobs));
  return out;
}

}  // namespace skyrl::head
