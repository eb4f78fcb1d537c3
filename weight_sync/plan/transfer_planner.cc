#include "weight_sync/plan/transfer_planner.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace skyrl::weight_sync {
namespace {

struct Piece {
  int param;
  int receiver;
  int group;  // index into holder lists
  Box box;
  int64_t bytes;
};

}  // namespace

std::vector<int> Plan::SendsOf(int sender) const {
  std::vector<int> out;
  auto lo = std::lower_bound(transfers.begin(), transfers.end(), sender,
                             [](const Transfer& t, int s) { return t.sender < s; });
  for (auto it = lo; it != transfers.end() && it->sender == sender; ++it)
    out.push_back(static_cast<int>(it - transfers.begin()));
  return out;
}

std::vector<int> Plan::ReceivesOf(int receiver) const {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(transfers.size()); ++i)
    if (transfers[i].receiver == receiver) out.push_back(i);
  return out;
}

void EvaluatePlan(const CostModel& cost, Plan& plan) {
  plan.send_load.assign(plan.num_senders, {});
  plan.recv_load.assign(plan.num_receivers, {});
  plan.total_bytes = 0;
  for (const Transfer& t : plan.transfers) {
    int64_t b = t.Bytes();
    bool intra = cost.SenderNode(t.sender) == cost.ReceiverNode(t.receiver, plan.num_senders);
    (intra ? plan.send_load[t.sender].intra_bytes : plan.send_load[t.sender].inter_bytes) += b;
    (intra ? plan.recv_load[t.receiver].intra_bytes : plan.recv_load[t.receiver].inter_bytes) += b;
    plan.total_bytes += b;
  }
  double worst = 0;
  for (const EndpointLoad& l : plan.send_load)
    worst = std::max(worst, cost.Seconds(l.intra_bytes, l.inter_bytes));
  for (const EndpointLoad& l : plan.recv_load)
    worst = std::max(worst, cost.Seconds(l.intra_bytes, l.inter_bytes));
  plan.predicted_s = worst;
}

namespace {

// The distinct sender boxes of one tensor (by_box, in its order), indexed by their start on
// the dimension with the most distinct starts. Boxes partition the tensor, so on that
// dimension a box that overlaps [lo, hi) starts in [lo - longest + 1, hi).
class SenderBoxIndex {
 public:
  explicit SenderBoxIndex(const std::map<Box, int>& by_box) {
    entries_.reserve(by_box.size());
    for (const auto& e : by_box) entries_.push_back(&e);
    if (entries_.empty()) return;
    const int ndim = entries_.front()->first.ndim;
    size_t best = 0;
    for (int d = 0; d < ndim; ++d) {
      std::vector<int64_t> starts;
      starts.reserve(entries_.size());
      for (const auto* e : entries_) starts.push_back(e->first.lo[d]);
      std::sort(starts.begin(), starts.end());
      const size_t distinct = std::unique(starts.begin(), starts.end()) - starts.begin();
      if (distinct > best) best = distinct, dim_ = d;
    }
    order_.resize(entries_.size());
    std::iota(order_.begin(), order_.end(), 0);
    std::sort(order_.begin(), order_.end(), [&](int a, int b) { return Lo(a) < Lo(b); });
    for (const auto* e : entries_) longest_ = std::max(longest_, e->first.hi[dim_] - e->first.lo[dim_]);
  }
  const std::pair<const Box, int>& entry(int i) const { return *entries_[i]; }
  // Indices (in by_box order) of the boxes that may overlap `rb`.
  void Near(const Box& rb, std::vector<int>& out) const {
    out.clear();
    const int64_t from = rb.lo[dim_] - longest_ + 1, to = rb.hi[dim_];
    auto it =
        std::lower_bound(order_.begin(), order_.end(), from, [&](int i, int64_t v) { return Lo(i) < v; });
    for (; it != order_.end() && Lo(*it) < to; ++it) out.push_back(*it);
    std::sort(out.begin(), out.end());
  }

