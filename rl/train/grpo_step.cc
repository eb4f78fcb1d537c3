#include "rl/train/grpo_step.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "rl/algo/checkpoint.h"
#include "rl/policy/torch_status.h"
#include "rl/tasks/tokenizer.h"

namespace skyrl::rl {
namespace {

absl::StatusOr<std::map<std::string, torch::Tensor>> ByName(const std::string& bytes, const char* what,
                                                            std::initializer_list<const char*> required) {
  auto named = DecodeTensors(bytes);
  if (!named.ok()) return named.status();
  std::map<std::string, torch::Tensor> m(named->begin(), named->end());
  for (const char* k : required) {
    if (!m.count(k)) return absl::DataLossError(absl::StrCat(what, ": field ", k, " missing"));
  }
  return m;
}

}  // namespace

absl::StatusOr<PromptSet> MakePrompts(const Task& task, const TaskOptions& options, int prompts,
                                      int group_size, std::mt19937_64& rng) {
  if (prompts < 1 || group_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("MakePrompts: need prompts >= 1 and group_size >= 1, got ",
                                                   prompts, " and ", group_size));
  }
  PromptSet out;
  std::vector<std::vector<int>> ids;
  for (int i = 0; i < prompts; ++i) {
    Example ex = task.make(rng, options);
    auto p = Tokenizer::EncodePrompt(ex.prompt);
    if (!p.ok()) return p.status();
    for (int g = 0; g < group_size; ++g) {
      ids.push_back(*p);
      out.examples.push_back(ex);
    }
  }
  auto batch = LeftPad(ids, Tokenizer::kPad);
  if (!batch.ok()) return batch.status();
  out.batch = std::move(*batch);
  return out;
}

absl::StatusOr<Scored> ScoreRollout(const Task& task, const std::vector<Example>& examples,
                                    const Rollout& rollout) {
  const auto responses = rollout.ResponseIds();
  if (responses.size() != examples.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("ScoreRollout: ", responses.size(), " responses for ", examples.size(), " examples"));
  }
  Scored s;
  int exact = 0;
  for (size_t i = 0; i < responses.size(); ++i) {
    Tokenizer::Answer a = Tokenizer::DecodeResponse(responses[i]);
    const float r = static_cast<float>(task.reward(examples[i], a.text, a.terminated));
    s.rewards.push_back(r);
    s.mean_reward += r;
    exact += r >= 1.0f;
    s.response_tokens += static_cast<int64_t>(responses[i].size());
  }
  if (!s.rewards.empty()) {
    s.mean_reward /= static_cast<double>(s.rewards.size());
    s.exact_fraction = static_cast<double>(exact) / static_cast<double>(s.rewards.size());
  }
  return s;
}

absl::StatusOr<TrainBatch> MakeTrainBatch(const Rollout& rollout, const Scored& scored,
                                          const torch::Tensor& ref_logprobs, const GrpoParams& grpo) {
  return RunTorch("MakeTrainBatch", [&]() -> absl::StatusOr<TrainBatch> {
    TORCH_CHECK(static_cast<int64_t>(scored.rewards.size()) == rollout.sequences.size(0),
                "rewards and rollout disagree on the batch size");
    TrainBatch tb;
    tb.prompt_len = rollout.prompt_len;
    tb.sequences = rollout.sequences;
    tb.valid = rollout.valid;
    tb.mask = rollout.mask;
    tb.advantages =
        GroupAdvantages(torch::tensor(scored.rewards, torch::kFloat32), grpo.group_size, grpo.advantage_eps);
    tb.ref_logprobs = ref_logprobs;
    return tb;
  });
}

uint64_t PromptRngSeed(uint64_t seed) { return seed * 7919 + 17; }

uint64_t SamplerSeed(uint64_t seed, int step) { return seed * 1000003ULL + static_cast<uint64_t>(step); }

absl::StatusOr<std::string> EncodeRollout(const Rollout& r) {
  return EncodeTensors({{"prompt_len", torch::tensor({static_cast<int64_t>(r.prompt_len)})},
                        {"sequences", r.sequences},
                        {"valid", r.valid},
                        {"response", r.response},
                        {"logprobs", r.logprobs},
                        {"mask", r.mask}});
}

absl::StatusOr<Rollout> DecodeRollout(const std::string& bytes) {
  auto m =
      ByName(bytes, "DecodeRollout", {"prompt_len", "sequences", "valid", "response", "logprobs", "mask"});
  if (!m.ok()) return m.status();
  Rollout r;
  r.prompt_len = static_cast<int>((*m)["prompt_len"].item<int64_t>());
  r.sequences = (*m)["sequences"];
  r.valid = (*m)["valid"];
  r.response = (*m)["response"];
  r.logprobs = (*m)["logprobs"];
  r.mask = (*m)["mask"];
  return r;
}

