// The RL roles' methods, declared once for both sides: each role's class name, and each
// method with its request and reply (protos/skyrl/rl.proto) as a ProtoMethod. The role actors
// (trainer_actor.cc, generator_actor.cc, reward_actor.cc, reference_actor.cc) register their
// methods against these, and the driver's stubs (role_stubs.h) call them, so a request or
// reply of the wrong type on either side does not compile.
//
// Also here: what a request must hold beyond its type (Check*, InvalidArgument naming the
// method and field), and the conversions between the messages' tensor archives and torch.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rl/algo/sampler.h"
#include "rl/tasks/tasks.h"
#include "rl/train/grpo_step.h"
#include "runtime/common/proto_method.h"
#include "skyrl/rl.pb.h"

namespace skyrl::rl {

namespace pb = ::skyrl::v1::rl;  // the messages of protos/skyrl/rl.proto

namespace role {

// grpo_trainer: one TP rank of the trainer.
namespace trainer {
inline constexpr char kClass[] = "grpo_trainer";
inline constexpr ProtoMethod<pb::Empty, pb::Port> kPort{"port"};  // rank 0: the TP group port
// Every rank of the trainer must train on the same batch at once (their TP collective).
inline constexpr ProtoMethod<pb::TrainRequest, pb::TrainReply> kTrain{"train"};
inline constexpr ProtoMethod<pb::SyncWeightsRequest, pb::SyncWeightsReply> kSyncWeights{"sync_weights"};
inline constexpr ProtoMethod<pb::WsRequest, pb::WsSendReply> kWsSend{"ws_send"};
inline constexpr ProtoMethod<pb::Directory, pb::Version> kSave{"save"};
inline constexpr ProtoMethod<pb::Directory, pb::Version> kLoad{"load"};
inline constexpr ProtoMethod<pb::Empty, pb::Version> kVersion{"version"};
}  // namespace trainer

// grpo_generator: one TP rank of an inference engine.
namespace engine {
inline constexpr char kClass[] = "grpo_generator";
inline constexpr ProtoMethod<pb::Empty, pb::Port> kPort{"port"};
// Answers the engine's version after the call.
inline constexpr ProtoMethod<pb::LoadShardRequest, pb::Version> kLoadShard{"load_shard"};
inline constexpr ProtoMethod<pb::GenerateRequest, pb::GenerateReply> kGenerate{"generate"};
inline constexpr ProtoMethod<pb::WsRequest, pb::WsReceiveReply> kWsReceive{"ws_receive"};
inline constexpr ProtoMethod<pb::SleepRequest, pb::EngineState> kSleep{"sleep"};
inline constexpr ProtoMethod<pb::Empty, pb::EngineState> kWakeUp{"wake_up"};
inline constexpr ProtoMethod<pb::Empty, pb::Version> kVersion{"version"};
// For tests and operators: its state, counts, devices and process id.
inline constexpr ProtoMethod<pb::Empty, pb::EngineState> kState{"state"};
inline constexpr char kAsleep[] = "ASLEEP";  // EngineState.state once the engine went to sleep
}  // namespace engine

// grpo_reward: rule-based rewards of the config's task.
namespace reward {
inline constexpr char kClass[] = "grpo_reward";
inline constexpr ProtoMethod<pb::ScoreRequest, pb::ScoreReply> kScore{"score"};
}  // namespace reward

// grpo_reference: the frozen initial policy at TP 1.
namespace reference {
inline constexpr char kClass[] = "grpo_reference";
inline constexpr ProtoMethod<pb::LogprobsRequest, pb::LogprobsReply> kLogprobs{"logprobs"};
}  // namespace reference

// ---- checks: InvalidArgument naming the method and field ----

// prefix set and engines >= 1; engine_tp, trainer_tp and io_timeout_s not negative.
absl::Status CheckWsSend(const pb::WsRequest& r);
// CheckWsSend's, and the version (0 or more) and the receiver rank (0 .. engines*engine_tp-1).
absl::Status CheckWsReceive(const pb::WsRequest& r);
// world >= 1, 0 <= rank < world, version >= 0.
absl::Status CheckLoadShard(const pb::LoadShardRequest& r);
// What a WsRequest's unset fields mean.
inline int EngineTp(const pb::WsRequest& r) { return r.engine_tp() > 0 ? r.engine_tp() : 1; }
inline int TrainerTp(const pb::WsRequest& r) { return r.trainer_tp() > 0 ? r.trainer_tp() : 1; }
inline std::string Host(const pb::WsRequest& r) { return r.host().empty() ? "127.0.0.1" : r.host(); }
inline double IoTimeoutS(const pb::WsRequest& r) { return r.io_timeout_s() > 0 ? r.io_timeout_s() : 20; }

// ---- tensors in the messages ----

absl::StatusOr<pb::GenerateRequest> MakeGenerateRequest(uint64_t seed, const PromptBatch& batch);
// InvalidArgument unless the batch holds the tensors "tokens" and "valid".
absl::StatusOr<PromptBatch> BatchOf(const pb::GenerateRequest& r);
absl::StatusOr<pb::LoadShardRequest> MakeLoadShardRequest(int64_t version, int rank, int world,
                                                          const NamedTensors& shard);
absl::StatusOr<pb::LogprobsReply> MakeLogprobsReply(double compute_s, const torch::Tensor& ref);
// Internal unless the reply holds one tensor.
absl::StatusOr<torch::Tensor> RefOf(const pb::LogprobsReply& r);
// `encoded_rollout`: EncodeRollout's bytes, so one encoding serves the reward and the reference.
pb::ScoreRequest MakeScoreRequest(const std::vector<Example>& examples, std::string encoded_rollout);
std::vector<Example> ExamplesOf(const pb::ScoreRequest& r);
pb::ScoreReply MakeScoreReply(const Scored& scored, double compute_s);
Scored ScoredOf(const pb::ScoreReply& r);

}  // namespace role
}  // namespace skyrl::rl
