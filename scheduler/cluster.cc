#include "scheduler/cluster.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace skyrl::scheduler {
namespace {

std::string GroupLabel(const std::string& group, const GroupRequest& r) {
  return absl::StrCat("pg ", r.name.empty() ? group : r.name);
}

// by_cpu_'s offset for nodes with GPUs: above every key of a node without (those are <= 0).
constexpr int64_t kGpuNodeBase = int64_t(1) << 50;

}  // namespace

std::string DescribeShortfall(const Pool& pool, const ResourceSet& need) {
  std::vector<std::string> parts;
  auto amount = [](absl::string_view name, int64_t units) {
    ResourceSet one;
    if (name == kMemory) {
      (void)one.Set(name, double(units));
    } else {
      (void)one.Set(name, double(units) / ResourceSet::kUnitsPerWhole);
    }
    std::string s = one.ToHumanString();
    size_t eq = s.find('=');
    return eq == std::string::npos ? std::string("0") : s.substr(eq + 1);
  };
  bool short_any = false;
  for (const auto& [name, units] : need.units())
    if (pool.free().GetUnits(name) < units) short_any = true;
  for (const auto& [name, units] : need.units()) {
    if (units == 0) continue;
    if (short_any && pool.free().GetUnits(name) >= units) continue;
    parts.push_back(absl::StrCat(name, "=", amount(name, pool.free().GetUnits(name)), " free of ",
                                 amount(name, pool.total().GetUnits(name))));
  }
  GpuShape shape = ShapeOf(need);
  if (!short_any && shape.units_each == ResourceSet::kUnitsPerWhole)
    parts.push_back(absl::StrCat(pool.FreeWholeDevices(), " whole GPU device(s) free"));
  return parts.empty() ? std::string("nothing to offer") : absl::StrJoin(parts, ", ");
}

// ---------------------------------------------------------------------------------------
// Nodes

absl::Status Cluster::AddNode(NodeSpec node) {
  if (int64_t(node.gpu_ids.size()) * ResourceSet::kUnitsPerWhole != node.total.GetUnits(kGPU))
    return absl::InvalidArgumentError(
        absl::StrCat("node ", node.id, ": ", node.gpu_ids.size(), " GPU ids for GPU=", node.total.Get(kGPU)));
  std::sort(node.gpu_ids.begin(), node.gpu_ids.end());
  Pool fresh = Pool::ForNode(node.total, node.gpu_ids);
  auto it = nodes_.find(node.id);
  if (it != nodes_.end()) {
    // Re-registration: carry over what is placed there.
    for (const auto& [id, a] : actors_)
      if (a.group.empty() && a.slot.node_id == node.id)
        if (absl::Status s = fresh.Take(a.need, a.slot.gpu_ids); !s.ok())
          return absl::FailedPreconditionError(
              absl::StrCat("node ", node.id, " no longer holds actor ", id, ": ", s.message()));
    for (const auto& [gid, g] : groups_)
      for (const BundleEntry& b : g.bundles)
        if (b.slot && b.slot->node_id == node.id)
          if (absl::Status s = fresh.Take(b.demand.resources, b.slot->gpu_ids); !s.ok())
            return absl::FailedPreconditionError(
                absl::StrCat("node ", node.id, " no longer holds ", gid, ": ", s.message()));
    Unindex(it->second);
    it->second = NodeEntry{std::move(node), std::move(fresh)};
    Index(it->second);
    return absl::OkStatus();
  }
  std::string id = node.id;
  Index(nodes_.emplace(id, NodeEntry{std::move(node), std::move(fresh)}).first->second);
  return absl::OkStatus();
}

Cluster::IndexKeys Cluster::KeysOf(const NodeEntry& n) {
  return IndexKeys{n.pool.free().GetUnits(kGPU),
                   (n.spec.gpu_ids.empty() ? 0 : kGpuNodeBase) - n.pool.free().GetUnits(kCPU),
                   n.pool.FreeWholeDevices()};
}

void Cluster::OrderIndexes(const std::string& id, const IndexKeys& keys, bool in) {
  if (in) {
    by_gpu_.emplace(keys.gpu, id);
    by_cpu_.emplace(keys.cpu, id);
    by_spread_.emplace(-int64_t(keys.whole), -keys.gpu, id);
  } else {
    by_gpu_.erase({keys.gpu, id});
    by_cpu_.erase({keys.cpu, id});
    by_spread_.erase({-int64_t(keys.whole), -keys.gpu, id});
  }
}

