#include "rl/job/role_protocol.h"

#include "absl/strings/str_cat.h"
#include "rl/algo/checkpoint.h"

namespace skyrl::rl::role {
namespace {

absl::Status Invalid(absl::string_view method, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(method, ": ", why));
}

absl::Status CheckWs(absl::string_view method, const pb::WsRequest& r) {
  if (r.prefix().empty()) return Invalid(method, "prefix: needed");
  if (r.engines() < 1) return Invalid(method, absl::StrCat("engines: ", r.engines(), " (at least 1)"));
  if (r.engine_tp() < 0)
    return Invalid(method, absl::StrCat("engine_tp: ", r.engine_tp(), " (0: 1, or more)"));
  if (r.trainer_tp() < 0)
    return Invalid(method, absl::StrCat("trainer_tp: ", r.trainer_tp(), " (0: 1, or more)"));
  if (r.io_timeout_s() < 0) return Invalid(method, absl::StrCat("io_timeout_s: ", r.io_timeout_s()));
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckWsSend(const pb::WsRequest& r) { return CheckWs(trainer::kWsSend.name, r); }

absl::Status CheckWsReceive(const pb::WsRequest& r) {
  if (absl::Status s = CheckWs(engine::kWsReceive.name, r); !s.ok()) return s;
  if (r.version() < 0) return Invalid(engine::kWsReceive.name, absl::StrCat("version: ", r.version()));
  const int64_t receivers = int64_t{r.engines()} * EngineTp(r);
  if (r.rank() < 0 || r.rank() >= receivers)
    return Invalid(engine::kWsReceive.name,
                   absl::StrCat("rank: ", r.rank(), " (receiver ranks are 0..", receivers - 1, ")"));
  return absl::OkStatus();
}

absl::Status CheckLoadShard(const pb::LoadShardRequest& r) {
  if (r.world() < 1) return Invalid(engine::kLoadShard.name, absl::StrCat("world: ", r.world()));
  if (r.rank() < 0 || r.rank() >= r.world())
    return Invalid(engine::kLoadShard.name, absl::StrCat("rank: ", r.rank(), " of world ", r.world()));
  if (r.version() < 0) return Invalid(engine::kLoadShard.name, absl::StrCat("version: ", r.version()));
  return absl::OkStatus();
}

absl::StatusOr<pb::GenerateRequest> MakeGenerateRequest(uint64_t seed, const PromptBatch& batch) {
  absl::StatusOr<std::string> tensors = EncodeTensors({{"tokens", batch.tokens}, {"valid", batch.valid}});
  if (!tensors.ok()) return tensors.status();
  pb::GenerateRequest r;
  r.set_seed(seed);
  r.set_batch(*std::move(tensors));
  return r;
}

absl::StatusOr<PromptBatch> BatchOf(const pb::GenerateRequest& r) {
  absl::StatusOr<NamedTensors> t = DecodeTensors(r.batch());
  if (!t.ok()) return t.status();
  if (t->size() != 2 || (*t)[0].first != "tokens" || (*t)[1].first != "valid")
    return Invalid(engine::kGenerate.name, "batch: want the tensors tokens and valid");
  return PromptBatch{(*t)[0].second, (*t)[1].second};
}

absl::StatusOr<pb::LoadShardRequest> MakeLoadShardRequest(int64_t version, int rank, int world,
                                                          const NamedTensors& shard) {
  absl::StatusOr<std::string> tensors = EncodeTensors(shard);
  if (!tensors.ok()) return tensors.status();
  pb::LoadShardRequest r;
  r.set_version(version);
  r.set_rank(rank);
  r.set_world(world);
  r.set_shard(*std::move(tensors));
  return r;
}

absl::StatusOr<pb::LogprobsReply> MakeLogprobsReply(double compute_s, const torch::Tensor& ref) {
  absl::StatusOr<std::string> tensors = EncodeTensors({{"ref", ref}});
  if (!tensors.ok()) return tensors.status();
  pb::LogprobsReply r;
  r.set_compute_s(compute_s);
  r.set_ref(*std::move(tensors));
  return r;
}

absl::StatusOr<torch::Tensor> RefOf(const pb::LogprobsReply& r) {
  absl::StatusOr<NamedTensors> t = DecodeTensors(r.ref());
  if (!t.ok()) return t.status();
  if (t->size() != 1) return absl::InternalError("logprobs reply: want one tensor");
  return (*t)[0].second;
}

pb::ScoreRequest MakeScoreRequest(const std::vector<Example>& examples, std::string encoded_rollout) {
  pb::ScoreRequest r;
  for (const Example& e : examples) {
    pb::Example* x = r.add_examples();
    x->set_prompt(e.prompt);
    x->set_target(e.target);
  }
  r.set_rollout(std::move(encoded_rollout));
  return r;
}

std::vector<Example> ExamplesOf(const pb::ScoreRequest& r) {
  std::vector<Example> out;
  out.reserve(r.examples_size());
  for (const pb::Example& e : r.examples()) out.push_back({e.prompt(), e.target()});
  return out;
}

pb::ScoreReply MakeScoreReply(const Scored& scored, double compute_s) {
  pb::ScoreReply r;
  r.mutable_rewards()->Add(scored.rewards.begin(), scored.rewards.end());
  r.set_mean_reward(scored.mean_reward);
  r.set_exact_fraction(scored.exact_fraction);
  r.set_response_tokens(scored.response_tokens);
  r.set_compute_s(compute_s);
  return r;
}

Scored ScoredOf(const pb::ScoreReply& r) {
  Scored s;
  s.rewards.assign(r.rewards().begin(), r.rewards().end());
  s.mean_reward = r.mean_reward();
  s.exact_fraction = r.exact_fraction();
  s.response_tokens = r.response_tokens();
  return s;
}

}  // namespace skyrl::rl::role
