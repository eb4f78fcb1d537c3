// grpo_generator: one TP rank of an inference engine (GeneratorEngine), as an actor of
// skyrl-actor-host-rl. An engine's ranks form their own TCP group as the trainer's do ("port"
// on rank 0), and every rank of an engine gets the same generate call. Weights arrive through
// ws_receive, or through load_shard from every trainer rank (gathered, then cut to this rank).
// Methods and wire: role_protocol.h, role::engine. One call at a time (max_concurrency 1).
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rl/algo/checkpoint.h"
#include "rl/job/role_env.h"
#include "rl/job/role_protocol.h"
#include "rl/job/sync_layout.h"
#include "rl/job/tp_group.h"
#include "rl/roles/generator_engine.h"
#include "rl/tasks/tokenizer.h"
#include "runtime/actor/actor.h"
#include "weight_sync/tcp/tcp_transport.h"

namespace skyrl::rl {
namespace {

class GeneratorActor : public Actor {
 public:
  static absl::StatusOr<std::unique_ptr<GeneratorActor>> Create(absl::string_view init) {
    auto args = DecodeRoleArgs(init);
    if (!args.ok()) return args.status();
    auto setup = RoleSetup(*args);
    if (!setup.ok()) return setup.status();
    // The engine's TP is the group the driver made (args->world), which may override the file's.
    if (auto st = ValidateTensorParallel(setup->model, args->world, "generator.tensor_parallel_size");
        !st.ok())
      return st;
    auto self = std::unique_ptr<GeneratorActor>(new GeneratorActor());
    self->setup_ = *setup;
    self->args_ = *args;
    // The engine's own TP group, set up as the trainer's (rank 0 binds, the others connect).
    if (auto st = self->group_.Join(*args); !st.ok()) return st;
    if (self->group_.comm()) {
      auto engine = GeneratorEngine::Create(setup->model, self->group_.comm());
      if (!engine.ok()) return engine.status();
      self->engine_ = std::move(*engine);
    }
    return self;
  }
  static void RegisterMethods(MethodTable<GeneratorActor>& t) {
    t.Add(role::engine::kLoadShard, &GeneratorActor::LoadShard);
    t.Add(role::engine::kGenerate, &GeneratorActor::Generate);
    t.Add(role::engine::kWsReceive, &GeneratorActor::WsReceive);
    t.Add(role::engine::kSleep, &GeneratorActor::Sleep);
    t.Add(role::engine::kWakeUp, &GeneratorActor::WakeUp);
    t.Add(role::engine::kVersion, &GeneratorActor::Version);
    t.Add(role::engine::kState, &GeneratorActor::EngineState);
    t.Add(role::engine::kPid, &GeneratorActor::Pid);
    t.Add(role::engine::kPort, &GeneratorActor::Port);
  }
  absl::StatusOr<std::string> Port(absl::string_view) { return absl::StrCat(group_.port()); }

  // One trainer rank's shard; the version swaps in once every rank's shard is here. Returns
  // the engine's version after the call. A version at or below the current one is ignored (a
  // retried push), not an error.
  absl::StatusOr<std::string> LoadShard(absl::string_view args) {
    if (auto s = Ready(); !s.ok()) return s;
    auto request = role::DecodeLoadShardRequest(args);
    if (!request.ok()) return request.status();
    const int64_t version = request->version;
    const int world = request->world;
    if (version <= engine_->version()) return absl::StrCat(engine_->version());
    auto& pending = pending_[version];
    pending.resize(world);
    pending[request->rank] = std::move(request->shard);
    for (const auto& p : pending) {
      if (p.empty()) return absl::StrCat(engine_->version());  // more ranks to come
    }
    absl::StatusOr<NamedTensors> full =
        world == 1 ? absl::StatusOr<NamedTensors>(pending[0]) : GatherShards(setup_.model, pending);
    if (!full.ok()) return full.status();
    if (args_.world > 1) full = ShardParameters(setup_.model, *full, args_.world, args_.rank);
    if (!full.ok()) return full.status();
    if (auto s = engine_->LoadWeights(version, *full); !s.ok()) return s;
    pending_.erase(pending_.begin(), pending_.upper_bound(version));
    return absl::StrCat(engine_->version());
  }

