#include "actors/train/grpo_step.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "actors/algo/checkpoint.h"
#include "actors/model/torch_status.h"
#include "actors/tasks/tokenizer.h"

namespace skyrl::actors {
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

absl::StatusOr<PromptSet> MakePrompts(const Task& task, const TaskOptions& options, int prompts, int group_size,
                                      std::mt19937_64& rng) {
  if (prompts < 1 || group_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("MakePrompts: need prompts >= 1 and group_size >= 1, got ", prompts,
                                                   " and ", group_size));
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

absl::StatusOr<Scored> ScoreRollout(const Task& task, const std::vector<Example>& examples, const Rollout& rollout) {
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
    tb.advantages = GroupAdvantages(torch::tensor(scored.rewards, torch::kFloat32), grpo.group_size,
                                    grpo.advantage_eps);
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
  auto m = ByName(bytes, "DecodeRollout", {"prompt_len", "sequences", "valid", "response", "logprobs", "mask"});
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

}  // namespace skyrl::actors