void Cluster::Index(NodeEntry& n) {
  n.keys = KeysOf(n);
  OrderIndexes(n.spec.id, n.keys, /*in=*/true);
  for (const auto& [key, value] : n.spec.labels) {
    Domain& d = domains_[key][value];
    d.nodes.insert(n.spec.id);
    d.free_whole += n.keys.whole;
  }
}

void Cluster::Unindex(const NodeEntry& n) {
  OrderIndexes(n.spec.id, n.keys, /*in=*/false);
  for (const auto& [key, value] : n.spec.labels) {
    auto by_value = domains_.find(key);
    if (by_value == domains_.end()) continue;
    auto d = by_value->second.find(value);
    if (d == by_value->second.end()) continue;
    d->second.nodes.erase(n.spec.id);
    d->second.free_whole -= n.keys.whole;
    if (d->second.nodes.empty()) by_value->second.erase(d);
    if (by_value->second.empty()) domains_.erase(by_value);
  }
}

void Cluster::Reindex(const std::string& node_id) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return;
  NodeEntry& n = it->second;
  const IndexKeys now = KeysOf(n);
  const IndexKeys was = n.keys;
  if (now.gpu == was.gpu && now.cpu == was.cpu && now.whole == was.whole) return;
  // Re-keyed in the ordered indexes; its domains keep it, their totals move by the change.
  OrderIndexes(n.spec.id, was, /*in=*/false);
  n.keys = now;
  OrderIndexes(n.spec.id, now, /*in=*/true);
  if (now.whole != was.whole)
    for (const auto& [key, value] : n.spec.labels)
      domains_.at(key).at(value).free_whole += now.whole - was.whole;
}

absl::Status Cluster::CheckIndex() const {
  std::vector<std::string> bad;
  if (by_gpu_.size() != nodes_.size() || by_cpu_.size() != nodes_.size() ||
      by_spread_.size() != nodes_.size())
    bad.push_back(absl::StrCat("index holds ", by_gpu_.size(), "/", by_cpu_.size(), " entries for ",
                               nodes_.size(), " nodes"));
  std::map<std::string, std::map<std::string, Domain>> domains;
  for (const auto& [id, n] : nodes_) {
    IndexKeys k = KeysOf(n);
    if (!by_gpu_.contains({k.gpu, id}) || !by_cpu_.contains({k.cpu, id}) ||
        !by_spread_.contains({-int64_t(k.whole), -k.gpu, id}))
      bad.push_back(absl::StrCat(id, ": indexed under stale free resources"));
    for (const auto& [key, value] : n.spec.labels) {
      domains[key][value].nodes.insert(id);
      domains[key][value].free_whole += k.whole;
    }
  }
  for (const auto& [key, values] : domains)
    for (const auto& [value, d] : values) {
      auto it = domains_.find(key);
      const Domain* have = nullptr;
      if (it != domains_.end())
        if (auto v = it->second.find(value); v != it->second.end()) have = &v->second;
      if (have == nullptr || have->nodes != d.nodes || have->free_whole != d.free_whole)
        bad.push_back(absl::StrCat("domain ", key, "=", value, ": stale members or free whole GPUs"));
    }
  size_t indexed = 0;
  for (const auto& [key, values] : domains_) indexed += values.size();
  size_t want = 0;
  for (const auto& [key, values] : domains) want += values.size();
  if (indexed != want) bad.push_back(absl::StrCat("domain index holds ", indexed, " domains, not ", want));
  if (bad.empty()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("placement index: ", absl::StrJoin(bad, "; ")));
}

Cluster::Displaced Cluster::RemoveNode(const std::string& node_id) {
  Displaced out;
  auto node = nodes_.find(node_id);
  if (node == nodes_.end()) return out;
  Unindex(node->second);
  nodes_.erase(node);
  for (auto& [gid, g] : groups_)
    for (size_t i = 0; i < g.bundles.size(); ++i) {
      BundleEntry& b = g.bundles[i];
      if (!b.slot || b.slot->node_id != node_id) continue;
      b.slot.reset();
      b.pool = Pool();
      out.bundles.emplace_back(gid, int(i));
    }
  for (auto it = actors_.begin(); it != actors_.end();) {
    if (it->second.slot.node_id == node_id) {
      out.actors.push_back(it->first);
      actors_.erase(it++);
    } else {
      ++it;
    }
  }
  std::sort(out.actors.begin(), out.actors.end());
  std::sort(out.bundles.begin(), out.bundles.end());
  return out;
}

