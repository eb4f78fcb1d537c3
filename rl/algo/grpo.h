// GRPO (group relative policy optimisation) as SkyRL and DeepSeekMath define it:
//
//   advantage  A_i = (r_i - mean(r_group)) / (std(r_group) + eps)   (one value per sample,
//              broadcast over its response tokens; std is the unbiased sample std)
//   ratio      rho_t = exp(logp_t - logp_old_t)
//   policy     L_pg = -min(rho_t A, clip(rho_t, 1 - eps_low, 1 + eps_high) A)
//   KL (k3)    k3_t = exp(logp_ref_t - logp_t) - (logp_ref_t - logp_t) - 1   (>= 0, unbiased)
//   loss       mean over response tokens of L_pg + beta * k3 (token mean over the batch), or
//              the mean over sequences of each sequence's token mean (sequence mean).
//
// GrpoLearner owns one rank's optimiser state and runs the update of one step over a batch;
// the same code serves a TP shard (the Collective clips by the full model's norm) and the
// single-process run. Thread safety: one thread per learner (its rank's).
#pragma once

#include <torch/torch.h>

#include <memory>

#include "absl/status/statusor.h"
#include "rl/policy/policy.h"

namespace skyrl::rl {

enum class LossReduction { kTokenMean, kSequenceMean };

struct GrpoParams {
  int group_size = 8;
  double clip_low = 0.2;
  double clip_high = 0.2;
  double kl_coef = 0.01;  // beta; 0 disables the reference model's term
  double advantage_eps = 1e-6;
  LossReduction reduction = LossReduction::kTokenMean;
};

struct OptimParams {
  double lr = 1e-3;
  double weight_decay = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.99;
  double max_grad_norm = 1.0;  // 0 disables clipping
  int update_epochs = 1;       // passes over the step's batch
  int mini_batches = 1;        // optimiser steps per pass
};

// rewards: [N * G] float, groups contiguous. Returns [N * G] float. Throws c10::Error when
// the size is not a multiple of group_size. A group whose rewards are all equal gets zero
// advantages (it carries no signal).
torch::Tensor GroupAdvantages(const torch::Tensor& rewards, int group_size, double eps);

struct LossTerms {
  torch::Tensor loss;        // scalar, differentiable
  double policy_loss = 0;    // reduced like the loss
  double kl = 0;             // mean k3 over response tokens
  double clip_fraction = 0;  // share of tokens whose ratio was clipped (the min took the clip)
  double ratio_mean = 0;
};

// logprobs (with grad), old_logprobs and ref_logprobs: [B, N]; advantages [B]; mask [B, N]
// (1 on response tokens). Throws c10::Error on shape mismatch.
LossTerms GrpoLoss(const torch::Tensor& logprobs, const torch::Tensor& old_logprobs,
                   const torch::Tensor& ref_logprobs, const torch::Tensor& advantages,
                   const torch::Tensor& mask, const GrpoParams& params);

// Scales the gradients of `policy` in place so that the global L2 norm over the *whole*
// model is at most max_norm (no-op when max_norm <= 0): split parameters' squared norms are
// all-reduced over the TP group, replicated ones counted once. Returns the norm before
// clipping. Every rank of the group must call it.
absl::StatusOr<double> ClipGradNormTensorParallel(const Policy& policy, double max_norm);

// One step's training data, shared by every rank of a TP group.
struct TrainBatch {
  int prompt_len = 0;
  torch::Tensor sequences;     // [B, P + N] int64
  torch::Tensor valid;         // [B, P + N] bool
  torch::Tensor mask;          // [B, N] float
  torch::Tensor advantages;    // [B]
  torch::Tensor ref_logprobs;  // [B, N]; ignored when kl_coef == 0
  // [B, N], optional: the behaviour policy's log-probs (the engine's, Rollout::logprobs, valid
  // as such when top_p is 1). Async mode sets them so the ratio corrects for samples from
  // older weights; undefined: recomputed from the current policy before the first update.
  torch::Tensor old_logprobs;
};

struct UpdateStats {
  double loss = 0, policy_loss = 0, kl = 0, clip_fraction = 0, grad_norm = 0;
  int optimizer_steps = 0;
};

class GrpoLearner {
 public:
  // Does not own `policy`; REQUIRES it outlives the learner. Validates the parameters
  // (InvalidArgument naming trainer.algorithm.<field>).
  static absl::StatusOr<std::unique_ptr<GrpoLearner>> Create(Policy* policy, GrpoParams grpo,
                                                             OptimParams optim, double temperature);

  // The old log-probs are batch.old_logprobs when given, else the policy's before the first
  // update (recomputed, so the first ratio is exactly 1); then update_epochs x mini_batches
  // AdamW steps, each with global-norm clipping. Returns averages over the optimiser steps.
  absl::StatusOr<UpdateStats> Update(const TrainBatch& batch);

  torch::optim::AdamW& optimizer() { return *optimizer_; }
  Policy& policy() { return *policy_; }

 private:
  GrpoLearner(Policy* p, GrpoParams g, OptimParams o, double t)
      : policy_(p), grpo_(g), optim_(o), temperature_(t) {}
  Policy* policy_;
  GrpoParams grpo_;
  OptimParams optim_;
  double temperature_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
};

// InvalidArgument naming trainer.algorithm.<field>.
absl::Status ValidateGrpoParams(const GrpoParams& g);
absl::Status ValidateOptimParams(const OptimParams& o);

}  // namespace skyrl::rl
