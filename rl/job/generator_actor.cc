// grpo_generator: one TP rank of an inference engine (GeneratorEngine), as an actor of
// skyrl-actor-host-rl. An engine's ranks form their own TCP group as the trainer's do ("port"
// on rank 0), and every rank of an engine gets the same generate call. Weights arrive through
// ws_receive, or through load_shard from every trainer rank (gathered, then cut to this rank).
// Methods: role_protocol.h, role::engine (rl.proto). One call at a time (max_concurrency 1).
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
    t.Add(role::engine::kPort, &GeneratorActor::Port);
  }
  absl::StatusOr<pb::Port> Port(const pb::Empty&) {
    pb::Port p;
    p.set_port(group_.port());
    return p;
  }

  // One trainer rank's shard; the version swaps in once every rank's shard is here. Returns
  // the engine's version after the call. A version at or below the current one is ignored (a
  // retried push), not an error.
  absl::StatusOr<pb::Version> LoadShard(const pb::LoadShardRequest& request) {
    if (auto s = role::CheckLoadShard(request); !s.ok()) return s;
    if (auto s = Ready(); !s.ok()) return s;
    const int64_t version = request.version();
    const int world = request.world();
    if (version <= engine_->version()) return CurrentVersion();
    auto shard = DecodeTensors(request.shard());
    if (!shard.ok()) return shard.status();
    auto& pending = pending_[version];
    pending.resize(world);
    pending[request.rank()] = std::move(*shard);
    for (const auto& p : pending) {
      if (p.empty()) return CurrentVersion();  // more ranks to come
    }
    absl::StatusOr<NamedTensors> full =
        world == 1 ? absl::StatusOr<NamedTensors>(pending[0]) : GatherShards(setup_.model, pending);
    if (!full.ok()) return full.status();
    if (args_.world > 1) full = ShardParameters(setup_.model, *full, args_.world, args_.rank);
    if (!full.ok()) return full.status();
    if (auto s = engine_->LoadWeights(version, *full); !s.ok()) return s;
    pending_.erase(pending_.begin(), pending_.upper_bound(version));
    return CurrentVersion();
  }

  // Receives the trainer's version through the TCP transport and swaps it in.
  absl::StatusOr<pb::WsReceiveReply> WsReceive(const pb::WsRequest& a) {
    if (auto s = role::CheckWsReceive(a); !s.ok()) return s;
    if (auto s = Ready(); !s.ok()) return s;
    const int64_t version = a.version();
    const auto t0 = RoleClock::now();
    if (!ws_ || ws_engines_ != a.engines() || ws_prefix_ != a.prefix() || ws_rank_ != a.rank()) {
      if (!rendezvous_) {
        auto r = ConnectRendezvous("weight sync");
        if (!r.ok()) return r.status();
        rendezvous_ = std::move(*r);
      }
      auto plan = MakePolicySync(setup_.model, role::TrainerTp(a), a.engines(), role::EngineTp(a));
      if (!plan.ok()) return plan.status();
      auto sched = (*plan)->ReceiverSchedule(a.rank());
      if (!sched.ok()) return sched.status();
      weight_sync::TcpOptions o;
      o.rendezvous = rendezvous_.get();
      o.key_prefix = a.prefix();
      o.receiver_rank = a.rank();
      o.bind_host = role::Host(a);
      o.transfer.io_timeout = absl::Seconds(role::IoTimeoutS(a));
      o.transfer.sync_timeout = absl::Seconds(role::IoTimeoutS(a) * 3);
      ws_.reset();  // a new listener replaces the old one's published address
      auto transport = weight_sync::CreateTcpTransport(o);
      if (!transport.ok()) return transport.status();
      ws_ = std::move(*transport);
      ws_schedule_ = std::move(*sched);
      ws_shard_ = std::make_unique<weight_sync::VersionedShard>(ws_schedule_.shard_bytes);
      ws_engines_ = a.engines();
      ws_prefix_ = a.prefix();
      ws_rank_ = a.rank();
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
    pb::WsReceiveReply r;
    r.set_version(engine_->version());
    r.set_seconds(SecondsSince(t0));
    r.set_decode_s(SecondsSince(t1));
    return r;
  }

  // FailedPrecondition when the engine is not AWAKE (EngineStub::Recoverable relies on it).
  absl::StatusOr<pb::GenerateReply> Generate(const pb::GenerateRequest& request) {
    if (auto s = Ready(); !s.ok()) return s;
    const auto t0 = RoleClock::now();
    auto batch = role::BatchOf(request);
    if (!batch.ok()) return batch.status();
    auto r = engine_->Generate(*batch, setup_.sampling, Tokenizer::kEos, Tokenizer::kPad, request.seed());
    if (!r.ok()) return r.status();
    auto rollout = EncodeRollout(r->rollout);
    if (!rollout.ok()) return rollout.status();
    pb::GenerateReply reply;
    reply.set_version(r->version);
    reply.set_compute_s(SecondsSince(t0));
    reply.set_rollout(*std::move(rollout));
    return reply;
  }
  absl::StatusOr<pb::EngineState> Sleep(const pb::SleepRequest& request) {
    if (auto s = Ready(); !s.ok()) return s;
    if (auto s = engine_->Sleep(request.keep_weights() ? GeneratorEngine::SleepLevel::kKeepWeights
                                                       : GeneratorEngine::SleepLevel::kDropWeights);
        !s.ok()) {
      return s;
    }
    ++sleeps_;
    return State();
  }
  absl::StatusOr<pb::EngineState> WakeUp(const pb::Empty&) {
    if (auto s = Ready(); !s.ok()) return s;
    if (auto s = engine_->WakeUp(); !s.ok()) return s;
    ++wakes_;
    return State();
  }
  absl::StatusOr<pb::Version> Version(const pb::Empty&) {
    if (auto s = Ready(); !s.ok()) return s;
    return CurrentVersion();
  }
  absl::StatusOr<pb::EngineState> EngineState(const pb::Empty&) {
    if (auto s = Ready(); !s.ok()) return s;
    return State();
  }

 private:
  GeneratorActor() = default;
  pb::Version CurrentVersion() const {
    pb::Version v;
    v.set_version(engine_->version());
    return v;
  }
  pb::EngineState State() const {
    pb::EngineState s;
    s.set_state(std::string(GeneratorEngine::StateName(engine_->state())));
    s.set_version(engine_->version());
    s.set_sleeps(sleeps_);
    s.set_wakes(wakes_);
    const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
    s.set_cuda_visible_devices(cvd ? cvd : "");
    s.set_pid(getpid());
    return s;
  }
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