 private:
  int64_t Lo(int i) const { return entries_[i]->first.lo[dim_]; }
  std::vector<const std::pair<const Box, int>*> entries_;
  std::vector<int> order_;  // entries by their start on dim_
  int dim_ = 0;
  int64_t longest_ = 0;
};

}  // namespace

absl::StatusOr<Plan> MakePlan(const Model& model, const Layout& senders, const Layout& receivers,
                              const PlanOptions& options) {
  absl::StatusOr<ShardMap> smap = ShardMap::Build(model, senders);
  if (!smap.ok()) return absl::InvalidArgumentError(absl::StrCat("sender layout: ", smap.status().message()));
  absl::StatusOr<ShardMap> rmap = ShardMap::Build(model, receivers);
  if (!rmap.ok())
    return absl::InvalidArgumentError(absl::StrCat("receiver layout: ", rmap.status().message()));
  const CostModel& cost = options.cost;
  if (cost.nvlink_bytes_per_s <= 0 || cost.nic_bytes_per_s <= 0 || cost.gpus_per_node < 1)
    return absl::InvalidArgumentError("cost model: bandwidths and gpus_per_node must be > 0");

  Plan plan;
  plan.num_senders = smap->Ranks();
  plan.num_receivers = rmap->Ranks();
  const int S = plan.num_senders, R = plan.num_receivers;

  // 1. Pieces: receiver boxes cut by the distinct sender shards (groups of identical holdings).
  std::vector<std::vector<int>> groups;  // holder ranks per group
  std::vector<Piece> pieces;
  for (int p = 0; p < static_cast<int>(model.params.size()); ++p) {
    const Param& param = model.params[p];
    if (options.filter && !options.filter(param)) continue;
    // Holders of each distinct box (identical boxes: DP/EP replicas, replicated TP weights and
    // KV heads); distinct boxes of one layout never overlap, so they partition the tensor.
    std::map<Box, int> by_box;
    for (const Holding& h : smap->Holders(p))
      for (const Box& b : h.boxes) {
        auto [it, added] = by_box.try_emplace(b, static_cast<int>(groups.size()));
        if (added) groups.emplace_back();
        if (groups[it->second].empty() || groups[it->second].back() != h.rank)
          groups[it->second].push_back(h.rank);
      }
    int64_t covered = 0;
    for (const auto& [box, g] : by_box) covered += box.Volume();
    if (covered != param.NumBytes())
      return absl::InvalidArgumentError(absl::StrCat(
          "param '", param.name, "': the sender layout's shards cover ", covered, " of ", param.NumBytes(),
          " bytes (groups of a sender layout must shard each parameter the same way)"));
    // Each receiver box meets only the sender boxes near it: index them along the dimension
    // they are cut most finely on, so that a receiver box visits only the boxes whose range
    // there can overlap its own (large MoE layouts have thousands of boxes per tensor, and
    // trying every pair took minutes). Pieces are made in by_box's order, as before.
    SenderBoxIndex index(by_box);
    std::vector<int> near;
    for (const Holding& rh : rmap->Holders(p))
      for (const Box& rb : rh.boxes) {
        index.Near(rb, near);
        for (int i : near) {
          const auto& [sb, g] = index.entry(i);
          Box piece = Intersect(rb, sb);
          if (piece.Empty()) continue;
          pieces.push_back({p, rh.rank, g, piece, piece.Volume()});
        }
      }
  }

  // 2. Greedy: largest first, to the holder with the earliest predicted finish.
  std::stable_sort(pieces.begin(), pieces.end(),
                   [](const Piece& a, const Piece& b) { return a.bytes > b.bytes; });
  std::vector<EndpointLoad> send(S), recv(R);
  std::vector<int64_t> recv_total(R, 0), recv_local_possible(R, 0);
  std::vector<int64_t> group_demand(groups.size(), 0), group_remote(groups.size(), 0);
  std::vector<char> has_local_receiver(S, 0);
  plan.transfers.reserve(pieces.size());
  for (const Piece& pc : pieces) {
    const int rnode = cost.ReceiverNode(pc.receiver, S);
    const std::vector<int>& holders = groups[pc.group];
    int best = -1;
    double best_score = 0, best_send = 0;
    bool any_local = false;
    for (int h : holders) {
      bool intra = cost.SenderNode(h) == rnode;
      any_local |= intra;
      if (intra) has_local_receiver[h] = 1;
      EndpointLoad s = send[h], r = recv[pc.receiver];
      (intra ? s.intra_bytes : s.inter_bytes) += pc.bytes;
      (intra ? r.intra_bytes : r.inter_bytes) += pc.bytes;
      double st = cost.Seconds(s.intra_bytes, s.inter_bytes);
      double score = std::max(st, cost.Seconds(r.intra_bytes, r.inter_bytes));
      if (best < 0 || score < best_score || (score == best_score && st < best_send)) {
        best = h;
        best_score = score;
        best_send = st;
      }
    }
    bool intra = cost.SenderNode(best) == rnode;
    (intra ? send[best].intra_bytes : send[best].inter_bytes) += pc.bytes;
    (intra ? recv[pc.receiver].intra_bytes : recv[pc.receiver].inter_bytes) += pc.bytes;
    recv_total[pc.receiver] += pc.bytes;
    if (any_local) recv_local_possible[pc.receiver] += pc.bytes;
    group_demand[pc.group] += pc.bytes;
    if (!any_local) group_remote[pc.group] += pc.bytes;
    plan.transfers.push_back({pc.param, best, pc.receiver, pc.box});
  }
  std::sort(plan.transfers.begin(), plan.transfers.end(), [](const Transfer& a, const Transfer& b) {
    if (a.sender != b.sender) return a.sender < b.sender;
    if (a.receiver != b.receiver) return a.receiver < b.receiver;
    if (a.param != b.param) return a.param < b.param;
    return a.box < b.box;
  });
  EvaluatePlan(cost, plan);

  // 3. Lower bound.
  const double nv = cost.nvlink_bytes_per_s, nic = cost.nic_bytes_per_s;
  double lb = 0;
  for (int r = 0; r < R; ++r) {
    double b = recv_total[r], x = recv_local_possible[r];
    lb = std::max(lb, x >= b * nv / (nv + nic) ? b / (nv + nic) : (b - x) / nic);
  }
  // Senders: for every distinct holder set H, the bytes only members of H hold (groups whose
  // holders are a subset of H) must leave through H's summed bandwidth (NIC, plus NVLink for
  // senders with a receiver on their node), and of those the bytes no holder shares a node
  // with their receiver must leave through H's NICs. All senders together is one such set.
  std::map<std::vector<int>, std::pair<int64_t, int64_t>> demand_by_set;  // (all, remote only)
  for (size_t g = 0; g < groups.size(); ++g)
    if (group_demand[g] > 0) {
      auto& d = demand_by_set[groups[g]];
      d.first += group_demand[g];
      d.second += group_remote[g];
    }
  std::vector<int> everyone(S);
  std::iota(everyone.begin(), everyone.end(), 0);
  demand_by_set.try_emplace(everyone, std::pair<int64_t, int64_t>{0, 0});
  auto bandwidth = [&](int s) { return nic + (has_local_receiver[s] ? nv : 0); };
  for (const auto& [set, unused] : demand_by_set) {
    int64_t bytes = 0, remote = 0;
    for (const auto& [sub, d] : demand_by_set)
      if (std::includes(set.begin(), set.end(), sub.begin(), sub.end())) {
        bytes += d.first;
        remote += d.second;
      }
    double bw = 0;
    for (int s : set) bw += bandwidth(s);
    if (bw > 0) lb = std::max(lb, bytes / bw);
    lb = std::max(lb, remote / (set.size() * nic));
  }
  plan.lower_bound_s = lb;
  return plan;
}

}  // namespace skyrl::weight_sync