const NodeSpec* Cluster::FindNode(const std::string& node_id) const {
  auto it = nodes_.find(node_id);
  return it == nodes_.end() ? nullptr : &it->second.spec;
}

const Pool* Cluster::NodePool(const std::string& node_id) const {
  auto it = nodes_.find(node_id);
  return it == nodes_.end() ? nullptr : &it->second.pool;
}

std::vector<std::string> Cluster::NodeIds() const {
  std::vector<std::string> out;
  for (const auto& [id, n] : nodes_) out.push_back(id);
  return out;
}

// ---------------------------------------------------------------------------------------
// Actors

absl::StatusOr<Slot> Cluster::PlanActor(const Demand& demand, const std::string& group,
                                        std::optional<int> bundle,
                                        const absl::flat_hash_set<std::string>* avoid) const {
  if (!group.empty()) {
    auto git = groups_.find(group);
    if (git == groups_.end()) return absl::NotFoundError(absl::StrCat("no placement group ", group));
    const GroupEntry& g = git->second;
    std::string label = GroupLabel(group, g.request);
    if (bundle && (*bundle < 0 || *bundle >= int(g.bundles.size())))
      return absl::InvalidArgumentError(absl::StrCat("bundle_index: ", *bundle, " is not a bundle of ", label,
                                                     " (it has ", g.bundles.size(), ")"));
    std::vector<std::string> why;
    for (size_t i = 0; i < g.bundles.size(); ++i) {
      if (bundle && int(i) != *bundle) continue;
      const BundleEntry& b = g.bundles[i];
      if (!b.slot) {
        why.push_back(absl::StrCat("bundle ", i, " has no node yet"));
        continue;
      }
      const NodeSpec& node = nodes_.at(b.slot->node_id).spec;
      if (!Matches(node.labels, demand.selector)) {
        why.push_back(absl::StrCat("bundle ", i, " is on ", node.id, " whose labels do not match"));
        continue;
      }
      if (std::optional<std::vector<int>> ids = b.pool.Fit(demand.resources))
        return Slot{b.slot->node_id, *ids, int(i)};
      why.push_back(absl::StrCat("bundle ", i, " has ", DescribeShortfall(b.pool, demand.resources)));
    }
    // Would it fit the bundle(s) when empty?
    bool ever = false;
    for (size_t i = 0; i < g.bundles.size(); ++i) {
      if (bundle && int(i) != *bundle) continue;
      if (g.bundles[i].demand.resources.Contains(demand.resources)) ever = true;
    }
    std::string msg =
        absl::StrCat("actor needs ", demand.Describe(), " in ", label, ": ", absl::StrJoin(why, "; "));
    return ever ? absl::UnavailableError(msg) : absl::ResourceExhaustedError(msg);
  }

  // Any node. GPU requests go where they fit most tightly (fewest GPU units left), so
  // whole nodes stay free for big groups; CPU-only requests prefer nodes without GPUs, then
  // the most free CPU (spreading). The index visits nodes in exactly that order (ties by
  // id), so the first that fits is the best.
  const int64_t gpu_need = demand.resources.GetUnits(kGPU);
  const int64_t cpu_need = demand.resources.GetUnits(kCPU);
  auto fits = [&](const std::string& id) -> std::optional<Slot> {
    if (avoid != nullptr && avoid->contains(id)) return std::nullopt;
    const NodeEntry& n = nodes_.at(id);
    if (!Matches(n.spec.labels, demand.selector)) return std::nullopt;
    std::optional<std::vector<int>> ids = n.pool.Fit(demand.resources);
    if (!ids) return std::nullopt;
    return Slot{id, std::move(*ids)};
  };
  if (const std::set<std::string>* few = FewMatching(demand.selector)) {
    // A selective label selector (node affinity, a small pool): its nodes, in index order.
    std::optional<std::pair<int64_t, std::string>> best;
    std::optional<Slot> chosen;
    for (const std::string& id : *few) {
      std::optional<Slot> slot = fits(id);
      if (!slot) continue;
      const IndexKeys& k = nodes_.at(id).keys;
      std::pair<int64_t, std::string> key{gpu_need > 0 ? k.gpu : k.cpu, id};
      if (!best || key < *best) best = std::move(key), chosen = std::move(slot);
    }
    if (chosen) return *std::move(chosen);
  } else if (gpu_need > 0) {
    // Nodes with fewer free GPU units than asked cannot take it: start past them.
    for (auto it = by_gpu_.lower_bound({gpu_need, std::string()}); it != by_gpu_.end(); ++it)
      if (std::optional<Slot> slot = fits(it->second)) return *slot;
  } else {
    for (auto it = by_cpu_.begin(); it != by_cpu_.end();) {
      // Along each part of the order (nodes without GPUs, then with), free CPU only falls:
      // past the first node with too little, the rest of that part has too little as well.
      const bool gpu_part = it->first > 0;
      const int64_t free_cpu = (gpu_part ? kGpuNodeBase : 0) - it->first;
      if (free_cpu < cpu_need) {
        if (gpu_part) break;
        it = by_cpu_.lower_bound({1, std::string()});
        continue;
      }
      if (std::optional<Slot> slot = fits(it->second)) return *slot;
      ++it;
    }
  }

  // Explain: the best match among nodes whose labels fit.
  const NodeEntry* match = nullptr;
  double match_score = -1;
  int labelled = 0;
  for (const auto& [id, n] : nodes_) {
    if (!Matches(n.spec.labels, demand.selector)) continue;
    ++labelled;
    double score = 0;
    for (const auto& [name, units] : demand.resources.units())
      if (units > 0) score += std::min(1.0, double(n.pool.free().GetUnits(name)) / double(units));
    if (score > match_score) match = &n, match_score = score;
  }
  std::string msg = absl::StrCat("actor needs ", demand.Describe(), "; ");
  if (nodes_.empty()) {
    absl::StrAppend(&msg, "no node is alive");
  } else if (!match) {
    absl::StrAppend(&msg, "no alive node has those labels (", nodes_.size(), " alive)");
  } else {
    absl::StrAppend(&msg, "best match ", match->spec.id, " has ",
                    DescribeShortfall(match->pool, demand.resources));
  }
  bool ever = false;
  for (const auto& [id, n] : nodes_)
    if (Matches(n.spec.labels, demand.selector) &&
        Pool::ForNode(n.spec.total, n.spec.gpu_ids).Fit(demand.resources))
      ever = true;
  return ever ? absl::UnavailableError(msg)
              : absl::ResourceExhaustedError(absl::StrCat(msg, " (no node of this cluster can ever fit it)"));
}

