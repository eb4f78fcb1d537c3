// The driver's typed view of the RL role actors: one stub per role over skyrl::Client, whose
// methods call the ProtoMethods of role_protocol.h, so no method name or wire field is written
// in the driver. A method returns a Pending<Reply> (the call is in
// flight) or, for the small ones, the reply. Every error names the actor ("trainer rank 1:
// train: ...") and keeps the code it came with.
// Stubs are cheap values; safe for concurrent use (the Client is).
#pragma once

#include <future>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rl/job/role_protocol.h"
#include "runtime/client/client.h"

namespace skyrl::rl {

// A call in flight; Get() waits for its reply, parsed (a reply that is not a Reply is
// Internal). Move-only; Get() once.
template <typename Reply>
class Pending {
 public:
  Pending(std::future<absl::StatusOr<std::string>> call, std::string what)
      : call_(std::move(call)), what_(std::move(what)) {}
  // An answer known before any call (a request that could not be encoded).
  Pending(absl::Status error, std::string what) : error_(std::move(error)), what_(std::move(what)) {}

  absl::StatusOr<Reply> Get() {
    if (!error_.ok()) return Named(error_);
    absl::StatusOr<std::string> bytes = call_.get();
    if (!bytes.ok()) return Named(bytes.status());
    absl::StatusOr<Reply> reply = ParseMessage<Reply>(*bytes, absl::StatusCode::kInternal, "reply");
    if (!reply.ok()) return Named(reply.status());
    return reply;
  }

 private:
  absl::Status Named(const absl::Status& s) const {
    return absl::Status(s.code(), absl::StrCat(what_, ": ", s.message()));
  }
  std::future<absl::StatusOr<std::string>> call_;
  absl::Status error_;
  std::string what_;
};

// The RL job's view of a role actor: its id and how errors name it.
class RoleStub {
 public:
  RoleStub(Client& client, std::string actor_id, std::string name)
      : client_(&client), id_(std::move(actor_id)), name_(std::move(name)) {}
  const std::string& actor_id() const { return id_; }
  const std::string& name() const { return name_; }

 protected:
  template <typename Request, typename Reply>
  Pending<Reply> Call(const ProtoMethod<Request, Reply>& method, const Request& request) const {
    return Pending<Reply>(client_->CallAsync(ActorHandle{id_}, method.name, request.SerializeAsString()),
                          absl::StrCat(name_, ": ", method.name));
  }
  // A request that could not be made (its tensors did not encode) is the answer.
  template <typename Request, typename Reply>
  Pending<Reply> Call(const ProtoMethod<Request, Reply>& method,
                      const absl::StatusOr<Request>& request) const {
    if (!request.ok()) return Pending<Reply>(request.status(), absl::StrCat(name_, ": ", method.name));
    return Call(method, *request);
  }
  // The version or port a method answers, waited for.
  absl::StatusOr<int64_t> Version(const ProtoMethod<pb::Empty, pb::Version>& method) const;
  absl::StatusOr<int64_t> Port(const ProtoMethod<pb::Empty, pb::Port>& method) const;

  Client* client_;
  std::string id_, name_;
};

class TrainerStub : public RoleStub {
 public:
  using RoleStub::RoleStub;
  absl::StatusOr<int64_t> Port() const { return RoleStub::Port(role::trainer::kPort); }
  // Every rank of the trainer must train on the same batch at once (their TP collective).
  // `encoded_batch`: EncodeTrainBatch's bytes.
  Pending<pb::TrainReply> Train(std::string encoded_batch) const;
  Pending<pb::SyncWeightsReply> SyncWeights(const pb::SyncWeightsRequest& request) const {
    return Call(role::trainer::kSyncWeights, request);
  }
  Pending<pb::WsSendReply> WsSend(const pb::WsRequest& request) const {
    return Call(role::trainer::kWsSend, request);
  }
  absl::StatusOr<int64_t> Version() const { return RoleStub::Version(role::trainer::kVersion); }
};

class EngineStub : public RoleStub {
 public:
  using RoleStub::RoleStub;
  absl::StatusOr<int64_t> Port() const { return RoleStub::Port(role::engine::kPort); }
  // FailedPrecondition: the engine is not AWAKE (a restarted engine comes back EMPTY, without
  // weights); see Recoverable.
  Pending<pb::GenerateReply> Generate(const absl::StatusOr<pb::GenerateRequest>& request) const {
    return Call(role::engine::kGenerate, request);
  }
  Pending<pb::WsReceiveReply> WsReceive(const pb::WsRequest& request) const {
    return Call(role::engine::kWsReceive, request);
  }
  // Answers the engine's state: role::engine::kAsleep once asleep.
  Pending<pb::EngineState> Sleep(bool keep_weights) const;
  Pending<pb::EngineState> WakeUp() const { return Call(role::engine::kWakeUp, pb::Empty()); }
  Pending<pb::EngineState> State() const { return Call(role::engine::kState, pb::Empty()); }
  absl::StatusOr<int64_t> Version() const { return RoleStub::Version(role::engine::kVersion); }

  // Whether a failed engine call is worth the job's recovery (push the current weights, call
  // again), decided on the code alone: the engine died and the runtime restarts it
  // (Unavailable, DeadlineExceeded), or it came back without weights (FailedPrecondition).
  static bool Recoverable(const absl::Status& s);
};

class RewardStub : public RoleStub {
 public:
  using RoleStub::RoleStub;
  // `encoded_rollout`: EncodeRollout's bytes (the reference takes the same).
  Pending<pb::ScoreReply> Score(const std::vector<Example>& examples, std::string encoded_rollout) const {
    return Call(role::reward::kScore, role::MakeScoreRequest(examples, std::move(encoded_rollout)));
  }
};

class ReferenceStub : public RoleStub {
 public:
  using RoleStub::RoleStub;
  Pending<pb::LogprobsReply> Logprobs(std::string encoded_rollout) const;
};

}  // namespace skyrl::rl
