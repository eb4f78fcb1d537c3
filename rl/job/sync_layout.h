// The policy as weight_sync sees it: a weight_sync::Model from PolicyParamSpecs (float32;
// replicated parameters split_dim -1, fused QKV / gate-up blocks as weight_sync/plan/hf_params.h
// builds them), the plan from the trainer's TP layout to `engines` TP-1 engines, and the shards
// as flat byte buffers in ShardLayout order (parameters in model order, each rank's piece
// row-major; for a TP rank that is exactly its ShardParameters tensors flattened, as the
// sharding test checks).
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "rl/policy/policy.h"
#include "weight_sync/plan/prepared_sync.h"

namespace skyrl::rl {

weight_sync::Model PolicySyncModel(const PolicyConfig& c);
// Receivers: `engines` engines of `engine_tp` ranks each; engine e's rank r is receiver
// e * engine_tp + r.
absl::StatusOr<std::unique_ptr<weight_sync::PreparedSync>> MakePolicySync(const PolicyConfig& c,
                                                                          int trainer_tp, int engines,
                                                                          int engine_tp = 1);
// A shard's tensors (model order) as one float32 byte buffer.
std::vector<uint8_t> FlattenShard(const NamedTensors& shard);
// A TP rank's buffer (of `tp`; 1: the full model) back to its named shard tensors.
// InvalidArgument when the size is wrong.
absl::StatusOr<NamedTensors> UnflattenShard(const PolicyConfig& c, int tp, absl::Span<const uint8_t> bytes);

}  // namespace skyrl::rl
