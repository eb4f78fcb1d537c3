#include "rl/roles/generator_engine.h"

#include "absl/strings/str_cat.h"

namespace skyrl::rl {

const char* GeneratorEngine::StateName(State s) {
  switch (s) {
    case State::kEmpty:
      return "EMPTY (no weights loaded)";
    case State::kAwake:
      return "AWAKE";
    case State::kAsleep:
      return "ASLEEP";
  }
  return "?";
}

absl::StatusOr<std::unique_ptr<GeneratorEngine>> GeneratorEngine::Create(const PolicyConfig& config,
                                                                         Collective* comm) {
  if (comm == nullptr) return absl::InvalidArgumentError("GeneratorEngine: comm is null");
  if (auto s = ValidateTensorParallel(config, comm->WorldSize(), "generator.tensor_parallel_size"); !s.ok())
    return s;
  return std::unique_ptr<GeneratorEngine>(new GeneratorEngine(config, comm));
}

absl::Status GeneratorEngine::LoadWeights(int64_t version, const NamedTensors& shard) {
  if (version <= version_) {
    return absl::FailedPreconditionError(
        absl::StrCat("LoadWeights: version ", version, " is not newer than the loaded version ", version_));
  }
  if (state_ == State::kAsleep && policy_ == nullptr) {
    // Weights were dropped: check the shard now, keep it until WakeUp.
    auto check = Policy::Create(config_, comm_, shard);
    if (!check.ok()) return check.status();
    staged_shard_ = shard;
    staged_ = true;
    version_ = version;
    return absl::OkStatus();
  }
  if (policy_ == nullptr) {
    auto p = Policy::Create(config_, comm_, shard);
    if (!p.ok()) return p.status();
    policy_ = std::move(*p);
  } else if (auto s = policy_->LoadShard(shard); !s.ok()) {
    return s;
  }
  version_ = version;
  if (state_ == State::kEmpty) state_ = State::kAwake;
  return absl::OkStatus();
}

absl::Status GeneratorEngine::Sleep(SleepLevel level) {
  if (state_ != State::kAwake) {
    return absl::FailedPreconditionError(absl::StrCat("Sleep: engine is ", StateName(state_), ", not AWAKE"));
  }
  if (level == SleepLevel::kDropWeights) policy_.reset();
  state_ = State::kAsleep;
  return absl::OkStatus();
}

absl::Status GeneratorEngine::WakeUp() {
  if (state_ != State::kAsleep) {
    return absl::FailedPreconditionError(
        absl::StrCat("WakeUp: engine is ", StateName(state_), ", not ASLEEP"));
  }
  if (policy_ == nullptr) {
    if (!staged_) {
      state_ = State::kEmpty;  // the weights are gone: the next LoadWeights brings it back
      return absl::OkStatus();
    }
    auto p = Policy::Create(config_, comm_, staged_shard_);
    if (!p.ok()) return p.status();
    policy_ = std::move(*p);
    staged_shard_.clear();
    staged_ = false;
  }
  state_ = State::kAwake;
  return absl::OkStatus();
}

absl::StatusOr<GeneratorEngine::Result> GeneratorEngine::Generate(const PromptBatch& prompts,
                                                                  const SamplingParams& params, int eos_id,
                                                                  int pad_id, uint64_t seed) {
  if (state_ != State::kAwake) {
    return absl::FailedPreconditionError(
        absl::StrCat("Generate: engine is ", StateName(state_), ", not AWAKE"));
  }
  auto r = rl::Generate(*policy_, prompts, params, eos_id, pad_id, seed);
  if (!r.ok()) return r.status();
  return Result{std::move(*r), version_};
}

}  // namespace skyrl::rl
