#include "rl/job/role_stubs.h"

namespace skyrl::rl {

absl::StatusOr<int64_t> RoleStub::Version(const ProtoMethod<pb::Empty, pb::Version>& method) const {
  absl::StatusOr<pb::Version> v = Call(method, pb::Empty()).Get();
  if (!v.ok()) return v.status();
  return v->version();
}

absl::StatusOr<int64_t> RoleStub::Port(const ProtoMethod<pb::Empty, pb::Port>& method) const {
  absl::StatusOr<pb::Port> p = Call(method, pb::Empty()).Get();
  if (!p.ok()) return p.status();
  return p->port();
}

Pending<pb::TrainReply> TrainerStub::Train(std::string encoded_batch) const {
  pb::TrainRequest request;
  request.set_batch(std::move(encoded_batch));
  return Call(role::trainer::kTrain, request);
}

Pending<pb::EngineState> EngineStub::Sleep(bool keep_weights) const {
  pb::SleepRequest request;
  request.set_keep_weights(keep_weights);
  return Call(role::engine::kSleep, request);
}

bool EngineStub::Recoverable(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s) || absl::IsFailedPrecondition(s);
}

Pending<pb::LogprobsReply> ReferenceStub::Logprobs(std::string encoded_rollout) const {
  pb::LogprobsRequest request;
  request.set_rollout(std::move(encoded_rollout));
  return Call(role::reference::kLogprobs, request);
}

}  // namespace skyrl::rl
