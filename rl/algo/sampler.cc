#include "rl/algo/sampler.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "rl/policy/torch_status.h"

namespace skyrl::rl {

absl::Status ValidateSamplingParams(const SamplingParams& p) {
  if (!(p.temperature >= 0) || !std::isfinite(p.temperature)) {
    return absl::InvalidArgumentError(
        absl::StrCat("generator.sampling_params.temperature: must be >= 0, got ", p.temperature));
  }
  if (!(p.top_p > 0 && p.top_p <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("generator.sampling_params.top_p: must be in (0, 1], got ", p.top_p));
  }
  if (p.max_new_tokens <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("generator.sampling_params.max_generate_length: must be > 0, got ", p.max_new_tokens));
  }
  return absl::OkStatus();
}

absl::StatusOr<PromptBatch> LeftPad(const std::vector<std::vector<int>>& prompts, int pad_id) {
  if (prompts.empty()) return absl::InvalidArgumentError("LeftPad: no prompts");
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  if (longest == 0) return absl::InvalidArgumentError("LeftPad: every prompt is empty");
  const int64_t B = static_cast<int64_t>(prompts.size()), P = static_cast<int64_t>(longest);
  PromptBatch out{torch::full({B, P}, pad_id, torch::kInt64), torch::zeros({B, P}, torch::kBool)};
  auto tok = out.tokens.accessor<int64_t, 2>();
  auto val = out.valid.accessor<bool, 2>();
  for (int64_t b = 0; b < B; ++b) {
    const int64_t off = P - static_cast<int64_t>(prompts[b].size());
    for (size_t i = 0; i < prompts[b].size(); ++i) {
      tok[b][off + i] = prompts[b][i];
      val[b][off + i] = true;
    }
  }
  return out;
}

std::vector<std::vector<int>> Rollout::ResponseIds() const {
  std::vector<std::vector<int>> out(response.size(0));
  auto r = response.accessor<int64_t, 2>();
  auto m = mask.accessor<float, 2>();
  for (int64_t b = 0; b < response.size(0); ++b) {
    for (int64_t t = 0; t < response.size(1) && m[b][t] > 0; ++t) out[b].push_back(static_cast<int>(r[b][t]));
  }
  return out;
}

absl::StatusOr<Rollout> Generate(const Policy& policy, const PromptBatch& prompts,
                                 const SamplingParams& params, int eos_id, int pad_id, uint64_t seed) {
  if (auto s = ValidateSamplingParams(params); !s.ok()) return s;
  const int64_t P = prompts.tokens.size(1);
  if (P + params.max_new_tokens > policy.config().max_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "generator.sampling_params.max_generate_length: ", params.max_new_tokens, " new tokens after a ", P,
        "-token prompt exceed model.max_len ", policy.config().max_len));
  }
  return RunTorch("Generate", [&]() -> absl::StatusOr<Rollout> {
    torch::NoGradGuard no_grad;
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const int64_t B = prompts.tokens.size(0);
    torch::Tensor seq = prompts.tokens, valid = prompts.valid;
    torch::Tensor done = torch::zeros({B}, torch::kBool);
    std::vector<torch::Tensor> toks, lps, masks;
    // The whole prefix is recomputed each step: at these lengths (tens of tokens) a KV cache
    // would save little and add a second code path to keep equal to the trainer's.
    for (int n = 0; n < params.max_new_tokens; ++n) {
      torch::Tensor logits = policy.Forward(seq, valid).select(1, seq.size(1) - 1);  // [B, V]
      torch::Tensor token, logp;
      if (params.temperature == 0) {
        token = logits.argmax(-1);
        logp = torch::log_softmax(logits, -1).gather(1, token.unsqueeze(1)).squeeze(1);
      } else {
        torch::Tensor scaled = logits / params.temperature;
        scaled = TopPFilter(scaled, params.top_p);
        torch::Tensor logprobs = torch::log_softmax(scaled, -1);
        token = torch::multinomial(logprobs.exp(), 1, /*replacement=*/false, gen).squeeze(1);
        logp = logprobs.gather(1, token.unsqueeze(1)).squeeze(1);
      }
      torch::Tensor live = done.logical_not();
      token = torch::where(live, token, torch::full_like(token, pad_id));
      toks.push_back(token);
      lps.push_back(torch::where(live, logp, torch::zeros_like(logp)));
      masks.push_back(live.to(torch::kFloat32));
      seq = torch::cat({seq, token.unsqueeze(1)}, 1);
      valid = torch::cat({valid, live.unsqueeze(1)}, 1);
      done = done | (token == eos_id);
      if (done.all().item<bool>()) break;
    }
    Rollout r;
    r.prompt_len = static_cast<int>(P);
    r.sequences = seq;
    r.valid = valid;
    r.response = torch::stack(toks, 1);
    r.logprobs = torch::stack(lps, 1);
    r.mask = torch::stack(masks, 1);
    return r;
  });
}

torch::Tensor TopPFilter(const torch::Tensor& logits, double top_p) {
  if (top_p >= 1) return logits;
  auto [sorted, order] = torch::softmax(logits, -1).sort(-1, /*descending=*/true);
  torch::Tensor drop_sorted = (sorted.cumsum(-1) - sorted) >= top_p;
  torch::Tensor drop = torch::zeros_like(drop_sorted).scatter(-1, order, drop_sorted);
  return logits.masked_fill(drop, -std::numeric_limits<float>::infinity());
}

torch::Tensor ResponseLogprobs(const Policy& policy, const torch::Tensor& sequences,
                               const torch::Tensor& valid, int prompt_len, double temperature) {
  const int64_t L = sequences.size(1), N = L - prompt_len;
  TORCH_CHECK(N > 0, "no response tokens after a ", prompt_len, "-token prompt");
  torch::Tensor logits =
      policy.Forward(sequences, valid).narrow(1, prompt_len - 1, N);  // predicts tokens P..L-1
  if (temperature > 0) logits = logits / temperature;
  torch::Tensor targets = sequences.narrow(1, prompt_len, N);
  return torch::log_softmax(logits, -1).gather(2, targets.unsqueeze(2)).squeeze(2);
}

}  // namespace skyrl::rl
