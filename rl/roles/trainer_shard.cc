#include "rl/roles/trainer_shard.h"

#include "rl/algo/checkpoint.h"
#include "rl/policy/torch_status.h"

namespace skyrl::rl {

absl::StatusOr<std::unique_ptr<TrainerShard>> TrainerShard::Create(const TrainerShardOptions& options,
                                                                   Collective* comm) {
  if (comm == nullptr) return absl::InvalidArgumentError("TrainerShard: comm is null");
  if (auto s = ValidateTensorParallel(options.model, comm->WorldSize(), "trainer.tp_size"); !s.ok()) return s;
  const NamedTensors full = InitFullParameters(options.model, options.seed);
  auto shard = ShardParameters(options.model, full, comm->WorldSize(), comm->Rank());
  if (!shard.ok()) return shard.status();
  std::unique_ptr<TrainerShard> t(new TrainerShard());
  t->options_ = options;
  t->comm_ = comm;
  auto policy = Policy::Create(options.model, comm, *shard);
  if (!policy.ok()) return policy.status();
  auto reference = Policy::Create(options.model, comm, *shard);
  if (!reference.ok()) return reference.status();
  t->policy_ = std::move(*policy);
  t->reference_ = std::move(*reference);
  auto learner = GrpoLearner::Create(t->policy_.get(), options.grpo, options.optim, options.temperature);
  if (!learner.ok()) return learner.status();
  t->learner_ = std::move(*learner);
  return t;
}

absl::StatusOr<torch::Tensor> TrainerShard::ReferenceLogprobs(const Rollout& rollout) {
  return RunTorch("ReferenceLogprobs", [&]() -> absl::StatusOr<torch::Tensor> {
    torch::NoGradGuard no_grad;
    return ResponseLogprobs(*reference_, rollout.sequences, rollout.valid, rollout.prompt_len,
                            options_.temperature);
  });
}

absl::StatusOr<UpdateStats> TrainerShard::Update(const TrainBatch& batch) {
  auto s = learner_->Update(batch);
  if (s.ok()) ++version_;
  return s;
}

absl::Status TrainerShard::Save(const std::string& dir) {
  return SaveShardCheckpoint(ShardCheckpointPath(dir, comm_->Rank(), comm_->WorldSize()), *policy_,
                             &learner_->optimizer(), version_);
}

absl::Status TrainerShard::Load(const std::string& dir) {
  auto step = LoadShardCheckpoint(ShardCheckpointPath(dir, comm_->Rank(), comm_->WorldSize()), *policy_,
                                  &learner_->optimizer());
  if (!step.ok()) return step.status();
  version_ = *step;
  return absl::OkStatus();
}

}  // namespace skyrl::rl