const std::set<std::string>* Cluster::FewMatching(const Labels& selector) const {
  static const std::set<std::string> kNone;
  const std::set<std::string>* few = nullptr;
  for (const auto& [key, value] : selector) {
    auto by_value = domains_.find(key);
    if (by_value == domains_.end()) return &kNone;
    auto domain = by_value->second.find(value);
    if (domain == by_value->second.end()) return &kNone;
    if (few == nullptr || domain->second.nodes.size() < few->size()) few = &domain->second.nodes;
  }
  // Few enough that visiting them all beats walking the index past the others.
  if (few != nullptr && few->size() * kFewMatching <= nodes_.size()) return few;
  return nullptr;
}

absl::Status Cluster::AllocateActor(const std::string& actor, const ResourceSet& need, const Slot& slot,
                                    const std::string& group, int bundle) {
  if (actors_.contains(actor))
    return absl::FailedPreconditionError(absl::StrCat(actor, " is placed already"));
  Pool* pool = nullptr;
  if (!group.empty()) {
    auto git = groups_.find(group);
    if (git == groups_.end())
      return absl::FailedPreconditionError(absl::StrCat("no placement group ", group));
    if (bundle < 0 || bundle >= int(git->second.bundles.size()))
      return absl::FailedPreconditionError(absl::StrCat("no bundle ", bundle, " in ", group));
    BundleEntry& b = git->second.bundles[bundle];
    if (!b.slot || b.slot->node_id != slot.node_id)
      return absl::FailedPreconditionError(
          absl::StrCat("bundle ", bundle, " of ", group, " is not on ", slot.node_id));
    pool = &b.pool;
  } else {
    auto nit = nodes_.find(slot.node_id);
    if (nit == nodes_.end())
      return absl::FailedPreconditionError(absl::StrCat("no alive node ", slot.node_id));
    pool = &nit->second.pool;
  }
  if (absl::Status s = pool->Take(need, slot.gpu_ids); !s.ok())
    return absl::FailedPreconditionError(
        absl::StrCat(actor, " does not fit on ", slot.node_id, ": ", s.message()));
  actors_[actor] = ActorEntry{need, slot, group, bundle};
  if (group.empty()) Reindex(slot.node_id);
  return absl::OkStatus();
}

