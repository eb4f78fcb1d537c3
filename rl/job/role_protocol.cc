#include "rl/job/role_protocol.h"

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "rl/algo/checkpoint.h"
#include "rl/job/wire.h"

namespace skyrl::rl::role {
namespace {

using Json = nlohmann::json;

// A JSON object, or `code` naming `what`.
absl::StatusOr<Json> Object(absl::string_view bytes, absl::string_view what, absl::StatusCode code) {
  Json j = Json::parse(bytes.begin(), bytes.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return absl::Status(code, absl::StrCat(what, ": not a JSON object"));
  return j;
}
absl::StatusOr<Json> Request(absl::string_view bytes, absl::string_view what) {
  return Object(bytes, what, absl::StatusCode::kInvalidArgument);
}
absl::StatusOr<Json> Reply(absl::string_view bytes, absl::string_view what) {
  return Object(bytes, absl::StrCat(what, " reply"), absl::StatusCode::kInternal);
}

// Runs `read` (which may throw nlohmann's exceptions on missing or mistyped fields), turning
// a throw into `code` naming `what`.
template <typename T, typename F>
absl::StatusOr<T> Read(absl::string_view what, absl::StatusCode code, F read) {
  try {
    return read();
  } catch (const Json::exception& e) {
    return absl::Status(code, absl::StrCat(what, ": ", e.what()));
  }
}

}  // namespace

absl::StatusOr<int64_t> DecodeNumber(absl::string_view bytes, absl::string_view what) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(bytes, &v))
    return absl::InternalError(absl::StrCat(what, ": not a number: '", bytes, "'"));
  return v;
}

// ---- trainer ----

std::string Encode(const TrainReply& r) {
  return Json{{"loss", r.loss},
              {"policy_loss", r.policy_loss},
              {"kl", r.kl},
              {"clip_fraction", r.clip_fraction},
              {"grad_norm", r.grad_norm},
              {"version", r.version},
              {"compute_s", r.compute_s}}
      .dump();
}
absl::StatusOr<TrainReply> DecodeTrainReply(absl::string_view bytes) {
  absl::StatusOr<Json> j = Reply(bytes, trainer::kTrain);
  if (!j.ok()) return j.status();
  TrainReply r;
  r.loss = j->value("loss", 0.0);
  r.policy_loss = j->value("policy_loss", 0.0);
  r.kl = j->value("kl", 0.0);
  r.clip_fraction = j->value("clip_fraction", 0.0);
  r.grad_norm = j->value("grad_norm", 0.0);
  r.version = j->value("version", int64_t{-1});
  r.compute_s = j->value("compute_s", 0.0);
  return r;
}

std::string Encode(const SyncWeightsRequest& r) { return Json{{"engines", r.engines}}.dump(); }
absl::StatusOr<SyncWeightsRequest> DecodeSyncWeightsRequest(absl::string_view bytes) {
  absl::StatusOr<Json> j = Request(bytes, trainer::kSyncWeights);
  if (!j.ok()) return j.status();
  return Read<SyncWeightsRequest>("sync_weights: engines", absl::StatusCode::kInvalidArgument, [&] {
    return SyncWeightsRequest{j->at("engines").get<std::vector<std::string>>()};
  });
}
std::string Encode(const SyncWeightsReply& r) {
  Json failed = Json::array();
  for (const auto& [engine, error] : r.failed) failed.push_back({{"engine", engine}, {"error", error}});
  return Json{{"version", r.version},
              {"failed", failed},
              {"encode_s", r.encode_s},
              {"seconds", r.seconds},
              {"bytes", r.bytes}}
      .dump();
}
absl::StatusOr<SyncWeightsReply> DecodeSyncWeightsReply(absl::string_view bytes) {
  absl::StatusOr<Json> j = Reply(bytes, trainer::kSyncWeights);
  if (!j.ok()) return j.status();
  return Read<SyncWeightsReply>("sync_weights reply", absl::StatusCode::kInternal, [&] {
    SyncWeightsReply r;
    r.version = j->value("version", int64_t{-1});
    r.encode_s = j->value("encode_s", 0.0);
    r.seconds = j->value("seconds", 0.0);
    r.bytes = j->value("bytes", int64_t{0});
    for (const Json& f : j->value("failed", Json::array()))
      r.failed.emplace_back(f.value("engine", std::string()), f.value("error", std::string()));
    return r;
  });
}