  // Receives the trainer's version through the TCP transport and swaps it in.
  absl::StatusOr<std::string> WsReceive(absl::string_view args) {
    if (auto s = Ready(); !s.ok()) return s;
    auto a = role::DecodeWsRequest(args);
    if (!a.ok()) return a.status();
    const int64_t version = a->version;
    if (version < 0 || a->rank < 0 || a->rank >= a->engines * a->engine_tp) {
      return absl::InvalidArgumentError(
          "ws_receive: version and receiver rank (0..engines*engine_tp-1) needed");
    }
    const auto t0 = RoleClock::now();
    if (!ws_ || ws_engines_ != a->engines || ws_prefix_ != a->prefix || ws_rank_ != a->rank) {
      if (!rendezvous_) {
        auto r = ConnectRendezvous("weight sync");
        if (!r.ok()) return r.status();
        rendezvous_ = std::move(*r);
      }
      auto plan = MakePolicySync(setup_.model, a->trainer_tp, a->engines, a->engine_tp);
      if (!plan.ok()) return plan.status();
      auto sched = (*plan)->ReceiverSchedule(a->rank);
      if (!sched.ok()) return sched.status();
      weight_sync::TcpOptions o;
      o.rendezvous = rendezvous_.get();
      o.key_prefix = a->prefix;
      o.receiver_rank = a->rank;
      o.bind_host = a->host;
      o.transfer.io_timeout = absl::Seconds(a->io_timeout_s);
      o.transfer.sync_timeout = absl::Seconds(a->io_timeout_s * 3);
      ws_.reset();  // a new listener replaces the old one's published address
      auto transport = weight_sync::CreateTcpTransport(o);
      if (!transport.ok()) return transport.status();
      ws_ = std::move(*transport);
      ws_schedule_ = std::move(*sched);
      ws_shard_ = std::make_unique<weight_sync::VersionedShard>(ws_schedule_.shard_bytes);
      ws_engines_ = a->engines;
      ws_prefix_ = a->prefix;
      ws_rank_ = a->rank;
    }
    if (auto s = ws_->Receive(static_cast<uint64_t>(version) + 1, ws_schedule_, *ws_shard_); !s.ok())
      return s;
    const auto t1 = RoleClock::now();
    weight_sync::VersionedShard::Snapshot snap = ws_shard_->Current();
    if (!snap.bytes) return absl::InternalError("ws_receive: no bytes after the sync");
    auto full = UnflattenShard(setup_.model, args_.world, *snap.bytes);
    if (!full.ok()) return full.status();
    if (version > engine_->version()) {
      if (auto s = engine_->LoadWeights(version, *full); !s.ok()) return s;
    }
    return role::Encode(role::WsReceiveReply{engine_->version(), SecondsSince(t0), SecondsSince(t1)});
  }

  // FailedPrecondition when the engine is not AWAKE (EngineStub::Recoverable relies on it).
  absl::StatusOr<std::string> Generate(absl::string_view args) {
    if (auto s = Ready(); !s.ok()) return s;
    const auto t0 = RoleClock::now();
    auto request = role::DecodeGenerateRequest(args);
    if (!request.ok()) return request.status();
    auto r =
        engine_->Generate(request->batch, setup_.sampling, Tokenizer::kEos, Tokenizer::kPad, request->seed);
    if (!r.ok()) return r.status();
    return role::Encode(role::GenerateReply{r->version, SecondsSince(t0), std::move(r->rollout)});
  }
  absl::StatusOr<std::string> Sleep(absl::string_view level) {
    if (auto s = Ready(); !s.ok()) return s;
    if (level != role::engine::kSleepKeep && level != role::engine::kSleepDrop) {
      return absl::InvalidArgumentError(absl::StrCat("sleep: level must be keep or drop, got '", level, "'"));
    }
    if (auto s =
            engine_->Sleep(level == role::engine::kSleepKeep ? GeneratorEngine::SleepLevel::kKeepWeights
                                                             : GeneratorEngine::SleepLevel::kDropWeights);
        !s.ok()) {
      return s;
    }
    ++sleeps_;
    return std::string(GeneratorEngine::StateName(engine_->state()));
  }
  absl::StatusOr<std::string> WakeUp(absl::string_view) {
    if (auto s = Ready(); !s.ok()) return s;
    if (auto s = engine_->WakeUp(); !s.ok()) return s;
    ++wakes_;
    return std::string(GeneratorEngine::StateName(engine_->state()));
  }
  absl::StatusOr<std::string> Version(absl::string_view) {
    if (auto s = Ready(); !s.ok()) return s;
    return absl::StrCat(engine_->version());
  }
  absl::StatusOr<std::string> EngineState(absl::string_view) {
    if (auto s = Ready(); !s.ok()) return s;
    const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
    return role::Encode(role::EngineStateReply{std::string(GeneratorEngine::StateName(engine_->state())),
                                               engine_->version(), sleeps_, wakes_, cvd ? cvd : ""});
  }
  absl::StatusOr<std::string> Pid(absl::string_view) { return absl::StrCat(getpid()); }

 private:
  GeneratorActor() = default;
  // Rank 0 of an engine group: the group is complete once every rank has connected.
  absl::Status Ready() {
    if (engine_) return absl::OkStatus();
    if (auto s = group_.Complete("engine"); !s.ok()) return s;
    auto engine = GeneratorEngine::Create(setup_.model, group_.comm());
    if (!engine.ok()) return engine.status();
    engine_ = std::move(*engine);
    return absl::OkStatus();
  }
  RoleArgs args_;
  TpGroup group_;
  JobSetup setup_;
  std::unique_ptr<GeneratorEngine> engine_;
  std::map<int64_t, std::vector<NamedTensors>> pending_;  // version -> shards by trainer rank
  std::unique_ptr<weight_sync::Rendezvous> rendezvous_;
  std::unique_ptr<weight_sync::Transport> ws_;
  weight_sync::RankSchedule ws_schedule_;
  std::unique_ptr<weight_sync::VersionedShard> ws_shard_;
  int ws_engines_ = 0, ws_rank_ = -1;
  std::string ws_prefix_;
  int64_t sleeps_ = 0, wakes_ = 0;  // successful sleep / wake_up calls since this process started
};
SKYRL_REGISTER_ACTOR(GeneratorActor, role::engine::kClass);

}  // namespace
}  // namespace skyrl::rl