Pool* Cluster::PoolOf(const ActorEntry& a) {
  if (!a.group.empty()) {
    auto git = groups_.find(a.group);
    if (git == groups_.end()) return nullptr;
    BundleEntry& b = git->second.bundles[a.bundle];
    return b.slot && b.slot->node_id == a.slot.node_id ? &b.pool : nullptr;
  }
  auto nit = nodes_.find(a.slot.node_id);
  return nit == nodes_.end() ? nullptr : &nit->second.pool;
}

void Cluster::ReleaseActor(const std::string& actor) {
  auto it = actors_.find(actor);
  if (it == actors_.end()) return;
  const ActorEntry& a = it->second;
  if (Pool* pool = PoolOf(a)) {
    ResourceSet held = a.need;
    held -= a.lent;
    pool->Give(held, a.slot.gpu_ids);
  }
  const std::string node = a.group.empty() ? a.slot.node_id : std::string();
  actors_.erase(it);
  if (!node.empty()) Reindex(node);
}

void Cluster::LendCpu(const std::string& actor) {
  auto it = actors_.find(actor);
  if (it == actors_.end() || !it->second.lent.empty()) return;
  ActorEntry& a = it->second;
  const int64_t cpu = a.need.GetUnits("CPU");
  Pool* pool = PoolOf(a);
  if (cpu == 0 || pool == nullptr) return;
  ResourceSet lent;
  (void)lent.Set("CPU", double(cpu) / ResourceSet::kUnitsPerWhole);  // a value `need` held: valid
  pool->Give(lent, {});
  a.lent = std::move(lent);
  if (a.group.empty()) Reindex(a.slot.node_id);
}

bool Cluster::ReclaimCpu(const std::string& actor) {
  auto it = actors_.find(actor);
  if (it == actors_.end()) return true;
  ActorEntry& a = it->second;
  if (a.lent.empty()) return true;
  Pool* pool = PoolOf(a);
  if (pool == nullptr || !pool->Take(a.lent, {}).ok()) return false;
  a.lent = ResourceSet();
  if (a.group.empty()) Reindex(a.slot.node_id);
  return true;
}

// ---------------------------------------------------------------------------------------
// Groups (planning lives in bundle_placement.cc)

Pool Cluster::BundlePool(const ResourceSet& need, const std::vector<int>& gpu_ids) {
  std::map<int, int64_t> cap;
  GpuShape shape = ShapeOf(need);
  for (int id : gpu_ids) cap[id] = shape.units_each;
  return Pool(need, std::move(cap));
}

absl::Status Cluster::ReserveGroup(const std::string& group, const GroupRequest& request,
                                   const std::vector<std::optional<Slot>>& slots) {
  if (groups_.contains(group)) return absl::FailedPreconditionError(absl::StrCat(group, " exists already"));
  if (slots.size() != request.bundles.size())
    return absl::FailedPreconditionError(
        absl::StrCat(group, ": ", slots.size(), " slots for ", request.bundles.size(), " bundles"));
  GroupEntry g{request, {}};
  std::vector<std::pair<std::string, size_t>> taken;  // to undo on failure
  absl::Status failed;
  for (size_t i = 0; i < slots.size(); ++i) {
    BundleEntry b{request.bundles[i], std::nullopt, Pool()};
    if (slots[i]) {
      auto nit = nodes_.find(slots[i]->node_id);
      if (nit == nodes_.end()) {
        failed = absl::FailedPreconditionError(
            absl::StrCat(group, " bundle ", i, ": no alive node ", slots[i]->node_id));
        break;
      }
      if (absl::Status s = nit->second.pool.Take(b.demand.resources, slots[i]->gpu_ids); !s.ok()) {
        failed = absl::FailedPreconditionError(
            absl::StrCat(group, " bundle ", i, " does not fit on ", slots[i]->node_id, ": ", s.message()));
        break;
      }
      taken.emplace_back(slots[i]->node_id, i);
      b.slot = slots[i];
      b.pool = BundlePool(b.demand.resources, slots[i]->gpu_ids);
    }
    g.bundles.push_back(std::move(b));
  }
  if (!failed.ok()) {
    for (const auto& [node, i] : taken)
      nodes_.at(node).pool.Give(request.bundles[i].resources, slots[i]->gpu_ids);
    return failed;
  }
  for (const auto& [node, i] : taken) Reindex(node);
  groups_.emplace(group, std::move(g));
  return absl::OkStatus();
}

