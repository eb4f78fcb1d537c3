#include "runtime/views/status_view.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/rpc/actor_state.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "runtime/common/resources.h"

namespace skyrl::views {
namespace {

ResourceSet Resources(const v1::NodeInfo& n) {
  absl::StatusOr<ResourceSet> r =
      ResourceSet::FromMap({n.resources_total().begin(), n.resources_total().end()});
  return r.ok() ? *r : ResourceSet();
}

std::string Labels(const v1::NodeInfo& n) {
  std::map<std::string, std::string> sorted(n.labels().begin(), n.labels().end());
  return sorted.empty() ? "-" : absl::StrJoin(sorted, ",", absl::PairFormatter("="));
}

std::string Ago(int64_t unix_ms, absl::Time now) {
  absl::Duration d = now - absl::FromUnixMillis(unix_ms);
  return absl::StrFormat("%.1fs ago", std::max(0.0, absl::ToDoubleSeconds(d)));
}

// What each node's placed bundles and its PENDING and ALIVE actors outside placement groups hold.
std::map<std::string, ResourceSet> UsedByNode(const std::vector<v1::ActorInfo>& actors,
                                              const std::vector<v1::PlacementGroupInfo>& groups) {
  std::map<std::string, ResourceSet> used;
  for (const auto& a : actors) {
    if (a.state() != v1::ACTOR_ALIVE && a.state() != v1::ACTOR_PENDING) continue;
    if (!a.spec().placement_group_id().empty()) continue;  // counted with its bundle
    absl::StatusOr<ResourceSet> r =
        ResourceSet::FromMap({a.spec().resources().begin(), a.spec().resources().end()});
    if (r.ok()) used[a.node_id()] += *r;
  }
  for (const auto& g : groups) {
    if (g.state() == v1::PG_REMOVED || g.state() == v1::PG_PENDING) continue;
    for (int i = 0; i < g.bundles_size() && i < g.spec().bundles_size(); ++i) {
      if (g.bundles(i).node_id().empty()) continue;
      const auto& res = g.spec().bundles(i).resources();
      absl::StatusOr<ResourceSet> r = ResourceSet::FromMap({res.begin(), res.end()});
      if (r.ok()) used[g.bundles(i).node_id()] += *r;
    }
  }
  return used;
}

}  // namespace

namespace {
std::string Table(const std::vector<std::vector<std::string>>& rows);
}  // namespace

std::string RenderNodesTable(const std::vector<v1::NodeInfo>& nodes, absl::Time now,
                             const std::vector<v1::ActorInfo>& actors,
                             const std::vector<v1::PlacementGroupInfo>& groups) {
  const std::map<std::string, ResourceSet> used = UsedByNode(actors, groups);
  std::vector<std::vector<std::string>> rows = {
      {"NODE", "STATE", "HOST", "RESOURCES", "USED", "GPU IDS", "LABELS", "HEARTBEAT"}};
  for (const auto& n : nodes) {
    bool alive = n.state() == v1::NODE_ALIVE;
    auto u = used.find(n.node_id());
    rows.push_back({n.node_id(), alive ? "ALIVE" : "DEAD", n.hostname(), Resources(n).ToHumanString(),
                    u == used.end() || u->second.empty() ? "-" : u->second.ToHumanString(),
                    n.gpu_ids().empty() ? "-" : absl::StrJoin(n.gpu_ids(), ","), Labels(n),
                    alive ? Ago(n.last_heartbeat_unix_ms(), now) : n.death_reason()});
  }
  return Table(rows);
}

namespace {

std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  std::string out;
  for (const auto& r : rows) {
    std::string line = " ";
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

}  // namespace

std::string RenderActorsTable(const std::vector<v1::ActorInfo>& actors) {
  std::vector<std::vector<std::string>> rows = {
      {"ACTOR", "CLASS", "NAME", "STATE", "NODE", "ADDRESS", "GPU IDS", "RESTARTS"}};
  for (const auto& a : actors)
    rows.push_back({a.actor_id(), a.spec().class_name(),
                    a.spec().name().empty() ? "-" : a.spec().namespace_() + "/" + a.spec().name(),
                    rpc::ActorStateName(a.state()), a.node_id().empty() ? "-" : a.node_id(),
                    a.address().empty() ? "-" : a.address(),
                    a.gpu_ids().empty() ? "-" : absl::StrJoin(a.gpu_ids(), ","), absl::StrCat(a.restarts())});
  return Table(rows);
}

std::string RenderActorsJson(const std::vector<v1::ActorInfo>& actors) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& a : actors) {
    nlohmann::json j;
    j["actor_id"] = a.actor_id();
    j["class"] = a.spec().class_name();
    j["name"] = a.spec().name();
    j["namespace"] = a.spec().namespace_();
    j["state"] = rpc::ActorStateName(a.state());
    j["node_id"] = a.node_id();
    j["address"] = a.address();
    j["gpu_ids"] = std::vector<int>(a.gpu_ids().begin(), a.gpu_ids().end());
    j["restarts"] = a.restarts();
    j["incarnation"] = a.incarnation();  // starts issued: the number exit reports and kills carry
    j["death_reason"] = a.death_reason();
    j["pending_reason"] = a.pending_reason();
    arr.push_back(std::move(j));
  }
  return arr.dump(2) + "\n";
}

