#include "rl/job/role_stubs.h"

namespace skyrl::rl {

absl::StatusOr<int64_t> RoleStub::Number(const char* method) const {
  absl::StatusOr<std::string> r = client_->Call(ActorHandle{id_}, method, "");
  const std::string what = absl::StrCat(name_, ": ", method);
  if (!r.ok()) return absl::Status(r.status().code(), absl::StrCat(what, ": ", r.status().message()));
  return role::DecodeNumber(*r, what);
}

Pending<std::string> RoleStub::Text(const char* method, std::string args) const {
  return Call<std::string>(method, std::move(args), [](absl::string_view s) { return std::string(s); });
}

Pending<role::TrainReply> TrainerStub::Train(const std::string& encoded_batch) const {
  return Call<role::TrainReply>(role::trainer::kTrain, encoded_batch, role::DecodeTrainReply);
}
Pending<role::SyncWeightsReply> TrainerStub::SyncWeights(const role::SyncWeightsRequest& request) const {
  return Call<role::SyncWeightsReply>(role::trainer::kSyncWeights, role::Encode(request),
                                      role::DecodeSyncWeightsReply);
}
Pending<role::WsSendReply> TrainerStub::WsSend(const role::WsRequest& request) const {
  return Call<role::WsSendReply>(role::trainer::kWsSend, role::Encode(request), role::DecodeWsSendReply);
}

Pending<role::GenerateReply> EngineStub::Generate(const role::GenerateRequest& request) const {
  return Call<role::GenerateReply>(role::engine::kGenerate, role::Encode(request), role::DecodeGenerateReply);
}
Pending<role::WsReceiveReply> EngineStub::WsReceive(const role::WsRequest& request) const {
  return Call<role::WsReceiveReply>(role::engine::kWsReceive, role::Encode(request),
                                    role::DecodeWsReceiveReply);
}
Pending<std::string> EngineStub::Sleep(bool keep_weights) const {
  return Text(role::engine::kSleep, keep_weights ? role::engine::kSleepKeep : role::engine::kSleepDrop);
}
Pending<std::string> EngineStub::WakeUp() const { return Text(role::engine::kWakeUp, ""); }

bool EngineStub::Recoverable(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s) || absl::IsFailedPrecondition(s);
}

Pending<role::ScoreReply> RewardStub::Score(const std::vector<Example>& examples,
                                            const std::string& encoded_rollout) const {
  return Call<role::ScoreReply>(role::reward::kScore, role::EncodeScoreRequest(examples, encoded_rollout),
                                role::DecodeScoreReply);
}

Pending<role::LogprobsReply> ReferenceStub::Logprobs(const std::string& encoded_rollout) const {
  return Call<role::LogprobsReply>(role::reference::kLogprobs, encoded_rollout, role::DecodeLogprobsReply);
}

}  // namespace skyrl::rl
