#include "weight_sync/plan/layout.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace skyrl::weight_sync {
namespace {

std::vector<int> FirstLayers(const ModelParallel& mp, int num_layers) {
  if (!mp.stage_first_layer.empty()) return mp.stage_first_layer;
  std::vector<int> first(mp.pp);
  int base = num_layers / mp.pp, rem = num_layers % mp.pp, at = 0;
  for (int s = 0; s < mp.pp; ++s) {
    first[s] = at;
    at += base + (s < rem ? 1 : 0);
  }
  return first;
}

// The boxes TP rank t of `tp` holds of parameter p (byte space).
std::vector<Box> TpBoxes(const Param& p, int tp, int t) {
  ByteShape shape = ByteShape::Of(p);
  Box full = Box::Full(shape);
  if (p.split_dim < 0 || tp == 1) return {full};
  const int d = p.split_dim;
  // On the last dimension byte space scales indices by the element size.
  const int64_t scale = (d == shape.ndim - 1) ? ElementSize(p.dtype) : 1;
  std::vector<int64_t> blocks = p.fused.empty() ? std::vector<int64_t>{p.shape[d]} : p.fused;
  std::vector<Box> out;
  int64_t b0 = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const int64_t size = blocks[i];
    const int64_t unit = p.head_rows.empty() ? 0 : p.head_rows[i];
    int64_t lo, hi;
    if (unit > 0 && (size / unit) % tp != 0) {
      // Fewer heads than TP ranks: head h lives on ranks [h * tp/H, (h+1) * tp/H).
      const int64_t heads = size / unit, h = t / (tp / heads);
      lo = b0 + h * unit;
      hi = lo + unit;
    } else {
      const int64_t part = size / tp;
      lo = b0 + t * part;
      hi = lo + part;
    }
    Box b = full;
    b.lo[d] = lo * scale;
    b.hi[d] = hi * scale;
    out.push_back(b);
    b0 += size;
  }
  return out;
}

std::string GroupName(int g) { return absl::StrCat("layout.groups[", g, "]"); }

