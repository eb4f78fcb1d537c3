#include "rl/algo/grpo.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "rl/algo/sampler.h"
#include "rl/policy/torch_status.h"

namespace skyrl::rl {
namespace {

absl::Status Field(bool ok, absl::string_view field, absl::string_view want, double got) {
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("trainer.algorithm.", field, ": must be ", want, ", got ", got));
}

}  // namespace

absl::Status ValidateGrpoParams(const GrpoParams& g) {
  for (const absl::Status& s : {
           Field(g.group_size >= 2, "group_size", ">= 2 (advantages compare samples of a prompt)",
                 g.group_size),
           Field(g.clip_low >= 0 && g.clip_low < 1, "eps_clip_low", "in [0, 1)", g.clip_low),
           Field(g.clip_high >= 0 && std::isfinite(g.clip_high), "eps_clip_high", ">= 0", g.clip_high),
           Field(g.kl_coef >= 0 && std::isfinite(g.kl_coef), "kl_coef", ">= 0", g.kl_coef),
           Field(g.advantage_eps > 0 && std::isfinite(g.advantage_eps), "advantage_eps", "> 0",
                 g.advantage_eps),
       }) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ValidateOptimParams(const OptimParams& o) {
  for (const absl::Status& s : {
           Field(o.lr > 0 && std::isfinite(o.lr), "lr", "> 0", o.lr),
           Field(o.weight_decay >= 0 && std::isfinite(o.weight_decay), "weight_decay", ">= 0",
                 o.weight_decay),
           Field(o.beta1 >= 0 && o.beta1 < 1, "beta1", "in [0, 1)", o.beta1),
           Field(o.beta2 >= 0 && o.beta2 < 1, "beta2", "in [0, 1)", o.beta2),
           Field(o.max_grad_norm >= 0 && std::isfinite(o.max_grad_norm), "max_grad_norm", ">= 0",
                 o.max_grad_norm),
           Field(o.update_epochs >= 1, "update_epochs", ">= 1", o.update_epochs),
           Field(o.mini_batches >= 1, "mini_batches", ">= 1", o.mini_batches),
       }) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

torch::Tensor GroupAdvantages(const torch::Tensor& rewards, int group_size, double eps) {
  TORCH_CHECK(rewards.dim() == 1 && group_size >= 1 && rewards.size(0) % group_size == 0,
              "rewards must be [N * group_size], got ", rewards.sizes(), " with group_size ", group_size);
  torch::Tensor r = rewards.to(torch::kFloat32).view({-1, group_size});
  torch::Tensor mean = r.mean(1, /*keepdim=*/true);
  torch::Tensor std =
      group_size > 1 ? r.std(1, /*unbiased=*/true, /*keepdim=*/true) : torch::zeros_like(mean);
  return ((r - mean) / (std + eps)).view({-1});
}

LossTerms GrpoLoss(const torch::Tensor& logprobs, const torch::Tensor& old_logprobs,
                   const torch::Tensor& ref_logprobs, const torch::Tensor& advantages,
                   const torch::Tensor& mask, const GrpoParams& params) {
  TORCH_CHECK(
      logprobs.dim() == 2 && old_logprobs.sizes() == logprobs.sizes() && mask.sizes() == logprobs.sizes(),
      "logprobs, old_logprobs and mask must be [B, N] alike");
  TORCH_CHECK(advantages.dim() == 1 && advantages.size(0) == logprobs.size(0), "advantages must be [B]");
  const torch::Tensor m = mask.to(torch::kFloat32);
  const torch::Tensor adv = advantages.to(torch::kFloat32).unsqueeze(1);
  torch::Tensor ratio = torch::exp(logprobs - old_logprobs);
  torch::Tensor unclipped = ratio * adv;
  torch::Tensor clipped = torch::clamp(ratio, 1.0 - params.clip_low, 1.0 + params.clip_high) * adv;
  torch::Tensor pg = -torch::min(unclipped, clipped);
  torch::Tensor per_token = pg;
  torch::Tensor k3 = torch::zeros_like(logprobs);
  if (params.kl_coef > 0 || ref_logprobs.defined()) {
    TORCH_CHECK(ref_logprobs.defined() && ref_logprobs.sizes() == logprobs.sizes(),
                "ref_logprobs must be [B, N]");
    torch::Tensor d = ref_logprobs - logprobs;
    k3 = torch::exp(d) - d - 1;
    per_token = pg + params.kl_coef * k3;
  }
  const torch::Tensor tokens = m.sum().clamp_min(1);
  auto reduce = [&](const torch::Tensor& t) {
    if (params.reduction == LossReduction::kTokenMean) return (t * m).sum() / tokens;
    torch::Tensor per_seq = (t * m).sum(1) / m.sum(1).clamp_min(1);
    return per_seq.mean();
  };
  LossTerms out;
  out.loss = reduce(per_token);
  torch::NoGradGuard no_grad;
  out.policy_loss = reduce(pg).item<double>();
  out.kl = ((k3 * m).sum() / tokens).item<double>();
  out.clip_fraction = (((clipped < unclipped).to(torch::kFloat32) * m).sum() / tokens).item<double>();
  out.ratio_mean = ((ratio * m).sum() / tokens).item<double>();
  return out;
}

absl::StatusOr<double> ClipGradNormTensorParallel(const Policy& policy, double max_norm) {
  return RunTorch("ClipGradNormTensorParallel", [&]() -> absl::StatusOr<double> {
    torch::NoGradGuard no_grad;
    double replicated = 0;
    float split = 0;
    const auto& params = policy.parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      const torch::Tensor& g = params[i].second.grad();
      if (!g.defined()) continue;
      const double sq = g.to(torch::kFloat64).pow(2).sum().item<double>();
      if (policy.specs()[i].split_dim < 0) {
        replicated += sq;
      } else {
        split += static_cast<float>(sq);
      }
    }
    if (policy.comm()->WorldSize() > 1) {
      if (auto s = policy.comm()->AllReduceSum(&split, 1); !s.ok()) return s;
    }
    const double norm = std::sqrt(replicated + split);
    if (max_norm > 0 && norm > max_norm) {
      const double scale = max_norm / (norm + 1e-6);
      for (const auto& [n, p] : params) {
        if (p.grad().defined()) p.grad().mul_(scale);
      }
    }
    return norm;
  });
}

absl::StatusOr<std::unique_ptr<GrpoLearner>> GrpoLearner::Create(Policy* policy, GrpoParams grpo,
                                                                 OptimParams optim, double temperature) {
  if (policy == nullptr) return absl::InvalidArgumentError("GrpoLearner: policy is null");
  if (auto s = ValidateGrpoParams(grpo); !s.ok()) return s;
  if (auto s = ValidateOptimParams(optim); !s.ok()) return s;
  std::unique_ptr<GrpoLearner> l(new GrpoLearner(policy, grpo, optim, temperature));
  l->optimizer_ =
      std::make_unique<torch::optim::AdamW>(policy->ParameterList(), torch::optim::AdamWOptions(optim.lr)
                                                                         .betas({optim.beta1, optim.beta2})
                                                                         .weight_decay(optim.weight_decay));
  return l;
}

absl::StatusOr<UpdateStats> GrpoLearner::Update(const TrainBatch& batch) {
  return RunTorch("GrpoLearner::Update", [&]() -> absl::StatusOr<UpdateStats> {
    const int64_t B = batch.sequences.size(0);
    TORCH_CHECK(batch.mask.dim() == 2 && batch.mask.size(0) == B && batch.advantages.size(0) == B,
                "batch tensors disagree on the batch size");
    TORCH_CHECK(B >= optim_.mini_batches, "batch of ", B, " is smaller than mini_batches ",
                optim_.mini_batches);
    torch::Tensor old = batch.old_logprobs;
    if (old.defined()) {
      TORCH_CHECK(old.sizes() == batch.mask.sizes(), "old_logprobs must be [B, N] like the mask");
    } else {
      torch::NoGradGuard no_grad;
      old = ResponseLogprobs(*policy_, batch.sequences, batch.valid, batch.prompt_len, temperature_);
    }
    UpdateStats st;
    const int64_t per = B / optim_.mini_batches;  // the remainder joins the last mini-batch
    for (int e = 0; e < optim_.update_epochs; ++e) {
      for (int mb = 0; mb < optim_.mini_batches; ++mb) {
        const int64_t lo = mb * per, n = mb + 1 == optim_.mini_batches ? B - lo : per;
        auto part = [&](const torch::Tensor& t) { return t.defined() ? t.narrow(0, lo, n) : t; };
        optimizer_->zero_grad();
        torch::Tensor lp = ResponseLogprobs(*policy_, part(batch.sequences), part(batch.valid),
                                            batch.prompt_len, temperature_);
        torch::Tensor ref = grpo_.kl_coef > 0 ? part(batch.ref_logprobs) : torch::Tensor();
        LossTerms terms = GrpoLoss(lp, part(old), ref, part(batch.advantages), part(batch.mask), grpo_);
        terms.loss.backward();
        auto norm = ClipGradNormTensorParallel(*policy_, optim_.max_grad_norm);
        if (!norm.ok()) return norm.status();
        optimizer_->step();
        st.loss += terms.loss.item<double>();
        st.policy_loss += terms.policy_loss;
        st.kl += terms.kl;
        st.clip_fraction += terms.clip_fraction;
        st.grad_norm += *norm;
        ++st.optimizer_steps;
      }
    }
    const double k = st.optimizer_steps;
    st.loss /= k;
    st.policy_loss /= k;
    st.kl /= k;
    st.clip_fraction /= k;
    st.grad_norm /= k;
    return st;
  });
}

}  // namespace skyrl::rl
