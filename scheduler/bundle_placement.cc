// Cluster::PlanGroup: where the bundles of a placement group go.
//
// The heuristics (docs/decisions.md has the reasoning):
// - Domains: with `domain_label`, nodes are grouped by that label's value and the group is
//   placed inside one domain, trying the domains of the affinity group's nodes first, then
//   those with the most free whole GPUs.
// - Node preference, in order: nodes of the affinity group (weight sync stays on NVLink),
//   then, for PACK, the node that the group fills most tightly; for SPREAD, the nodes with
//   the most free GPUs.
// - PACK tries one node first; failing that, it fills nodes one after another in preference
//   order, so bundles are contiguous per node. STRICT_PACK is the first step alone.
// - SPREAD and STRICT_SPREAD give each bundle a node not used by the group yet; SPREAD may
//   then reuse a node, STRICT_SPREAD fails.
// - A new group whose bundles are all alike gets its slots sorted by (node id, GPU id), so
//   bundle i is on a predictable node and device: ranks are ordered node by node.
// Planning works on copies of the few node pools it touches, never on the cluster itself.
#include <algorithm>
#include <numeric>
#include <set>
#include <tuple>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "scheduler/cluster.h"

namespace skyrl::scheduler {

class GroupPlanner {
 public:
  using NodeEntry = Cluster::NodeEntry;

  GroupPlanner(const Cluster& cluster, const GroupRequest& request,
               const std::vector<std::optional<Slot>>& placed)
      : cluster_(cluster), request_(request), placed_(placed) {
    if (placed_.empty()) placed_.resize(request_.bundles.size());
  }

  absl::StatusOr<std::vector<Slot>> Plan() {
    if (placed_.size() != request_.bundles.size())
      return absl::InvalidArgumentError(absl::StrCat(Label(), ": ", placed_.size(), " placements for ",
                                                     request_.bundles.size(), " bundles"));
    if (request_.bundles.empty()) return absl::InvalidArgumentError(absl::StrCat(Label(), ": no bundles"));
    CollectAffinity();
    if (request_.domain_label.empty() &&
        std::none_of(placed_.begin(), placed_.end(), [](const auto& p) { return p.has_value(); })) {
      // A new group on any node, through the indexes, with no walk over every node: one node
      // for the whole group first (STRICT_PACK, PACK's first try), then PACK fills and SPREAD
      // spreads in the index's order. The nodes are gathered only to explain a failure.
      std::optional<std::vector<Slot>> slots;
      if (std::vector<Slot> one(placed_.size());
          (request_.strategy == Strategy::kStrictPack || request_.strategy == Strategy::kPack) &&
          OneNodeIndexed(one)) {
        slots = std::move(one);
      } else if (request_.strategy != Strategy::kStrictPack) {
        whole_cluster_ = true;
        std::vector<Slot> out(placed_.size());
        slots = request_.strategy == Strategy::kPack
                    ? Fill({}, {}, out)
                    : Spread({}, {}, out, request_.strategy == Strategy::kStrictSpread);
        whole_cluster_ = false;
      }
      if (!slots) return Explain(Domains());
      Canonicalize(*slots);
      return *slots;
    }
    if (request_.domain_label.empty()) {
      std::vector<std::vector<const NodeEntry*>> domains = Domains();
      if (std::optional<std::vector<Slot>> slots = PlanInDomain(domains[0])) {
        Canonicalize(*slots);
        return *slots;
      }
      return Explain(domains);
    }
    // Domain by domain in order, each one's nodes gathered only when it is tried.
    for (const std::string& value : DomainOrder())
      if (std::optional<std::vector<Slot>> slots = PlanInDomain(Members(value))) {
        Canonicalize(*slots);
        return *slots;
      }
    return Explain(Domains());
  }

 private:
  std::string Label() const {
    return absl::StrCat("pg ", request_.name.empty() ? "(unnamed)" : request_.name);
  }

  void CollectAffinity() {
    if (request_.affinity_group.empty()) return;
    auto git = cluster_.groups_.find(request_.affinity_group);
    if (git == cluster_.groups_.end()) return;
    for (const auto& b : git->second.bundles)
      if (b.slot) affinity_.insert(b.slot->node_id);
  }

