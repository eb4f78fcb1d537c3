#include "scheduler/invariants.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace skyrl::scheduler {
namespace {

struct Usage {
  ResourceSet total;
  ResourceSet used;
  std::map<int, int64_t> cap;
  std::map<int, int64_t> gpu_used;
};

void Add(Usage& u, const Allocation& a, std::vector<std::string>& bad, const std::string& where) {
  u.used += a.resources;
  if (u.used.Contains(a.lent)) u.used -= a.lent;  // lent out by an actor blocked waiting
  GpuShape shape = ShapeOf(a.resources);
  if (int(a.gpu_ids.size()) != shape.devices)
    bad.push_back(absl::StrCat(a.owner, ": ", a.gpu_ids.size(), " GPU ids for GPU=", a.resources.Get(kGPU)));
  for (int id : a.gpu_ids) {
    if (!u.cap.contains(id)) bad.push_back(absl::StrCat(a.owner, ": GPU ", id, " is not in ", where));
    u.gpu_used[id] += shape.units_each;
  }
}

void Check(const Usage& u, const std::string& where, std::vector<std::string>& bad) {
  if (!u.total.Contains(u.used))
    bad.push_back(absl::StrCat(where, ": uses ", u.used.ToHumanString(), " of ", u.total.ToHumanString()));
  for (const auto& [id, used] : u.gpu_used) {
    auto it = u.cap.find(id);
    if (it != u.cap.end() && used > it->second)
      bad.push_back(absl::StrCat(where, ": GPU ", id, " booked ", double(used) / ResourceSet::kUnitsPerWhole,
                                 " times over"));
  }
}

bool Same(const Allocation& a, const Allocation& b) {
  return a.owner == b.owner && a.node_id == b.node_id && a.resources.Contains(b.resources) &&
         b.resources.Contains(a.resources) && a.gpu_ids == b.gpu_ids && a.group == b.group &&
         a.bundle == b.bundle;
}

}  // namespace

absl::Status CheckInvariants(const std::vector<NodeSpec>& nodes, const std::vector<Allocation>& recorded,
                             const Cluster* cluster) {
  std::vector<std::string> bad;
  // What actors blocked waiting lent out is not in use: the scheduler's word for it.
  std::vector<Allocation> with_lent = recorded;
  if (cluster) {
    std::map<std::string, ResourceSet> lent;
    for (const Allocation& a : cluster->Allocations())
      if (!a.lent.empty()) lent[a.owner] = a.lent;
    for (Allocation& a : with_lent)
      if (auto it = lent.find(a.owner); it != lent.end()) a.lent = it->second;
  }
  std::map<std::string, Usage> node_usage;
  for (const NodeSpec& n : nodes) {
    Usage& u = node_usage[n.id];
    u.total = n.total;
    for (int id : n.gpu_ids) u.cap[id] = ResourceSet::kUnitsPerWhole;
  }
  // Bundles first: they take from nodes and are the pools of the actors inside them.
  std::map<std::pair<std::string, int>, const Allocation*> bundles;
  std::map<std::pair<std::string, int>, Usage> bundle_usage;
  for (const Allocation& a : with_lent) {
    bool is_bundle = a.owner == absl::StrCat(a.group, "#", a.bundle);
    if (!is_bundle) continue;
    bundles[{a.group, a.bundle}] = &a;
    auto it = node_usage.find(a.node_id);
    if (it == node_usage.end()) {
      bad.push_back(absl::StrCat(a.owner, ": on unknown or dead node ", a.node_id));
      continue;
    }
    Add(it->second, a, bad, a.node_id);
    Usage& bu = bundle_usage[{a.group, a.bundle}];
    bu.total = a.resources;
    for (int id : a.gpu_ids) bu.cap[id] = ShapeOf(a.resources).units_each;
  }
  for (const Allocation& a : with_lent) {
    if (a.owner == absl::StrCat(a.group, "#", a.bundle)) continue;
    if (!a.group.empty()) {
      auto b = bundles.find({a.group, a.bundle});
      if (b == bundles.end()) {
        bad.push_back(
            absl::StrCat(a.owner, ": in bundle ", a.bundle, " of ", a.group, ", which is not placed"));
        continue;
      }
      if (b->second->node_id != a.node_id)
        bad.push_back(
            absl::StrCat(a.owner, ": on ", a.node_id, " but its bundle is on ", b->second->node_id));
      Add(bundle_usage[{a.group, a.bundle}], a, bad, absl::StrCat(a.group, "#", a.bundle));
      continue;
    }
    auto it = node_usage.find(a.node_id);
    if (it == node_usage.end()) {
      bad.push_back(absl::StrCat(a.owner, ": on unknown or dead node ", a.node_id));
      continue;
    }
    Add(it->second, a, bad, a.node_id);
  }
  for (const auto& [id, u] : node_usage) Check(u, id, bad);
  for (const auto& [key, u] : bundle_usage) Check(u, absl::StrCat(key.first, "#", key.second), bad);

  if (cluster) {
    std::vector<Allocation> mine = cluster->Allocations();
    std::vector<Allocation> theirs = recorded;
    std::sort(theirs.begin(), theirs.end(),
              [](const Allocation& x, const Allocation& y) { return x.owner < y.owner; });
    std::map<std::string, const Allocation*> by_owner;
    for (const Allocation& a : mine) by_owner[a.owner] = &a;
    for (const Allocation& a : theirs) {
      auto it = by_owner.find(a.owner);
      if (it == by_owner.end()) {
        bad.push_back(
            absl::StrCat(a.owner, ": recorded on ", a.node_id, " but the scheduler does not hold it"));
        continue;
      }
      if (!Same(a, *it->second))
        bad.push_back(absl::StrCat(a.owner, ": recorded on ", a.node_id, " GPUs [",
                                   absl::StrJoin(a.gpu_ids, ","), "], the scheduler has ",
                                   it->second->node_id, " GPUs [", absl::StrJoin(it->second->gpu_ids, ","),
                                   "]"));
      by_owner.erase(it);
    }
    for (const auto& [owner, a] : by_owner)
      bad.push_back(absl::StrCat(owner, ": held by the scheduler on ", a->node_id, " but not recorded"));
    if (absl::Status index = cluster->CheckIndex(); !index.ok()) bad.push_back(std::string(index.message()));
  }
  if (bad.empty()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(bad.size(), " invariant violation(s): ", absl::StrJoin(bad, "; ")));
}

}  // namespace skyrl::scheduler
