// One rank of the trainer's TP group: this rank's shard of the policy, of the frozen
// reference (the initial policy), and the AdamW state; the GRPO update; weights out for weight
// sync; sharded checkpoints. The actor wrapper (next) turns these methods into actor calls.
//
// version() counts updates: 0 for the initial weights, +1 per Update. Engines tag their
// samples with the version they generated with (GeneratorEngine), which is what async mode's
// staleness bound compares against.
//
// Thread safety: one thread at a time (the actor's). Does not own `comm` (REQUIRES it outlives
// the shard); every rank of the group must make the same calls with the same data.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "rl/algo/grpo.h"
#include "rl/algo/sampler.h"
#include "rl/policy/policy.h"

namespace skyrl::rl {

struct TrainerShardOptions {
  PolicyConfig model;
  GrpoParams grpo;
  OptimParams optim;
  double temperature = 1.0;  // the sampling temperature the log-probs are taken at
  uint64_t seed = 1;         // initial weights: InitFullParameters(model, seed)
};

class TrainerShard {
 public:
  static absl::StatusOr<std::unique_ptr<TrainerShard>> Create(const TrainerShardOptions& options,
                                                              Collective* comm);

  // The reference policy's log-probs of the rollout's responses, [B, N].
  absl::StatusOr<torch::Tensor> ReferenceLogprobs(const Rollout& rollout);
  // One GRPO update (GrpoLearner::Update); the version moves forward by one.
  absl::StatusOr<UpdateStats> Update(const TrainBatch& batch);
  // Copies of this rank's current parameter shard (split per PolicyParamSpecs at the trainer's
  // TP), for weight sync.
  NamedTensors ExportShard() const { return policy_->StateCopy(); }
  int64_t version() const { return version_; }

  // ShardCheckpointPath(dir, rank, tp), with the version as the step.
  absl::Status Save(const std::string& dir);
  // Restores weights, AdamW state and version. Errors as LoadShardCheckpoint.
  absl::Status Load(const std::string& dir);

  const Policy& policy() const { return *policy_; }

 private:
  TrainerShard() = default;
  TrainerShardOptions options_;
  Collective* comm_ = nullptr;
  std::unique_ptr<Policy> policy_;
  std::unique_ptr<Policy> reference_;
  std::unique_ptr<GrpoLearner> learner_;
  int64_t version_ = 0;
};

}  // namespace skyrl::rl
