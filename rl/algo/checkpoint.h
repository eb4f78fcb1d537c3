// Sharded checkpoints: one file per TP rank, holding that rank's parameter shard (by name),
// the AdamW state, the step and the facts needed to refuse a mismatched load (tp size, rank,
// model shape). Files are LibTorch archives (torch::serialize).
//
// Not thread-safe with respect to the policy and optimiser it reads or writes (call from
// their rank's thread).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "rl/policy/policy.h"

namespace torch::optim {
class Optimizer;
}

namespace skyrl::rl {

// "<dir>/rank-<rank>-of-<tp>.pt"
std::string ShardCheckpointPath(const std::string& dir, int rank, int tp);

// Writes atomically (to a temporary name, then rename). `optimizer` may be null.
absl::Status SaveShardCheckpoint(const std::string& path, const Policy& policy,
                                 torch::optim::Optimizer* optimizer, int64_t step);

// Loads into `policy` (and `optimizer` when not null) and returns the step.
// FailedPrecondition naming the field when the file was written for another tp size, rank or
// model shape; NotFound / DataLoss when the file is missing or unreadable.
absl::StatusOr<int64_t> LoadShardCheckpoint(const std::string& path, Policy& policy,
                                            torch::optim::Optimizer* optimizer);

// Named tensors to bytes and back (a LibTorch archive in memory), for actor calls that carry
// tensors: a TrainBatch to a trainer shard, a Rollout back from an engine, a weight shard.
// Names, order, dtypes and shapes survive; DataLoss when the bytes are not such an archive.
absl::StatusOr<std::string> EncodeTensors(const NamedTensors& tensors);
absl::StatusOr<NamedTensors> DecodeTensors(const std::string& bytes);

}  // namespace skyrl::rl