std::string Encode(const WsRequest& r) {
  return Json{{"prefix", r.prefix},       {"engines", r.engines},
              {"engine_tp", r.engine_tp}, {"trainer_tp", r.trainer_tp},
              {"rank", r.rank},           {"host", r.host},
              {"version", r.version},     {"io_timeout_s", r.io_timeout_s}}
      .dump();
}
absl::StatusOr<WsRequest> DecodeWsRequest(absl::string_view bytes) {
  absl::StatusOr<Json> j = Request(bytes, "weight sync args");
  if (!j.ok()) return j.status();
  return Read<WsRequest>("weight sync args", absl::StatusCode::kInvalidArgument,
                         [&]() -> absl::StatusOr<WsRequest> {
                           WsRequest r;
                           r.prefix = j->value("prefix", std::string());
                           r.host = j->value("host", std::string("127.0.0.1"));
                           r.engines = j->value("engines", 0);
                           r.rank = j->value("rank", -1);
                           r.engine_tp = j->value("engine_tp", 1);
                           r.trainer_tp = j->value("trainer_tp", 1);
                           r.version = j->value("version", int64_t{-1});
                           r.io_timeout_s = j->value("io_timeout_s", 20.0);
                           if (r.prefix.empty() || r.engines < 1)
                             return absl::InvalidArgumentError("weight sync args: prefix and engines needed");
                           return r;
                         });
}

std::string Encode(const WsSendReply& r) {
  return Json{{"version", r.version},
              {"encode_s", r.encode_s},
              {"seconds", r.seconds},
              {"bytes", r.bytes},
              {"tcp_connections", r.tcp_connections},
              {"local_connections", r.local_connections},
              {"direct_write_bytes", r.direct_write_bytes}}
      .dump();
}
absl::StatusOr<WsSendReply> DecodeWsSendReply(absl::string_view bytes) {
  absl::StatusOr<Json> j = Reply(bytes, trainer::kWsSend);
  if (!j.ok()) return j.status();
  WsSendReply r;
  r.version = j->value("version", int64_t{-1});
  r.encode_s = j->value("encode_s", 0.0);
  r.seconds = j->value("seconds", 0.0);
  r.bytes = j->value("bytes", int64_t{0});
  r.tcp_connections = j->value("tcp_connections", int64_t{0});
  r.local_connections = j->value("local_connections", int64_t{0});
  r.direct_write_bytes = j->value("direct_write_bytes", int64_t{0});
  return r;
}

// ---- engine ----

std::string Encode(const WsReceiveReply& r) {
  return Json{{"version", r.version}, {"seconds", r.seconds}, {"decode_s", r.decode_s}}.dump();
}
absl::StatusOr<WsReceiveReply> DecodeWsReceiveReply(absl::string_view bytes) {
  absl::StatusOr<Json> j = Reply(bytes, engine::kWsReceive);
  if (!j.ok()) return j.status();
  return WsReceiveReply{j->value("version", int64_t{-1}), j->value("seconds", 0.0),
                        j->value("decode_s", 0.0)};
}

absl::StatusOr<std::string> Encode(const LoadShardRequest& r) {
  absl::StatusOr<std::string> tensors = EncodeTensors(r.shard);
  if (!tensors.ok()) return tensors.status();
  return PackParts({Json{{"version", r.version}, {"rank", r.rank}, {"world", r.world}}.dump(), *tensors});
}
absl::StatusOr<LoadShardRequest> DecodeLoadShardRequest(absl::string_view bytes) {
  auto parts = UnpackParts(bytes, 2, engine::kLoadShard);
  if (!parts.ok()) return parts.status();
  absl::StatusOr<Json> h = Request((*parts)[0], "load_shard header");
  if (!h.ok()) return h.status();
  LoadShardRequest r;
  r.version = h->value("version", int64_t{-1});
  r.rank = h->value("rank", -1);
  r.world = h->value("world", 0);
  if (r.world < 1 || r.rank < 0 || r.rank >= r.world || r.version < 0)
    return absl::InvalidArgumentError(absl::StrCat("load_shard: bad header ", (*parts)[0]));
  auto shard = DecodeTensors((*parts)[1]);
  if (!shard.ok()) return shard.status();
  r.shard = std::move(*shard);
  return r;
}

absl::StatusOr<std::string> Encode(const GenerateRequest& r) {
  auto t = EncodeTensors({{"tokens", r.batch.tokens}, {"valid", r.batch.valid}});
  if (!t.ok()) return t.status();
  return PackParts({Json{{"seed", r.seed}}.dump(), *t});
}
absl::StatusOr<GenerateRequest> DecodeGenerateRequest(absl::string_view bytes) {
  auto parts = UnpackParts(bytes, 2, engine::kGenerate);
  if (!parts.ok()) return parts.status();
  absl::StatusOr<Json> h = Request((*parts)[0], "generate header");
  if (!h.ok()) return h.status();
  auto t = DecodeTensors((*parts)[1]);
  if (!t.ok()) return t.status();
  if (t->size() != 2) return absl::InvalidArgumentError("generate: want tensors tokens and valid");
  return GenerateRequest{h->value("seed", uint64_t{0}), PromptBatch{(*t)[0].second, (*t)[1].second}};
}