  std::vector<std::vector<const NodeEntry*>> Domains() const {
    std::vector<std::vector<const NodeEntry*>> out;
    if (request_.domain_label.empty()) {
      out.emplace_back();
      for (const auto& [id, n] : cluster_.nodes_) out.back().push_back(&n);
      return out;
    }
    for (const std::string& value : DomainOrder()) out.push_back(Members(value));
    return out;
  }

  // The values of the domain label in the order domains are tried: those holding the
  // affinity group's nodes first (weight sync stays on NVLink), then the most free whole
  // GPUs, then by value. A group with bundles already placed stays in their domain.
  std::vector<std::string> DomainOrder() const {
    auto by_value = cluster_.domains_.find(request_.domain_label);
    if (by_value == cluster_.domains_.end()) return {};
    std::optional<std::string> fixed;
    for (const auto& s : placed_)
      if (s)
        if (const NodeSpec* n = cluster_.FindNode(s->node_id)) {
          auto it = n->labels.find(request_.domain_label);
          if (it != n->labels.end()) fixed = it->second;
        }
    absl::flat_hash_set<std::string> affine;
    for (const std::string& id : affinity_)
      if (const NodeSpec* n = cluster_.FindNode(id))
        if (auto it = n->labels.find(request_.domain_label); it != n->labels.end()) affine.insert(it->second);
    std::vector<std::tuple<int, int64_t, const std::string*>> order;
    for (const auto& [value, d] : by_value->second)
      if (!fixed || value == *fixed)
        order.emplace_back(affine.contains(value) ? 0 : 1, -d.free_whole, &value);
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
      return std::tie(std::get<0>(a), std::get<1>(a), *std::get<2>(a)) <
             std::tie(std::get<0>(b), std::get<1>(b), *std::get<2>(b));
    });
    std::vector<std::string> out;
    out.reserve(order.size());
    for (const auto& [a, f, value] : order) out.push_back(*value);
    return out;
  }

  // The nodes of one domain, by id.
  std::vector<const NodeEntry*> Members(const std::string& value) const {
    std::vector<const NodeEntry*> out;
    const Cluster::Domain& d = cluster_.domains_.at(request_.domain_label).at(value);
    out.reserve(d.nodes.size());
    for (const std::string& id : d.nodes) out.push_back(&cluster_.nodes_.at(id));
    return out;
  }

  // The pool of a node as planned so far.
  Pool& Scratch(const NodeEntry* n) {
    auto it = scratch_.find(n->spec.id);
    if (it == scratch_.end()) it = scratch_.emplace(n->spec.id, n->pool).first;
    return it->second;
  }
  const Pool& View(const NodeEntry* n) const {
    auto it = scratch_.find(n->spec.id);
    return it == scratch_.end() ? n->pool : it->second;
  }

  // Takes bundle i on node n in the scratch pools; false when it does not fit.
  bool TryTake(size_t i, const NodeEntry* n, std::vector<Slot>& out) {
    const Demand& d = request_.bundles[i];
    if (!Matches(n->spec.labels, d.selector)) return false;
    std::optional<std::vector<int>> ids = View(n).Fit(d.resources);
    if (!ids) return false;
    if (!Scratch(n).Take(d.resources, *ids).ok()) return false;
    out[i] = Slot{n->spec.id, *ids};
    return true;
  }

  // The unplaced bundles, most constrained first: bundles whose label selector fewer nodes
  // match, then the biggest (GPUs, then CPUs): first-fit decreasing finds room for a big or
  // picky bundle that easier ones would otherwise take. Ties keep index order.
  const std::vector<size_t>& Missing() const {
    if (missing_) return *missing_;
    std::vector<size_t> m;
    std::vector<size_t> matching(placed_.size(), cluster_.nodes_.size());
    for (size_t i = 0; i < placed_.size(); ++i) {
      if (placed_[i]) continue;
      m.push_back(i);
      if (request_.bundles[i].selector.empty()) continue;
      matching[i] = 0;
      for (const auto& [id, n] : cluster_.nodes_)
        matching[i] += Matches(n.spec.labels, request_.bundles[i].selector);
    }
    std::stable_sort(m.begin(), m.end(), [&](size_t a, size_t b) {
      const ResourceSet& x = request_.bundles[a].resources;
      const ResourceSet& y = request_.bundles[b].resources;
      return std::make_tuple(matching[a], -x.GetUnits(kGPU), -x.GetUnits(kCPU)) <
             std::make_tuple(matching[b], -y.GetUnits(kGPU), -y.GetUnits(kCPU));
    });
    missing_ = std::move(m);
    return *missing_;
  }

  ResourceSet MissingSum() const {
    ResourceSet sum;
    for (size_t i : Missing()) sum += request_.bundles[i].resources;
    return sum;
  }

  std::optional<std::vector<Slot>> PlanInDomain(const std::vector<const NodeEntry*>& domain) {
    std::vector<Slot> out(placed_.size());
    std::set<std::string> used;
    for (size_t i = 0; i < placed_.size(); ++i)
      if (placed_[i]) out[i] = *placed_[i], used.insert(placed_[i]->node_id);
    switch (request_.strategy) {
      case Strategy::kStrictPack:
        return OneNode(domain, used, out);
      case Strategy::kPack:
        if (auto one = OneNode(domain, used, out)) return one;
        return Fill(domain, used, out);
      case Strategy::kStrictSpread:
        return Spread(domain, used, out, /*strict=*/true);
      case Strategy::kSpread:
        return Spread(domain, used, out, /*strict=*/false);
    }
    return std::nullopt;
  }

  // Every missing bundle on one node (the node of the placed ones, if any).
  std::optional<std::vector<Slot>> OneNode(const std::vector<const NodeEntry*>& domain,
                                           const std::set<std::string>& used, std::vector<Slot> out) {
    if (used.size() > 1) return std::nullopt;
    ResourceSet sum = MissingSum();
    int whole = 0;
    for (size_t i : Missing()) {
      GpuShape s = ShapeOf(request_.bundles[i].resources);
      if (s.units_each == ResourceSet::kUnitsPerWhole) whole += s.devices;
    }
    // Candidates that can hold the sum, tightest first (affinity nodes before others).
    std::vector<std::pair<std::pair<int, int64_t>, const NodeEntry*>> cands;
    for (const NodeEntry* n : domain) {
      if (!used.empty() && !used.contains(n->spec.id)) continue;
      if (!n->pool.free().Contains(sum) || n->pool.FreeWholeDevices() < whole) continue;
      cands.push_back({{affinity_.contains(n->spec.id) ? 0 : 1, n->pool.free().GetUnits(kGPU)}, n});
    }
    std::sort(cands.begin(), cands.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second->spec.id < b.second->spec.id;
    });
    for (const auto& [key, n] : cands) {
      scratch_.clear();
      bool ok = true;
      for (size_t i : Missing())
        if (!TryTake(i, n, out)) {
          ok = false;
          break;
        }
      if (ok) return out;
    }
    scratch_.clear();
    return std::nullopt;
  }

  // OneNode over every node, in the same order, visited through the index by free GPU units
  // (affinity nodes first): the walk starts at the first node with enough GPU units free
  // and usually stops there.
  bool OneNodeIndexed(std::vector<Slot>& out) {
    const ResourceSet sum = MissingSum();
    int whole = 0;
    for (size_t i : Missing()) {
      GpuShape s = ShapeOf(request_.bundles[i].resources);
      if (s.units_each == ResourceSet::kUnitsPerWhole) whole += s.devices;
    }
    auto take_all = [&](const NodeEntry* n) {
      if (!n->pool.free().Contains(sum) || n->pool.FreeWholeDevices() < whole) return false;
      scratch_.clear();
      bool ok = true;
      for (size_t i : Missing())
        if (!(ok = TryTake(i, n, out))) break;
      scratch_.clear();
      return ok;
    };
    std::vector<std::pair<int64_t, const NodeEntry*>> affine;
    for (const std::string& id : affinity_)
      if (auto it = cluster_.nodes_.find(id); it != cluster_.nodes_.end())
        affine.push_back({it->second.pool.free().GetUnits(kGPU), &it->second});
    std::sort(affine.begin(), affine.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second->spec.id < b.second->spec.id;
    });
    for (const auto& [gpu, n] : affine)
      if (take_all(n)) return true;
    for (auto it = cluster_.by_gpu_.lower_bound({sum.GetUnits(kGPU), std::string()});
         it != cluster_.by_gpu_.end(); ++it)
      if (!affinity_.contains(it->second) && take_all(&cluster_.nodes_.at(it->second))) return true;
    return false;
  }

  // Nodes in preference order, sorted lazily: a walk usually stops after about one node per
  // bundle (a 3-bundle SPREAD group on 1,000 nodes looks at 3), so only a prefix is sorted
  // up front (partial sort) and the rest when a walk gets there. The key ends with the
  // node's position in the domain, so the order is total and the same as a stable sort's.
  class LazyOrder {
   public:
    using Key = std::tuple<int, int, int, int64_t, size_t>;
    LazyOrder(std::vector<std::pair<Key, const NodeEntry*>> keyed, size_t prefix) : keyed_(std::move(keyed)) {
      sorted_ = std::min(prefix, keyed_.size());
      std::partial_sort(keyed_.begin(), keyed_.begin() + sorted_, keyed_.end(), Less);
    }
    // Every node of `cluster`: `first` (in order), then the spread index's walk past `skip`
    // (the nodes in `first`), taken as far as a walk goes.
    LazyOrder(std::vector<const NodeEntry*> first, const Cluster& cluster,
              absl::flat_hash_set<std::string> skip)
        : cluster_(&cluster),
          walked_(std::move(first)),
          next_(cluster.by_spread_.begin()),
          skip_(std::move(skip)) {}
    size_t size() const { return cluster_ != nullptr ? cluster_->nodes_.size() : keyed_.size(); }
    const NodeEntry* operator[](size_t k) {
      if (cluster_ != nullptr) {
        while (walked_.size() <= k && next_ != cluster_->by_spread_.end()) {
          const std::string& id = std::get<2>(*next_++);
          if (!skip_.contains(id)) walked_.push_back(&cluster_->nodes_.at(id));
        }
        return walked_[k];
      }
      if (k >= sorted_) {  // everything past the prefix is no smaller than it
        std::sort(keyed_.begin() + sorted_, keyed_.end(), Less);
        sorted_ = keyed_.size();
      }
      return keyed_[k].second;
    }

   private:
    static bool Less(const std::pair<Key, const NodeEntry*>& a, const std::pair<Key, const NodeEntry*>& b) {
      return a.first < b.first;
    }
    std::vector<std::pair<Key, const NodeEntry*>> keyed_;
    size_t sorted_ = 0;
    // Walking the index instead (whole_cluster_):
    const Cluster* cluster_ = nullptr;
    std::vector<const NodeEntry*> walked_;
    std::set<std::tuple<int64_t, int64_t, std::string>>::const_iterator next_;
    absl::flat_hash_set<std::string> skip_;
  };

  // Nodes in preference order for filling or spreading: used nodes, affinity nodes, then
  // the most free whole GPUs, then the most free GPU units, then position in the domain.
  LazyOrder Order(const std::vector<const NodeEntry*>& domain, const std::set<std::string>& used) const {
    if (whole_cluster_) {
      // Used and affinity nodes first, in the order below (ties by id), then the index.
      std::vector<std::pair<std::tuple<int, int, int, int64_t, std::string>, const NodeEntry*>> first;
      absl::flat_hash_set<std::string> skip;
      auto add = [&](const std::string& id) {
        auto it = cluster_.nodes_.find(id);
        if (it == cluster_.nodes_.end() || !skip.insert(id).second) return;
        const NodeEntry* n = &it->second;
        first.push_back({{used.contains(id) ? 0 : 1, affinity_.contains(id) ? 0 : 1,
                          -n->pool.FreeWholeDevices(), -n->pool.free().GetUnits(kGPU), id},
                         n});
      };
      for (const std::string& id : used) add(id);
      for (const std::string& id : affinity_) add(id);
      std::sort(first.begin(), first.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      std::vector<const NodeEntry*> nodes;
      for (const auto& [key, n] : first) nodes.push_back(n);
      return LazyOrder(std::move(nodes), cluster_, std::move(skip));
    }
    std::vector<std::pair<LazyOrder::Key, const NodeEntry*>> keyed;
    keyed.reserve(domain.size());
    for (size_t i = 0; i < domain.size(); ++i) {
      const NodeEntry* n = domain[i];
      keyed.push_back(
          {LazyOrder::Key{used.contains(n->spec.id) ? 0 : 1, affinity_.contains(n->spec.id) ? 0 : 1,
                          -n->pool.FreeWholeDevices(), -n->pool.free().GetUnits(kGPU), i},
           n});
    }
    return LazyOrder(std::move(keyed), used.size() + 2 * Missing().size() + 4);
  }

  std::optional<std::vector<Slot>> Fill(const std::vector<const NodeEntry*>& domain,
                                        const std::set<std::string>& used, std::vector<Slot> out) {
    scratch_.clear();
    LazyOrder order = Order(domain, used);
    std::vector<const NodeEntry*> open;
    size_t cursor = 0;
    for (size_t i : Missing()) {
      bool done = false;
      for (const NodeEntry* n : open)
        if ((done = TryTake(i, n, out))) break;
      while (!done && cursor < order.size()) {
        const NodeEntry* n = order[cursor++];
        if ((done = TryTake(i, n, out))) open.push_back(n);
      }
      // A bundle unlike the others may fit a node passed over for an earlier one.
      for (size_t k = 0; !done && k < cursor; ++k)
        if ((done = TryTake(i, order[k], out))) open.push_back(order[k]);
      if (!done) {
        failed_bundle_ = i;
        scratch_.clear();
        return std::nullopt;
      }
    }
    scratch_.clear();
    return out;
  }

  std::optional<std::vector<Slot>> Spread(const std::vector<const NodeEntry*>& domain,
                                          std::set<std::string> used, std::vector<Slot> out, bool strict) {
    scratch_.clear();
    LazyOrder order = Order(domain, {});
    size_t cursor = 0;
    for (size_t i : Missing()) {
      bool done = false;
      // Unused nodes in order; the cursor skips nodes already known to be used.
      for (size_t k = cursor; !done && k < order.size(); ++k) {
        const NodeEntry* n = order[k];
        if (used.contains(n->spec.id)) {
          if (k == cursor) ++cursor;
          continue;
        }
        if ((done = TryTake(i, n, out))) used.insert(n->spec.id);
      }
      if (!done && !strict)
        for (size_t k = 0; !done && k < order.size(); ++k) done = TryTake(i, order[k], out);
      if (!done) {
        failed_bundle_ = i;
        scratch_.clear();
        return std::nullopt;
      }
    }
    scratch_.clear();
    return out;
  }

  void Canonicalize(std::vector<Slot>& slots) const {
    for (const auto& p : placed_)
      if (p) return;  // keep what is placed where it is
    for (size_t i = 1; i < request_.bundles.size(); ++i)
      if (!(request_.bundles[i] == request_.bundles[0])) return;
    std::sort(slots.begin(), slots.end(), [](const Slot& a, const Slot& b) {
      return a.node_id != b.node_id ? a.node_id < b.node_id : a.gpu_ids < b.gpu_ids;
    });
  }

  absl::Status Explain(const std::vector<std::vector<const NodeEntry*>>& domains) {
    std::string msg = Label();
    absl::StrAppend(&msg, " (", StrategyName(request_.strategy), ", ", request_.bundles.size(), " bundles");
    if (!request_.domain_label.empty()) absl::StrAppend(&msg, ", within one ", request_.domain_label);
    absl::StrAppend(&msg, "): ");
    if (cluster_.nodes_.empty()) {
      absl::StrAppend(&msg, "no node is alive");
    } else if (domains.empty() || (domains.size() == 1 && domains[0].empty())) {
      absl::StrAppend(&msg, "no alive node has the label ", request_.domain_label);
    } else if (request_.strategy == Strategy::kStrictPack ||
               (request_.strategy == Strategy::kPack && !failed_bundle_)) {
      absl::StrAppend(&msg, "no node can hold all ", Missing().size(), " bundles (",
                      MissingSum().ToHumanString(), ")", BestNode(domains, MissingSum(), {}));
    } else {
      size_t i = failed_bundle_.value_or(0);
      const Demand& d = request_.bundles[i];
      int matching = 0;
      for (const auto& dom : domains)
        for (const NodeEntry* n : dom)
          if (Matches(n->spec.labels, d.selector)) ++matching;
      absl::StrAppend(&msg, "bundle ", i, " needs ", d.Describe());
      if (request_.strategy == Strategy::kStrictSpread && matching < int(request_.bundles.size()))
        absl::StrAppend(&msg, "; STRICT_SPREAD needs ", request_.bundles.size(), " distinct nodes, ",
                        matching, " alive node(s) match");
      absl::StrAppend(&msg, BestNode(domains, d.resources, d.selector));
    }
    if (std::string cap = CapacityShortfall(domains); !cap.empty()) absl::StrAppend(&msg, "; ", cap);
    // Infeasible for good, or only while others hold resources?
    Cluster idle = cluster_.Idle();
    std::vector<std::optional<Slot>> none(request_.bundles.size());
    GroupRequest plain = request_;
    plain.affinity_group.clear();
    bool ever = GroupPlanner(idle, plain, none).PlanQuiet();
    if (ever) return absl::UnavailableError(msg);
    return absl::ResourceExhaustedError(absl::StrCat(msg, " (no node of this cluster can ever fit it)"));
  }

  // When no domain (or the cluster) has enough free in total, says so with the best one.
  std::string CapacityShortfall(const std::vector<std::vector<const NodeEntry*>>& domains) const {
    if (Missing().size() < 2) return "";  // one bundle: the per-bundle message says more
    ResourceSet sum = MissingSum();
    const std::vector<const NodeEntry*>* best = nullptr;
    ResourceSet best_free;
    for (const auto& dom : domains) {
      ResourceSet free;
      for (const NodeEntry* n : dom) free += n->pool.free();
      if (free.Contains(sum)) return "";
      if (!best || free.GetUnits(kGPU) > best_free.GetUnits(kGPU)) best = &dom, best_free = free;
    }
    if (!best || best->empty()) return "";
    std::string where = "the cluster";
    if (!request_.domain_label.empty())
      where = absl::StrCat("the best ", request_.domain_label, " (",
                           (*best)[0]->spec.labels.at(request_.domain_label), ", ", best->size(), " nodes)");
    ResourceSet shown;  // only what the group asks for
    for (const auto& [name, units] : sum.units())
      if (units > 0)
        (void)shown.Set(name, name == kMemory ? double(best_free.GetUnits(name)) : best_free.Get(name));
    return absl::StrCat("in all the group needs ", sum.ToHumanString(), "; ", where, " has ",
                        shown.ToHumanString(), " free");
  }

  bool PlanQuiet() {
    for (const auto& domain : Domains())
      if (PlanInDomain(domain)) return true;
    return false;
  }

  std::string BestNode(const std::vector<std::vector<const NodeEntry*>>& domains, const ResourceSet& need,
                       const Labels& selector) const {
    const NodeEntry* best = nullptr;
    double best_score = -1;
    for (const auto& dom : domains)
      for (const NodeEntry* n : dom) {
        if (!Matches(n->spec.labels, selector)) continue;
        double score = 0;
        for (const auto& [name, units] : need.units())
          if (units > 0) score += std::min(1.0, double(n->pool.free().GetUnits(name)) / double(units));
        if (score > best_score) best = n, best_score = score;
      }
    if (!best) return "; no alive node has those labels";
    return absl::StrCat("; best match ", best->spec.id, " has ", DescribeShortfall(best->pool, need));
  }

  const Cluster& cluster_;
  const GroupRequest& request_;
  std::vector<std::optional<Slot>> placed_;
  absl::flat_hash_set<std::string> affinity_;
  std::map<std::string, Pool> scratch_;
  bool whole_cluster_ = false;  // Order() walks the cluster's spread index, not a domain
  std::optional<size_t> failed_bundle_;
  mutable std::optional<std::vector<size_t>> missing_;
};

absl::StatusOr<std::vector<Slot>> Cluster::PlanGroup(const GroupRequest& request,
                                                     const std::vector<std::optional<Slot>>& placed) const {
  for (size_t i = 0; i < request.bundles.size(); ++i)
    if (absl::Status s = ValidateDemand(absl::StrCat("bundles[", i, "]"), request.bundles[i]); !s.ok())
      return s;
  return GroupPlanner(*this, request, placed).Plan();
}

}  // namespace skyrl::scheduler