namespace {

std::string GroupName(const v1::PlacementGroupInfo& g) {
  return g.spec().name().empty() ? "-" : g.spec().namespace_() + "/" + g.spec().name();
}

std::string StateName(v1::PlacementGroupState s) {
  std::string n = v1::PlacementGroupState_Name(s);
  return n.rfind("PG_", 0) == 0 ? n.substr(3) : n;
}

// "node-ab..:0,1 node-cd..:2" for the bundles in order, "-" for an unplaced one.
std::string Placements(const v1::PlacementGroupInfo& g) {
  std::vector<std::string> parts;
  for (const auto& b : g.bundles())
    parts.push_back(b.node_id().empty()
                        ? "-"
                        : absl::StrCat(b.node_id().substr(0, 11), ":",
                                       b.gpu_ids().empty() ? "no-gpu" : absl::StrJoin(b.gpu_ids(), ",")));
  return absl::StrJoin(parts, " ");
}

}  // namespace

std::string RenderGroupsTable(const std::vector<v1::PlacementGroupInfo>& groups) {
  std::vector<std::vector<std::string>> rows = {
      {"GROUP", "NAME", "STATE", "STRATEGY", "BUNDLES", "PLACEMENT (node:gpus per bundle)"}};
  for (const auto& g : groups)
    rows.push_back({g.placement_group_id(), GroupName(g), StateName(g.state()),
                    v1::PlacementStrategy_Name(g.spec().strategy()), absl::StrCat(g.spec().bundles_size()),
                    Placements(g)});
  return Table(rows);
}

std::string RenderGroupsJson(const std::vector<v1::PlacementGroupInfo>& groups) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& g : groups) {
    nlohmann::json j;
    j["placement_group_id"] = g.placement_group_id();
    j["name"] = g.spec().name();
    j["namespace"] = g.spec().namespace_();
    j["state"] = StateName(g.state());
    j["strategy"] = v1::PlacementStrategy_Name(g.spec().strategy());
    j["pending_reason"] = g.pending_reason();
    nlohmann::json bundles = nlohmann::json::array();
    for (int i = 0; i < g.spec().bundles_size(); ++i) {
      nlohmann::json b;
      b["resources"] = std::map<std::string, double>(g.spec().bundles(i).resources().begin(),
                                                     g.spec().bundles(i).resources().end());
      b["node_id"] = i < g.bundles_size() ? g.bundles(i).node_id() : "";
      b["gpu_ids"] = i < g.bundles_size()
                         ? std::vector<int>(g.bundles(i).gpu_ids().begin(), g.bundles(i).gpu_ids().end())
                         : std::vector<int>{};
      bundles.push_back(std::move(b));
    }
    j["bundles"] = std::move(bundles);
    arr.push_back(std::move(j));
  }
  return arr.dump(2) + "\n";
}