absl::StatusOr<std::string> Encode(const GenerateReply& r) {
  auto rollout = EncodeRollout(r.rollout);
  if (!rollout.ok()) return rollout.status();
  return PackParts({Json{{"version", r.version}, {"compute_s", r.compute_s}}.dump(), *rollout});
}
absl::StatusOr<GenerateReply> DecodeGenerateReply(absl::string_view bytes) {
  auto parts = UnpackParts(bytes, 2, "generate reply");
  if (!parts.ok()) return parts.status();
  absl::StatusOr<Json> h = Reply((*parts)[0], "generate header");
  if (!h.ok()) return h.status();
  auto rollout = DecodeRollout((*parts)[1]);
  if (!rollout.ok()) return rollout.status();
  return GenerateReply{h->value("version", int64_t{-1}), h->value("compute_s", 0.0), std::move(*rollout)};
}

std::string Encode(const EngineStateReply& r) {
  return Json{{"state", r.state},
              {"version", r.version},
              {"sleeps", r.sleeps},
              {"wakes", r.wakes},
              {"cuda_visible_devices", r.cuda_visible_devices}}
      .dump();
}
absl::StatusOr<EngineStateReply> DecodeEngineStateReply(absl::string_view bytes) {
  absl::StatusOr<Json> j = Reply(bytes, engine::kState);
  if (!j.ok()) return j.status();
  return EngineStateReply{j->value("state", std::string()), j->value("version", int64_t{-1}),
                          j->value("sleeps", int64_t{0}), j->value("wakes", int64_t{0}),
                          j->value("cuda_visible_devices", std::string())};
}

// ---- reward and reference ----

std::string EncodeScoreRequest(const std::vector<Example>& examples, const std::string& encoded_rollout) {
  Json list = Json::array();
  for (const Example& e : examples) list.push_back({e.prompt, e.target});
  return PackParts({Json{{"examples", list}}.dump(), encoded_rollout});
}
absl::StatusOr<std::string> Encode(const ScoreRequest& r) {
  auto rollout = EncodeRollout(r.rollout);
  if (!rollout.ok()) return rollout.status();
  return EncodeScoreRequest(r.examples, *rollout);
}
absl::StatusOr<ScoreRequest> DecodeScoreRequest(absl::string_view bytes) {
  auto parts = UnpackParts(bytes, 2, reward::kScore);
  if (!parts.ok()) return parts.status();
  absl::StatusOr<Json> h = Request((*parts)[0], "score header");
  if (!h.ok()) return h.status();
  ScoreRequest r;
  absl::StatusOr<std::vector<Example>> examples =
      Read<std::vector<Example>>("score: examples", absl::StatusCode::kInvalidArgument, [&] {
        std::vector<Example> out;
        for (const Json& e : h->at("examples"))
          out.push_back({e.at(0).get<std::string>(), e.at(1).get<std::string>()});
        return out;
      });
  if (!examples.ok()) return examples.status();
  r.examples = std::move(*examples);
  auto rollout = DecodeRollout((*parts)[1]);
  if (!rollout.ok()) return rollout.status();
  r.rollout = std::move(*rollout);
  return r;
}

std::string Encode(const ScoreReply& r) {
  return Json{{"rewards", r.scored.rewards},
              {"mean_reward", r.scored.mean_reward},
              {"exact_fraction", r.scored.exact_fraction},
              {"response_tokens", r.scored.response_tokens},
              {"compute_s", r.compute_s}}
      .dump();
}
absl::StatusOr<ScoreReply> DecodeScoreReply(absl::string_view bytes) {
  absl::StatusOr<Json> j = Reply(bytes, reward::kScore);
  if (!j.ok()) return j.status();
  return Read<ScoreReply>("reward reply", absl::StatusCode::kInternal, [&] {
    ScoreReply r;
    r.scored.rewards = j->at("rewards").get<std::vector<float>>();
    r.scored.mean_reward = j->at("mean_reward").get<double>();
    r.scored.exact_fraction = j->at("exact_fraction").get<double>();
    r.scored.response_tokens = j->at("response_tokens").get<int64_t>();
    r.compute_s = j->value("compute_s", 0.0);
    return r;
  });
}

absl::StatusOr<std::string> Encode(const LogprobsReply& r) {
  auto bytes = EncodeTensors({{"ref", r.ref}});
  if (!bytes.ok()) return bytes.status();
  return PackParts({Json{{"compute_s", r.compute_s}}.dump(), *bytes});
}
absl::StatusOr<LogprobsReply> DecodeLogprobsReply(absl::string_view bytes) {
  auto parts = UnpackParts(bytes, 2, "reference reply");
  if (!parts.ok()) return parts.status();
  absl::StatusOr<Json> h = Reply((*parts)[0], reference::kLogprobs);
  auto ref = DecodeTensors((*parts)[1]);
  if (!ref.ok()) return ref.status();
  if (ref->size() != 1) return absl::InternalError("reference reply: want one tensor");
  return LogprobsReply{h.ok() ? h->value("compute_s", 0.0) : 0.0, (*ref)[0].second};
}

}  // namespace skyrl::rl::role
