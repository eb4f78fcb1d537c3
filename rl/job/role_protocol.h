// The RL roles' wire protocol, written once for both sides: each role's class and method
// names, and each method's request and reply with their encoding. The role actors
// (trainer_actor.cc, generator_actor.cc, reward_actor.cc, reference_actor.cc) decode requests
// and encode replies with these; the driver's typed stubs (role_stubs.h) do the opposite.
//
// Headers are JSON objects; tensors travel as checkpoint archives (EncodeTensors), several
// parts framed by PackParts (wire.h). Every reply of a method that does model work carries
// compute_s, the seconds it computed, so the driver can tell its own overhead apart.
// Decoders answer InvalidArgument (requests) or Internal (replies) naming the method and field.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rl/algo/sampler.h"
#include "rl/policy/policy.h"
#include "rl/tasks/tasks.h"
#include "rl/train/grpo_step.h"

namespace skyrl::rl::role {

// grpo_trainer: one TP rank of the trainer.
namespace trainer {
inline constexpr char kClass[] = "grpo_trainer";
inline constexpr char kPort[] = "port";                 // "" -> TP group port (rank 0)
inline constexpr char kTrain[] = "train";               // EncodeTrainBatch -> TrainReply
inline constexpr char kSyncWeights[] = "sync_weights";  // SyncWeightsRequest -> SyncWeightsReply
inline constexpr char kWsSend[] = "ws_send";            // WsRequest -> WsSendReply
inline constexpr char kSave[] = "save";                 // directory -> version
inline constexpr char kLoad[] = "load";                 // directory -> version
inline constexpr char kVersion[] = "version";           // "" -> version
}  // namespace trainer

// grpo_generator: one TP rank of an inference engine.
namespace engine {
inline constexpr char kClass[] = "grpo_generator";
inline constexpr char kPort[] = "port";
inline constexpr char kLoadShard[] = "load_shard";  // LoadShardRequest -> version
inline constexpr char kGenerate[] = "generate";     // GenerateRequest -> GenerateReply
inline constexpr char kWsReceive[] = "ws_receive";  // WsRequest -> WsReceiveReply
inline constexpr char kSleep[] = "sleep";           // kSleepKeep | kSleepDrop -> state name
inline constexpr char kWakeUp[] = "wake_up";        // "" -> state name
inline constexpr char kVersion[] = "version";       // "" -> version
inline constexpr char kState[] = "state";           // "" -> EngineStateReply (tests, operators)
inline constexpr char kPid[] = "pid";               // "" -> pid (tests: the process to signal)
inline constexpr char kSleepKeep[] = "keep";
inline constexpr char kSleepDrop[] = "drop";
inline constexpr char kAsleep[] = "ASLEEP";  // what sleep answers when the engine went to sleep
}  // namespace engine

// grpo_reward: rule-based rewards of the config's task.
namespace reward {
inline constexpr char kClass[] = "grpo_reward";
inline constexpr char kScore[] = "score";  // ScoreRequest -> ScoreReply
}  // namespace reward

// grpo_reference: the frozen initial policy at TP 1.
namespace reference {
inline constexpr char kClass[] = "grpo_reference";
inline constexpr char kLogprobs[] = "logprobs";  // EncodeRollout -> LogprobsReply
}  // namespace reference

// ---- trainer ----

struct TrainReply {
  double loss = 0, policy_loss = 0, kl = 0, clip_fraction = 0, grad_norm = 0;
  int64_t version = 0;  // the shard's version after the update
  double compute_s = 0;
};
std::string Encode(const TrainReply& r);
absl::StatusOr<TrainReply> DecodeTrainReply(absl::string_view bytes);

// Push sync: the trainer rank sends its shard to each engine with load_shard calls.
struct SyncWeightsRequest {
  std::vector<std::string> engines;  // actor ids
};
struct SyncWeightsReply {
  int64_t version = 0;
  // Engines that could not take the shard (dead, restarting), each with its error: reported,
  // not fatal; the driver retries them.
  std::vector<std::pair<std::string, std::string>> failed;
  double encode_s = 0, seconds = 0;
  int64_t bytes = 0;
};
std::string Encode(const SyncWeightsRequest& r);
absl::StatusOr<SyncWeightsRequest> DecodeSyncWeightsRequest(absl::string_view bytes);
std::string Encode(const SyncWeightsReply& r);
absl::StatusOr<SyncWeightsReply> DecodeSyncWeightsReply(absl::string_view bytes);

// One version through weight_sync's TCP transport, for ws_send (trainer ranks) and
// ws_receive (engine ranks); addresses meet under `prefix` in the head's KV.
struct WsRequest {
  std::string prefix;
  int engines = 0, engine_tp = 1;
  int trainer_tp = 1;              // ws_receive
  int rank = -1;                   // ws_receive: the receiver rank, engine e's rank r at e * engine_tp + r
  std::string host = "127.0.0.1";  // ws_receive: the address to listen on and advertise
  int64_t version = -1;            // ws_receive: the trainer's version being sent
  double io_timeout_s = 20;
};
std::string Encode(const WsRequest& r);
absl::StatusOr<WsRequest> DecodeWsRequest(absl::string_view bytes);

struct WsSendReply {
  int64_t version = 0;
  double encode_s = 0, seconds = 0;
  int64_t bytes = 0;
  // Cumulative over the shard's transports: connections by path and bytes written straight
  // into same-host receivers' buffers.
  int64_t tcp_connections = 0, local_connections = 0, direct_write_bytes = 0;
};
std::string Encode(const WsSendReply& r);
absl::StatusOr<WsSendReply> DecodeWsSendReply(absl::string_view bytes);

// ---- engine ----

struct WsReceiveReply {
  int64_t version = 0;  // the engine's, after the swap
  double seconds = 0, decode_s = 0;
};
std::string Encode(const WsReceiveReply& r);
absl::StatusOr<WsReceiveReply> DecodeWsReceiveReply(absl::string_view bytes);

// One trainer rank's shard of one version (push sync).
struct LoadShardRequest {
  int64_t version = -1;
  int rank = -1, world = 0;
  NamedTensors shard;
};
absl::StatusOr<std::string> Encode(const LoadShardRequest& r);
absl::StatusOr<LoadShardRequest> DecodeLoadShardRequest(absl::string_view bytes);

struct GenerateRequest {
  uint64_t seed = 0;
  PromptBatch batch;
};
absl::StatusOr<std::string> Encode(const GenerateRequest& r);
absl::StatusOr<GenerateRequest> DecodeGenerateRequest(absl::string_view bytes);

struct GenerateReply {
  int64_t version = -1;  // the weights it generated with
  double compute_s = 0;
  Rollout rollout;
};
absl::StatusOr<std::string> Encode(const GenerateReply& r);
absl::StatusOr<GenerateReply> DecodeGenerateReply(absl::string_view bytes);

struct EngineStateReply {
  std::string state;  // GeneratorEngine::StateName
  int64_t version = 0;
  int64_t sleeps = 0, wakes = 0;  // successful sleep / wake_up calls since the process started
  std::string cuda_visible_devices;
};
std::string Encode(const EngineStateReply& r);
absl::StatusOr<EngineStateReply> DecodeEngineStateReply(absl::string_view bytes);

// ---- reward and reference ----

struct ScoreRequest {
  std::vector<Example> examples;
  Rollout rollout;
};
absl::StatusOr<std::string> Encode(const ScoreRequest& r);
// The same with the rollout already encoded (EncodeRollout), so one encoding serves the reward
// and the reference.
std::string EncodeScoreRequest(const std::vector<Example>& examples, const std::string& encoded_rollout);
absl::StatusOr<ScoreRequest> DecodeScoreRequest(absl::string_view bytes);

struct ScoreReply {
  Scored scored;
  double compute_s = 0;
};
std::string Encode(const ScoreReply& r);
absl::StatusOr<ScoreReply> DecodeScoreReply(absl::string_view bytes);

struct LogprobsReply {
  double compute_s = 0;
  torch::Tensor ref;  // [B, N]
};
absl::StatusOr<std::string> Encode(const LogprobsReply& r);
absl::StatusOr<LogprobsReply> DecodeLogprobsReply(absl::string_view bytes);

// A version number or port as the methods answer it (decimal text).
absl::StatusOr<int64_t> DecodeNumber(absl::string_view bytes, absl::string_view what);

}  // namespace skyrl::rl::role
