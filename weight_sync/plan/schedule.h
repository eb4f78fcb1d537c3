// From a plan to what one rank's transport does: for each peer, the byte runs of the rank's
// local shard buffer in wire order. Transports see only schedules and buffers, never models.
//
// A rank's local shard buffer holds the parameters it has, in model order, each as its boxes
// concatenated (row-major each): ShardLayout says where. Both ends enumerate a transfer's box
// in row-major order, so the sender's runs and the receiver's runs for a peer describe the same
// byte stream, cut at different places.
//
// Plain values; thread-compatible.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "weight_sync/plan/layout.h"
#include "weight_sync/plan/transfer_planner.h"

namespace skyrl::weight_sync {

class ShardLayout {
 public:
  struct Entry {
    int param = -1;
    std::vector<Box> boxes;
    std::vector<int64_t> offsets;  // local offset of each box
  };
  static ShardLayout Of(const Model& model, const ShardMap& map, int rank);

  int64_t Bytes() const { return bytes_; }
  const std::vector<Entry>& entries() const { return entries_; }
  // The entry of parameter p, or nullptr when the rank holds none of it.
  const Entry* Find(int p) const;
  // Calls fn(local_offset, length) for the runs of `box` (byte space of parameter p) in this
  // rank's buffer, in row-major order of `box`. False when no single held box contains it.
  template <typename Fn>
  bool ForEachLocalRun(int p, const Box& box, Fn&& fn) const;

 private:
  std::vector<int> entry_of_param_;
  std::vector<Entry> entries_;
  int64_t bytes_ = 0;
};

struct PeerStream {
  int peer = 0;                // receiver rank (for a sender) or sender rank (for a receiver)
  std::vector<Interval> runs;  // local buffer runs, in wire order
  int64_t bytes = 0;
};

struct RankSchedule {
  int rank = 0;
  int64_t shard_bytes = 0;        // size of the rank's local buffer
  std::vector<PeerStream> peers;  // by peer rank
};

// The sender's and the receiver's schedules. InvalidArgument when a transfer's box is not held
// whole by the rank (a plan from other layouts).
absl::StatusOr<RankSchedule> SendSchedule(const Plan& plan, const ShardLayout& layout, int sender);
absl::StatusOr<RankSchedule> ReceiveSchedule(const Plan& plan, const ShardLayout& layout, int receiver);

// Copies parameter bytes into a rank's local buffer: `full[p]` is parameter p's full tensor
// (row-major bytes), or empty to skip it. Tests and examples use it to cut shards.
// REQUIRES: out.size() >= layout.Bytes(); full[p].size() == the parameter's bytes when set.
void CutShard(const Model& model, const ShardLayout& layout,
              const std::vector<absl::Span<const uint8_t>>& full, absl::Span<uint8_t> out);

// ---- implementation of the template ----
template <typename Fn>
bool ShardLayout::ForEachLocalRun(int p, const Box& box, Fn&& fn) const {
  const Entry* e = Find(p);
  if (e == nullptr) return false;
  for (size_t i = 0; i < e->boxes.size(); ++i)
    if (Intersect(box, e->boxes[i]) == box) {
      ForEachRun(e->boxes[i], box, e->offsets[i], fn);
      return true;
    }
  return false;
}

}  // namespace skyrl::weight_sync