absl::Status ValidateModelParallel(const Model& model, const ModelParallel& mp, int g) {
  const std::string w = GroupName(g);
  if (mp.tp < 1 || mp.pp < 1 || mp.ep < 1 || mp.replicas < 1)
    return absl::InvalidArgumentError(absl::StrCat(w,
                                                   ": tp, pp, ep and replicas must be >= 1, got tp=", mp.tp,
                                                   " pp=", mp.pp, " ep=", mp.ep, " replicas=", mp.replicas));
  if (mp.pp > 1 && mp.pp > model.num_layers)
    return absl::InvalidArgumentError(
        absl::StrCat(w, ": pp=", mp.pp, " exceeds the model's ", model.num_layers, " layers"));
  if (!mp.stage_first_layer.empty()) {
    if (static_cast<int>(mp.stage_first_layer.size()) != mp.pp)
      return absl::InvalidArgumentError(
          absl::StrCat(w, ".stage_first_layer: ", mp.stage_first_layer.size(), " entries for pp=", mp.pp));
    for (int s = 0; s < mp.pp; ++s) {
      int f = mp.stage_first_layer[s];
      bool ok = (s == 0) ? f == 0 : (f > mp.stage_first_layer[s - 1] && f < model.num_layers);
      if (!ok)
        return absl::InvalidArgumentError(
            absl::StrCat(w, ".stage_first_layer[", s, "]=", f,
                         ": must start at 0 and increase strictly below num_layers=", model.num_layers));
    }
  }
  if (model.num_experts > 0) {
    int spread = mp.experts == ExpertSharding::kEpThenTp ? mp.ep : mp.ep * mp.tp;
    if (model.num_experts % spread != 0)
      return absl::InvalidArgumentError(absl::StrCat(
          w, ": ", model.num_experts, " experts do not divide over ", spread, " expert-parallel ranks"));
  }
  for (const Param& p : model.params) {
    if (p.split_dim < 0 || mp.tp == 1) continue;
    if (p.expert >= 0 && mp.experts == ExpertSharding::kWholeOverAllRanks) continue;
    std::vector<int64_t> blocks = p.fused.empty() ? std::vector<int64_t>{p.shape[p.split_dim]} : p.fused;
    for (size_t i = 0; i < blocks.size(); ++i) {
      const int64_t b = blocks[i], unit = p.head_rows.empty() ? 0 : p.head_rows[i];
      if (unit > 0) {
        const int64_t heads = b / unit;
        if (heads % mp.tp != 0 && mp.tp % heads != 0)
          return absl::InvalidArgumentError(absl::StrCat(w, ": tp=", mp.tp, " and the ", heads,
                                                         " heads of a block of param '", p.name,
                                                         "' do not divide one another"));
        continue;
      }
      if (b % mp.tp != 0)
        return absl::InvalidArgumentError(absl::StrCat(
            w, ": tp=", mp.tp, " does not divide ", p.fused.empty() ? "dim " : "a fused block of dim ",
            p.split_dim, " (size ", b, ") of param '", p.name, "'"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

int StageOf(const ModelParallel& mp, int num_layers, int layer) {
  if (layer == kPreLayers) return 0;
  if (layer == kPostLayers) return mp.pp - 1;
  std::vector<int> first = FirstLayers(mp, num_layers);
  int s = 0;
  while (s + 1 < mp.pp && first[s + 1] <= layer) ++s;
  return s;
}

int Layout::Ranks() const {
  int n = 0;
  for (const LayoutGroup& g : groups) n += std::visit([](const auto& x) { return x.Ranks(); }, g);
  return n;
}

Layout Layout::Engines(int engines, const ModelParallel& engine) {
  Layout l;
  for (int i = 0; i < engines; ++i) l.groups.push_back(engine);
  return l;
}

absl::Status ValidateLayout(const Model& model, const Layout& layout) {
  if (layout.groups.empty()) return absl::InvalidArgumentError("layout.groups is empty");
  for (int g = 0; g < static_cast<int>(layout.groups.size()); ++g) {
    if (const auto* mp = std::get_if<ModelParallel>(&layout.groups[g])) {
      if (absl::Status s = ValidateModelParallel(model, *mp, g); !s.ok()) return s;
    } else {
      const Fsdp& f = std::get<Fsdp>(layout.groups[g]);
      if (f.shards < 1 || f.replicas < 1)
        return absl::InvalidArgumentError(
            absl::StrCat(GroupName(g), ": fsdp shards and replicas must be >= 1"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ShardMap> ShardMap::Build(const Model& model, const Layout& layout) {
  if (absl::Status s = ValidateModel(model); !s.ok()) return s;
  if (absl::Status s = ValidateLayout(model, layout); !s.ok()) return s;
  ShardMap m;
  m.model_ = &model;
  m.layout_ = layout;
  m.flat_offset_.resize(layout.groups.size());
  m.flat_shard_bytes_.resize(layout.groups.size());
  for (size_t g = 0; g < layout.groups.size(); ++g) {
    m.group_first_rank_.push_back(m.ranks_);
    m.ranks_ += std::visit([](const auto& x) { return x.Ranks(); }, layout.groups[g]);
    if (const auto* f = std::get_if<Fsdp>(&layout.groups[g])) {
      int64_t at = 0;
      for (const Param& p : model.params) {
        m.flat_offset_[g].push_back(at);
        at += p.NumBytes();
      }
      m.flat_shard_bytes_[g] = (at + f->shards - 1) / f->shards;
    }
  }
  return m;
}

void ShardMap::AddGroupHoldings(int g, int pi, std::vector<Holding>& out) const {
  const Param& p = model_->params[pi];
  const int first = group_first_rank_[g];
  if (const auto* mp = std::get_if<ModelParallel>(&layout_.groups[g])) {
    const int stage = StageOf(*mp, model_->num_layers, p.layer);
    const int per_replica = mp->tp * mp->pp * mp->ep;
    auto rank_of = [&](int rep, int e, int t) {
      return first + rep * per_replica + (stage * mp->ep + e) * mp->tp + t;
    };
    for (int rep = 0; rep < mp->replicas; ++rep) {
      if (p.expert >= 0 && mp->experts == ExpertSharding::kWholeOverAllRanks) {
        int per_rank = model_->num_experts / (mp->ep * mp->tp);
        int j = p.expert / per_rank;
        out.push_back({rank_of(rep, j / mp->tp, j % mp->tp), {Box::Full(ByteShape::Of(p))}});
        continue;
      }
      int e_lo = 0, e_hi = mp->ep;
      if (p.expert >= 0) {
        e_lo = p.expert / (model_->num_experts / mp->ep);
        e_hi = e_lo + 1;
      }
      for (int e = e_lo; e < e_hi; ++e)
        for (int t = 0; t < mp->tp; ++t) out.push_back({rank_of(rep, e, t), TpBoxes(p, mp->tp, t)});
    }
    return;
  }
  const Fsdp& f = std::get<Fsdp>(layout_.groups[g]);
  const int64_t begin = flat_offset_[g][pi], end = begin + p.NumBytes();
  const int64_t sz = flat_shard_bytes_[g];
  if (end <= begin) return;
  ByteShape shape = ByteShape::Of(p);
  for (int rep = 0; rep < f.replicas; ++rep)
    for (int64_t i = begin / sz; i <= (end - 1) / sz; ++i) {
      int64_t lo = std::max(begin, i * sz), hi = std::min(end, (i + 1) * sz);
      out.push_back(
          {first + rep * f.shards + static_cast<int>(i), FlatRangeToBoxes(shape, lo - begin, hi - begin)});
    }
}

std::vector<Holding> ShardMap::Holders(int p) const {
  std::vector<Holding> out;
  for (int g = 0; g < static_cast<int>(layout_.groups.size()); ++g) AddGroupHoldings(g, p, out);
  return out;
}

std::vector<Box> ShardMap::BoxesOf(int p, int rank) const {
  // Only the group containing `rank` matters.
  int g = static_cast<int>(std::upper_bound(group_first_rank_.begin(), group_first_rank_.end(), rank) -
                           group_first_rank_.begin()) -
          1;
  if (g < 0) return {};
  std::vector<Holding> hs;
  AddGroupHoldings(g, p, hs);
  for (Holding& h : hs)
    if (h.rank == rank) return std::move(h.boxes);
  return {};
}

int64_t ShardMap::ShardBytes(int rank) const {
  int64_t n = 0;
  for (int p = 0; p < static_cast<int>(model_->params.size()); ++p)
    for (const Box& b : BoxesOf(p, rank)) n += b.Volume();
  return n;
}

}  // namespace skyrl::weight_sync
