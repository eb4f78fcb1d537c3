#include "weight_sync/plan/schedule.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace skyrl::weight_sync {

ShardLayout ShardLayout::Of(const Model& model, const ShardMap& map, int rank) {
  ShardLayout l;
  l.entry_of_param_.assign(model.params.size(), -1);
  for (int p = 0; p < static_cast<int>(model.params.size()); ++p) {
    std::vector<Box> boxes = map.BoxesOf(p, rank);
    if (boxes.empty()) continue;
    Entry e;
    e.param = p;
    for (const Box& b : boxes) {
      e.offsets.push_back(l.bytes_);
      l.bytes_ += b.Volume();
    }
    e.boxes = std::move(boxes);
    l.entry_of_param_[p] = static_cast<int>(l.entries_.size());
    l.entries_.push_back(std::move(e));
  }
  return l;
}

const ShardLayout::Entry* ShardLayout::Find(int p) const {
  if (p < 0 || p >= static_cast<int>(entry_of_param_.size()) || entry_of_param_[p] < 0) return nullptr;
  return &entries_[entry_of_param_[p]];
}

namespace {

absl::StatusOr<RankSchedule> Schedule(const Plan& plan, const ShardLayout& layout, int rank, bool sending) {
  RankSchedule s;
  s.rank = rank;
  s.shard_bytes = layout.Bytes();
  // Transfers are sorted by (sender, receiver, ...): a receiver's view needs its own order by
  // sender, which the sort already gives when filtered.
  for (const Transfer& t : plan.transfers) {
    if ((sending ? t.sender : t.receiver) != rank) continue;
    int peer = sending ? t.receiver : t.sender;
    if (s.peers.empty() || s.peers.back().peer != peer) {
      s.peers.push_back({});
      s.peers.back().peer = peer;
    }
    PeerStream& ps = s.peers.back();
    bool ok = layout.ForEachLocalRun(t.param, t.box, [&](int64_t off, int64_t len) {
      if (!ps.runs.empty() && ps.runs.back().offset + ps.runs.back().length == off)
        ps.runs.back().length += len;
      else
        ps.runs.push_back({off, len});
      ps.bytes += len;
    });
    if (!ok)
      return absl::InvalidArgumentError(absl::StrCat(sending ? "sender " : "receiver ", rank,
                                                     " does not hold box ", t.box.DebugString(),
                                                     " of param #", t.param, " named by the plan"));
  }
  return s;
}

}  // namespace

absl::StatusOr<RankSchedule> SendSchedule(const Plan& plan, const ShardLayout& layout, int sender) {
  return Schedule(plan, layout, sender, true);
}

absl::StatusOr<RankSchedule> ReceiveSchedule(const Plan& plan, const ShardLayout& layout, int receiver) {
  return Schedule(plan, layout, receiver, false);
}

void CutShard(const Model& model, const ShardLayout& layout,
              const std::vector<absl::Span<const uint8_t>>& full, absl::Span<uint8_t> out) {
  for (const ShardLayout::Entry& e : layout.entries()) {
    if (e.param >= static_cast<int>(full.size()) || full[e.param].empty()) continue;
    const uint8_t* src = full[e.param].data();
    const Box whole = Box::Full(ByteShape::Of(model.params[e.param]));
    for (size_t i = 0; i < e.boxes.size(); ++i) {
      // The box's runs in the full tensor, in row-major order of the box, are its consecutive
      // local bytes.
      int64_t at = e.offsets[i];
      ForEachRun(whole, e.boxes[i], 0, [&](int64_t off, int64_t len) {
        std::memcpy(out.data() + at, src + off, len);
        at += len;
      });
    }
  }
}

}  // namespace skyrl::weight_sync