absl::StatusOr<std::string> EncodeTrainBatch(const TrainBatch& b) {
  NamedTensors t = {{"prompt_len", torch::tensor({static_cast<int64_t>(b.prompt_len)})},
                    {"sequences", b.sequences},
                    {"valid", b.valid},
                    {"mask", b.mask},
                    {"advantages", b.advantages}};
  if (b.ref_logprobs.defined()) t.emplace_back("ref_logprobs", b.ref_logprobs);
  if (b.old_logprobs.defined()) t.emplace_back("old_logprobs", b.old_logprobs);
  return EncodeTensors(t);
}

absl::StatusOr<TrainBatch> DecodeTrainBatch(const std::string& bytes) {
  auto m = ByName(bytes, "DecodeTrainBatch", {"prompt_len", "sequences", "valid", "mask", "advantages"});
  if (!m.ok()) return m.status();
  TrainBatch b;
  b.prompt_len = static_cast<int>((*m)["prompt_len"].item<int64_t>());
  b.sequences = (*m)["sequences"];
  b.valid = (*m)["valid"];
  b.mask = (*m)["mask"];
  b.advantages = (*m)["advantages"];
  if (m->count("ref_logprobs")) b.ref_logprobs = (*m)["ref_logprobs"];
  if (m->count("old_logprobs")) b.old_logprobs = (*m)["old_logprobs"];
  return b;
}

std::vector<PromptSlice> SplitPrompts(const PromptSet& prompts, int group_size, int engines) {
  const int64_t rows = static_cast<int64_t>(prompts.examples.size());
  const int64_t groups = rows / group_size;
  std::vector<PromptSlice> out;
  for (int e = 0; e < engines; ++e) {
    PromptSlice s;
    s.begin = (e * groups / engines) * group_size;
    s.end = ((e + 1) * groups / engines) * group_size;
    if (e == engines - 1) s.end = rows;
    s.batch.tokens = prompts.batch.tokens.slice(0, s.begin, s.end);
    s.batch.valid = prompts.batch.valid.slice(0, s.begin, s.end);
    s.examples.assign(prompts.examples.begin() + s.begin, prompts.examples.begin() + s.end);
    out.push_back(std::move(s));
  }
  return out;
}

uint64_t EngineSeed(uint64_t seed, int step, int engine) {
  // A large odd stride keeps engines' streams apart; engine 0 is the single-engine seed.
  return SamplerSeed(seed, step) + static_cast<uint64_t>(engine) * 0x9E3779B97F4A7C15ull;
}

absl::StatusOr<Rollout> ConcatRollouts(const std::vector<Rollout>& parts, int pad_id) {
  if (parts.empty()) return absl::InvalidArgumentError("ConcatRollouts: no rollouts");
  if (parts.size() == 1) return parts[0];
  int64_t n = 0;
  for (const auto& r : parts) {
    if (r.prompt_len != parts[0].prompt_len) {
      return absl::InvalidArgumentError(absl::StrCat("ConcatRollouts: prompt lengths ", r.prompt_len, " and ",
                                                     parts[0].prompt_len, " differ"));
    }
    n = std::max<int64_t>(n, r.response.size(1));
  }
  std::vector<torch::Tensor> seq, valid, resp, lp, mask;
  for (const auto& r : parts) {
    const int64_t b = r.response.size(0), pad = n - r.response.size(1);
    if (pad == 0) {
      seq.push_back(r.sequences), valid.push_back(r.valid), resp.push_back(r.response);
      lp.push_back(r.logprobs), mask.push_back(r.mask);
      continue;
    }
    auto pad_ids = torch::full({b, pad}, pad_id, r.response.options());
    seq.push_back(torch::cat({r.sequences, pad_ids}, 1));
    valid.push_back(torch::cat({r.valid, torch::zeros({b, pad}, r.valid.options())}, 1));
    resp.push_back(torch::cat({r.response, pad_ids}, 1));
    lp.push_back(torch::cat({r.logprobs, torch::zeros({b, pad}, r.logprobs.options())}, 1));
    mask.push_back(torch::cat({r.mask, torch::zeros({b, pad}, r.mask.options())}, 1));
  }
  Rollout out;
  out.prompt_len = parts[0].prompt_len;
  out.sequences = torch::cat(seq, 0);
  out.valid = torch::cat(valid, 0);
  out.response = torch::cat(resp, 0);
  out.logprobs = torch::cat(lp, 0);
  out.mask = torch::cat(mask, 0);
  return out;
}

}  // namespace skyrl::rl
