// The driver's typed view of the RL role actors: one stub per role over skyrl::Client, whose
// methods encode the request and decode the reply with role_protocol.h, so no method name or
// wire field is written in the driver. A method returns a Pending<Reply> (the call is in
// flight) or, for the small ones, the reply. Every error names the actor ("trainer rank 1:
// train: ...") and keeps the code it came with.
// Stubs are cheap values; safe for concurrent use (the Client is).
#pragma once

#include <functional>
#include <future>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rl/job/role_protocol.h"
#include "runtime/client/client.h"

namespace skyrl::rl {

// A call in flight; Get() waits for its reply, decoded. Move-only; Get() once.
template <typename Reply>
class Pending {
 public:
  using Decode = std::function<absl::StatusOr<Reply>(absl::string_view)>;
  Pending(std::future<absl::StatusOr<std::string>> call, Decode decode, std::string what)
      : call_(std::move(call)), decode_(std::move(decode)), what_(std::move(what)) {}
  // An answer known before any call (a request that could not be encoded).
  Pending(absl::Status error, std::string what) : error_(std::move(error)), what_(std::move(what)) {}

  absl::StatusOr<Reply> Get() {
    if (!error_.ok()) return Named(error_);
    absl::StatusOr<std::string> bytes = call_.get();
    if (!bytes.ok()) return Named(bytes.status());
    absl::StatusOr<Reply> reply = decode_(*bytes);
    if (!reply.ok()) return Named(reply.status());
    return reply;
  }

 private:
  absl::Status Named(const absl::Status& s) const {
    return absl::Status(s.code(), absl::StrCat(what_, ": ", s.message()));
  }
  std::future<absl::StatusOr<std::string>> call_;
  Decode decode_;
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
  template <typename Reply>
  Pending<Reply> Call(const char* method, std::string args, typename Pending<Reply>::Decode decode) const {
    return Pending<Reply>(client_->CallAsync(ActorHandle{id_}, method, std::move(args)), std::move(decode),
                          absl::StrCat(name_, ": ", method));
  }
  template <typename Reply>
  Pending<Reply> Call(const char* method, absl::StatusOr<std::string> args,
                      typename Pending<Reply>::Decode decode) const {
    if (!args.ok()) return Pending<Reply>(args.status(), absl::StrCat(name_, ": ", method));
    return Call<Reply>(method, std::move(*args), std::move(decode));
  }
  // A number the actor answers as text (version, port).
  absl::StatusOr<int64_t> Number(const char* method) const;
  Pending<std::string> Text(const char* method, std::string args) const;

  Client* client_;
  std::string id_, name_;
};

class TrainerStub : public RoleStub {
 public:
  using RoleStub::RoleStub;
  absl::StatusOr<int64_t> Port() const { return Number(role::trainer::kPort); }
  // Every rank of the trainer must train on the same batch at once (their TP collective).
  Pending<role::TrainReply> Train(const std::string& encoded_batch) const;
  Pending<role::SyncWeightsReply> SyncWeights(const role::SyncWeightsRequest& request) const;
  Pending<role::WsSendReply> WsSend(const role::WsRequest& request) const;
  absl::StatusOr<int64_t> Version() const { return Number(role::trainer::kVersion); }
};

class EngineStub : public RoleStub {
 public:
  using RoleStub::RoleStub;
  absl::StatusOr<int64_t> Port() const { return Number(role::engine::kPort); }
  // FailedPrecondition: the engine is not AWAKE (a restarted engine comes back EMPTY, without
  // weights); see Recoverable.
  Pending<role::GenerateReply> Generate(const role::GenerateRequest& request) const;
  Pending<role::WsReceiveReply> WsReceive(const role::WsRequest& request) const;
  // Answers the engine's state name: role::engine::kAsleep once asleep.
  Pending<std::string> Sleep(bool keep_weights) const;
  Pending<std::string> WakeUp() const;
  absl::StatusOr<int64_t> Version() const { return Number(role::engine::kVersion); }

  // Whether a failed engine call is worth the job's recovery (push the current weights, call
  // again), decided on the code alone: the engine died and the runtime restarts it
  // (Unavailable, DeadlineExceeded), or it came back without weights (FailedPrecondition).
  static bool Recoverable(const absl::Status& s);
};

class RewardStub : public RoleStub {
 public:
  using RoleStub::RoleStub;
  // `encoded_rollout`: EncodeRollout's bytes (the reference takes the same).
  Pending<role::ScoreReply> Score(const std::vector<Example>& examples,
                                  const std::string& encoded_rollout) const;
};

class ReferenceStub : public RoleStub {
 public:
  using RoleStub::RoleStub;
  Pending<role::LogprobsReply> Logprobs(const std::string& encoded_rollout) const;
};

}  // namespace skyrl::rl
