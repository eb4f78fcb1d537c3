// One rank of an inference engine: a Policy shard at the engine's own TP, weights tagged with
// the trainer's version, and sleep / wake_up so that a trainer and the engines can share a
// GPU (SkyRL's colocate_all). The actor wrapper (next) turns these methods into actor calls;
// weight sync delivers the shards.
//
// States:   EMPTY --LoadWeights--> AWAKE --Sleep(kKeepWeights)--> ASLEEP(kept) --WakeUp--> AWAKE
//                                   AWAKE --Sleep(kDropWeights)--> ASLEEP(dropped) --WakeUp--> EMPTY
//           (LoadWeights also works while asleep with weights dropped: it stages the new
//           version, and WakeUp then lands in AWAKE.)
// Generate needs AWAKE (FailedPrecondition otherwise, naming the state). Versions only move
// forward: LoadWeights with a version <= the current one is FailedPrecondition.
// On this CPU-only build "keep" means the tensors stay in host memory; on a GPU build it will
// mean offload to host and back.
//
// Thread safety: one thread at a time (the actor's). Does not own `comm` (REQUIRES it outlives
// the engine); all TP ranks of an engine must make the same calls.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "rl/algo/sampler.h"
#include "rl/policy/policy.h"

namespace skyrl::rl {

class GeneratorEngine {
 public:
  enum class State { kEmpty, kAwake, kAsleep };
  enum class SleepLevel { kKeepWeights, kDropWeights };

  static absl::StatusOr<std::unique_ptr<GeneratorEngine>> Create(const PolicyConfig& config,
                                                                 Collective* comm);

  // This rank's shard (ShardParameters at the engine's TP) for trainer version `version`.
  absl::Status LoadWeights(int64_t version, const NamedTensors& shard);
  absl::Status Sleep(SleepLevel level);
  absl::Status WakeUp();

  struct Result {
    Rollout rollout;
    int64_t version = -1;  // the weights that produced it (for async staleness checks)
  };
  absl::StatusOr<Result> Generate(const PromptBatch& prompts, const SamplingParams& params, int eos_id,
                                  int pad_id, uint64_t seed);

  State state() const { return state_; }
  // -1 before the first load.
  int64_t version() const { return version_; }
  static const char* StateName(State s);

 private:
  GeneratorEngine(PolicyConfig c, Collective* comm) : config_(std::move(c)), comm_(comm) {}

  PolicyConfig config_;
  Collective* comm_;
  State state_ = State::kEmpty;
  int64_t version_ = -1;
  std::unique_ptr<Policy> policy_;  // null unless AWAKE or ASLEEP with kept weights
  bool staged_ = false;             // asleep with dropped weights, and a version loaded since
  NamedTensors staged_shard_;
};

}  // namespace skyrl::rl
