// Batched sampling from the policy: temperature, top-p (nucleus) and a cap on new tokens,
// returning the tokens and their log-probabilities under the distribution actually sampled
// from. A fixed seed with the same weights and prompts gives the same output; on a TP group
// every rank calls with the same seed and gets the same tokens (the logits are bitwise the
// same on every rank, see policy.h).
//
// Thread safety: as the Policy (one thread per policy at a time).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "rl/policy/policy.h"

namespace skyrl::rl {

struct SamplingParams {
  double temperature = 1.0;  // 0 = greedy
  double top_p = 1.0;        // (0, 1]
  int max_new_tokens = 8;
};

// InvalidArgument naming generator.sampling_params.<field>.
absl::Status ValidateSamplingParams(const SamplingParams& p);

// Prompts, left-padded to the longest so that every response starts at the same column.
struct PromptBatch {
  torch::Tensor tokens;  // [B, P] int64
  torch::Tensor valid;   // [B, P] bool, false on padding
};
absl::StatusOr<PromptBatch> LeftPad(const std::vector<std::vector<int>>& prompts, int pad_id);

struct Rollout {
  int prompt_len = 0;       // P
  torch::Tensor sequences;  // [B, P + N] int64: prompt then response (pad_id after EOS)
  torch::Tensor valid;      // [B, P + N] bool: real prompt tokens and response tokens
  torch::Tensor response;   // [B, N] int64
  // [B, N] float: log-prob of each sampled token under the sampling distribution
  // (temperature and top-p applied); 0 where mask is 0. Greedy sampling reports the
  // log-prob under the untempered distribution.
  torch::Tensor logprobs;
  torch::Tensor mask;  // [B, N] float: 1 on response tokens up to and including EOS
  std::vector<std::vector<int>> ResponseIds() const;  // row b's response up to EOS
};

// Samples up to max_new_tokens per row; stops early once every row has produced EOS (N is
// then smaller). No gradients. InvalidArgument when prompt + max_new_tokens exceeds the
// model's max_len (naming generator.sampling_params.max_generate_length).
absl::StatusOr<Rollout> Generate(const Policy& policy, const PromptBatch& prompts,
                                 const SamplingParams& params, int eos_id, int pad_id, uint64_t seed);

// Top-p (nucleus) filter over the last dim of `logits` [B, V]: keeps the smallest set of the
// most likely tokens whose probability mass reaches top_p (a token stays when the mass of the
// tokens strictly more likely than it is below top_p, so the most likely always stays) and
// sets the rest to -inf. top_p >= 1 returns the logits unchanged.
torch::Tensor TopPFilter(const torch::Tensor& logits, double top_p);

// Log-probs [B, N] of sequences[:, P:] under the policy with logits divided by
// `temperature` (no top-p: this is what the trainer differentiates). Builds a graph when
// grad mode is on. Throws like Policy::Forward.
torch::Tensor ResponseLogprobs(const Policy& policy, const torch::Tensor& sequences,
                               const torch::Tensor& valid, int prompt_len, double temperature);

}  // namespace skyrl::rl