std::string RenderStatus(const std::string& head, const std::vector<v1::NodeInfo>& nodes,
                         const std::vector<v1::ActorInfo>& actors,
                         const std::vector<v1::PlacementGroupInfo>& groups, absl::Time now) {
  int alive = 0, dead = 0;
  ResourceSet total;
  for (const auto& n : nodes) {
    if (n.state() == v1::NODE_ALIVE) {
      ++alive;
      total += Resources(n);
    } else {
      ++dead;
    }
  }
  std::string out = absl::StrCat("======== SkyRL cluster status (head ", head, ") ========\n");
  absl::StrAppend(&out, "Nodes: ", alive, " alive, ", dead, " dead\n");
  if (!nodes.empty()) absl::StrAppend(&out, RenderNodesTable(nodes, now, actors, groups));
  absl::StrAppend(&out, "Resources (alive nodes): ", total.empty() ? "none" : total.ToHumanString(), "\n");
  std::map<std::string, int> by_state;
  for (const auto& a : actors) by_state[rpc::ActorStateName(a.state())]++;
  absl::StrAppend(&out, "Actors: ", actors.size(),
                  by_state.empty()
                      ? ""
                      : absl::StrCat(" (", absl::StrJoin(by_state, ", ", absl::PairFormatter(" ")), ")"),
                  "\n");
  std::vector<v1::PlacementGroupInfo> live;
  for (const auto& g : groups)
    if (g.state() != v1::PG_REMOVED) live.push_back(g);
  if (!live.empty()) {
    absl::StrAppend(&out, "Placement groups: ", live.size(), "\n", RenderGroupsTable(live));
  }
  std::vector<std::string> pending;
  for (const auto& g : live)
    if (g.state() == v1::PG_PENDING || g.state() == v1::PG_RESCHEDULING)
      pending.push_back(
          absl::StrCat(" ", g.placement_group_id(), " (", StateName(g.state()), "): ", g.pending_reason()));
  for (const auto& a : actors)
    if ((a.state() == v1::ACTOR_RESTARTING || a.state() == v1::ACTOR_PENDING) && !a.pending_reason().empty())
      pending.push_back(absl::StrCat(" ", a.actor_id(), " (", a.spec().class_name(), ", ",
                                     rpc::ActorStateName(a.state()),
                                     "): waits for room: ", a.pending_reason()));
  absl::StrAppend(
      &out, "Pending demands: ",
      pending.empty() ? "none\n" : absl::StrCat(pending.size(), "\n", absl::StrJoin(pending, "\n"), "\n"));
  std::vector<std::string> failures;
  for (const auto& n : nodes)
    if (n.state() == v1::NODE_DEAD)
      failures.push_back(absl::StrCat(" ", n.node_id(), ": ", n.death_reason()));
  for (const auto& a : actors)
    if (!a.death_reason().empty())
      failures.push_back(absl::StrCat(" ", a.actor_id(), " (", a.spec().class_name(), ", ",
                                      rpc::ActorStateName(a.state()), "): ", a.death_reason()));
  if (!failures.empty()) absl::StrAppend(&out, "Recent failures:\n", absl::StrJoin(failures, "\n"), "\n");
  return out;
}

std::string RenderNodesJson(const std::vector<v1::NodeInfo>& nodes, const std::vector<v1::ActorInfo>& actors,
                            const std::vector<v1::PlacementGroupInfo>& groups) {
  const std::map<std::string, ResourceSet> used = UsedByNode(actors, groups);
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& n : nodes) {
    nlohmann::json j;
    j["node_id"] = n.node_id();
    j["state"] = n.state() == v1::NODE_ALIVE ? "ALIVE" : "DEAD";
    j["hostname"] = n.hostname();
    j["address"] = n.address();
    j["resources"] = Resources(n).ToMap();
    j["resources_text"] = Resources(n).ToString();
    auto u = used.find(n.node_id());
    j["used"] = u == used.end() ? std::map<std::string, double>{} : u->second.ToMap();
    j["gpu_ids"] = std::vector<int>(n.gpu_ids().begin(), n.gpu_ids().end());
    j["labels"] = std::map<std::string, std::string>(n.labels().begin(), n.labels().end());
    j["last_heartbeat_unix_ms"] = n.last_heartbeat_unix_ms();
    j["death_reason"] = n.death_reason();
    arr.push_back(std::move(j));
  }
  return arr.dump(2) + "\n";
}

std::string JobStateName(v1::JobState s) {
  std::string n = v1::JobState_Name(s);
  return n.rfind("JOB_", 0) == 0 ? n.substr(4) : n;
}

nlohmann::json JobJson(const v1::JobInfo& j) {
  nlohmann::json o;
  o["job_id"] = j.job_id();
  o["state"] = JobStateName(j.state());
  o["entrypoint"] = std::vector<std::string>(j.spec().entrypoint().begin(), j.spec().entrypoint().end());
  o["exit_code"] = j.exit_code();
  o["signal"] = j.signal();
  o["message"] = j.message();
  o["submitted_unix_ms"] = j.submitted_unix_ms();
  o["started_unix_ms"] = j.started_unix_ms();
  o["ended_unix_ms"] = j.ended_unix_ms();
  o["log_path"] = j.log_path();
  o["submitter"] = j.spec().submitter();
  return o;
}

std::string RenderJobJson(const v1::JobInfo& job) { return JobJson(job).dump(2) + "\n"; }

std::string RenderJobsJson(const std::vector<v1::JobInfo>& jobs) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& j : jobs) arr.push_back(JobJson(j));
  return arr.dump(2) + "\n";
}

}  // namespace skyrl::views
