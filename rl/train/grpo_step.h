// The pieces of one GRPO step that every driver shares: the single-process loop
// (local_trainer.h) uses them, and the distributed job must too, so that both compute the
// same thing by construction (issue 6's equivalence test). Between the pieces sit the roles:
//
//   prompts = MakePrompts(task, rng)                     driver
//   rollout = Generate(policy, prompts.batch, ...)       generator engine(s)
//   scored  = ScoreRollout(task, prompts, rollout)       reward
//   ref     = ResponseLogprobs(reference, rollout...)    reference
//   batch   = MakeTrainBatch(rollout, scored, ref, G)    driver
//   learner.Update(batch)                                trainer shards
//
// Seeds: see PromptRngSeed and SamplerSeed. Rollouts and batches cross processes as bytes (Encode*/Decode*).
// Pure functions; thread-compatible.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rl/algo/grpo.h"
#include "rl/algo/sampler.h"
#include "rl/tasks/tasks.h"

namespace skyrl::rl {

struct PromptSet {
  std::vector<Example> examples;  // one per sample: prompt p's example repeated group_size times
  PromptBatch batch;              // left-padded token ids, groups contiguous
};

// `prompts` examples from `task`, each repeated `group_size` times.
absl::StatusOr<PromptSet> MakePrompts(const Task& task, const TaskOptions& options, int prompts,
                                      int group_size, std::mt19937_64& rng);

struct Scored {
  std::vector<float> rewards;  // one per sample
  double mean_reward = 0;
  double exact_fraction = 0;  // share of rewards >= 1
  int64_t response_tokens = 0;
};

// Decodes each response up to EOS and scores it against its example.
// InvalidArgument when the counts disagree.
absl::StatusOr<Scored> ScoreRollout(const Task& task, const std::vector<Example>& examples,
                                    const Rollout& rollout);

// Group advantages from the rewards, plus the rollout's tensors and the reference log-probs
// (may be undefined when kl_coef is 0).
absl::StatusOr<TrainBatch> MakeTrainBatch(const Rollout& rollout, const Scored& scored,
                                          const torch::Tensor& ref_logprobs, const GrpoParams& grpo);

// The run's seeds: the prompt generator is mt19937_64(PromptRngSeed(seed)); step s samples
// with SamplerSeed(seed, s).
uint64_t PromptRngSeed(uint64_t seed);
uint64_t SamplerSeed(uint64_t seed, int step);

// Wire forms (EncodeTensors underneath). DataLoss when the bytes are not one.
absl::StatusOr<std::string> EncodeRollout(const Rollout& r);
absl::StatusOr<Rollout> DecodeRollout(const std::string& bytes);
absl::StatusOr<std::string> EncodeTrainBatch(const TrainBatch& b);
absl::StatusOr<TrainBatch> DecodeTrainBatch(const std::string& bytes);

// Several engines: the prompt batch is split by whole groups, as evenly as possible (engine e
// gets groups [e * P / E, (e + 1) * P / E)), engine e samples with EngineSeed(seed, step, e)
// (engine 0's is SamplerSeed's, so one engine is the single-engine run), and the rollouts are
// concatenated back in engine order, right-padded to the longest response (pad_id, mask 0).
struct PromptSlice {
  int64_t begin = 0, end = 0;  // sample rows [begin, end)
  PromptBatch batch;
  std::vector<Example> examples;
};
std::vector<PromptSlice> SplitPrompts(const PromptSet& prompts, int group_size, int engines);
uint64_t EngineSeed(uint64_t seed, int step, int engine);
// InvalidArgument when the prompt lengths differ.
absl::StatusOr<Rollout> ConcatRollouts(const std::vector<Rollout>& parts, int pad_id);

}  // namespace skyrl::rl
