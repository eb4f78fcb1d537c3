// fp8 rollout weights during a sync. The rollout model is derived from the trainer's: each bf16
// parameter the filter selects becomes an fp8 e4m3 tensor of the same shape and sharding plus a
// u8 E8M0 scale tensor "<name>.mx_scale" of shape [..., last / 32] (MXFP8-style, see mxfp8.h);
// the rest are unchanged. Each sender converts its own shard once (ConvertShard) and the plan of
// the derived model moves fp8 bytes: half the bf16 traffic plus 1/32 for scales, with no change
// to the planner or the transports.
//
// Because 32-element blocks never cross a row and shard boundaries on the last dimension must
// fall on block boundaries (checked), a receiver's bytes equal the slice of the whole model
// converted at once, whatever the layouts.
//
// Plain values; thread-compatible.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "weight_sync/plan/model.h"
#include "weight_sync/plan/schedule.h"

namespace skyrl::weight_sync {

struct Fp8Conversion {
  enum class Kind { kCopy, kData, kScales };
  Model model;              // the rollout model
  std::vector<int> source;  // per rollout parameter: index in the trainer model
  std::vector<Kind> kind;   // per rollout parameter
};

// InvalidArgument naming the parameter when a selected one is not bf16 or its last dimension is
// not a multiple of 32.
absl::StatusOr<Fp8Conversion> MakeFp8Conversion(const Model& trainer, const ParamFilter& convert);

// Converts a rank's local shard of the trainer model (`in`, laid out by `from`) into its local
// shard of the rollout model (`out`, laid out by `to`; same layout over the other model).
// InvalidArgument when a shard boundary cuts a 32-element block (name and box given) or sizes
// disagree.
absl::Status ConvertShard(const Model& trainer, const Fp8Conversion& conv, const ShardLayout& from,
                          const ShardLayout& to, absl::Span<const uint8_t> in, absl::Span<uint8_t> out);

}  // namespace skyrl::weight_sync