absl::Status Cluster::PlaceBundles(const std::string& group, const std::vector<Slot>& slots) {
  auto git = groups_.find(group);
  if (git == groups_.end()) return absl::FailedPreconditionError(absl::StrCat("no placement group ", group));
  GroupEntry& g = git->second;
  if (slots.size() != g.bundles.size())
    return absl::FailedPreconditionError(
        absl::StrCat(group, ": ", slots.size(), " slots for ", g.bundles.size(), " bundles"));
  std::vector<size_t> taken;
  absl::Status failed;
  for (size_t i = 0; i < slots.size(); ++i) {
    BundleEntry& b = g.bundles[i];
    if (b.slot) continue;
    auto nit = nodes_.find(slots[i].node_id);
    absl::Status s = nit == nodes_.end()
                         ? absl::FailedPreconditionError(absl::StrCat("no alive node ", slots[i].node_id))
                         : nit->second.pool.Take(b.demand.resources, slots[i].gpu_ids);
    if (!s.ok()) {
      failed = absl::FailedPreconditionError(absl::StrCat(group, " bundle ", i, ": ", s.message()));
      break;
    }
    taken.push_back(i);
  }
  for (size_t i : taken) {
    if (failed.ok()) {
      g.bundles[i].slot = slots[i];
      g.bundles[i].pool = BundlePool(g.bundles[i].demand.resources, slots[i].gpu_ids);
    } else {
      nodes_.at(slots[i].node_id).pool.Give(g.bundles[i].demand.resources, slots[i].gpu_ids);
    }
    Reindex(slots[i].node_id);
  }
  return failed;
}

std::vector<std::string> Cluster::RemoveGroup(const std::string& group) {
  std::vector<std::string> inside;
  auto git = groups_.find(group);
  if (git == groups_.end()) return inside;
  for (auto it = actors_.begin(); it != actors_.end();) {
    if (it->second.group == group) {
      inside.push_back(it->first);
      actors_.erase(it++);  // the bundle pools go away with the group
    } else {
      ++it;
    }
  }
  for (const BundleEntry& b : git->second.bundles)
    if (b.slot) {
      auto nit = nodes_.find(b.slot->node_id);
      if (nit != nodes_.end()) {
        nit->second.pool.Give(b.demand.resources, b.slot->gpu_ids);
        Reindex(b.slot->node_id);
      }
    }
  groups_.erase(git);
  std::sort(inside.begin(), inside.end());
  return inside;
}

absl::StatusOr<std::vector<std::optional<Slot>>> Cluster::GroupSlots(const std::string& group) const {
  auto git = groups_.find(group);
  if (git == groups_.end()) return absl::NotFoundError(absl::StrCat("no placement group ", group));
  std::vector<std::optional<Slot>> out;
  for (const BundleEntry& b : git->second.bundles) out.push_back(b.slot);
  return out;
}

const GroupRequest* Cluster::FindGroup(const std::string& group) const {
  auto git = groups_.find(group);
  return git == groups_.end() ? nullptr : &git->second.request;
}

// ---------------------------------------------------------------------------------------
// Views

std::vector<Allocation> Cluster::Allocations() const {
  std::vector<Allocation> out;
  for (const auto& [id, a] : actors_)
    out.push_back(Allocation{id, a.slot.node_id, a.need, a.slot.gpu_ids, a.group, a.bundle, a.lent});
  for (const auto& [gid, g] : groups_)
    for (size_t i = 0; i < g.bundles.size(); ++i)
      if (g.bundles[i].slot)
        out.push_back(Allocation{absl::StrCat(gid, "#", i), g.bundles[i].slot->node_id,
                                 g.bundles[i].demand.resources, g.bundles[i].slot->gpu_ids, gid, int(i)});
  std::sort(out.begin(), out.end(),
            [](const Allocation& x, const Allocation& y) { return x.owner < y.owner; });
  return out;
}

ResourceSet Cluster::TotalResources() const {
  ResourceSet t;
  for (const auto& [id, n] : nodes_) t += n.spec.total;
  return t;
}

ResourceSet Cluster::FreeResources() const {
  ResourceSet t;
  for (const auto& [id, n] : nodes_) t += n.pool.free();
  return t;
}

Cluster Cluster::Idle() const {
  Cluster c;
  for (const auto& [id, n] : nodes_)
    c.Index(
        c.nodes_.emplace(id, NodeEntry{n.spec, Pool::ForNode(n.spec.total, n.spec.gpu_ids)}).first->second);
  return c;
}

}  // namespace skyrl::scheduler
