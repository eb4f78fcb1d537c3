// grpo_trainer: one TP rank of the trainer (TrainerShard: policy shard, frozen reference
// shard, AdamW), as an actor of skyrl-actor-host-rl. Rank 0 binds the TP group's port in its
// constructor and answers it from "port"; the driver passes host:port to ranks >= 1, whose
// constructors connect (TpGroup). Methods: role_protocol.h, role::trainer (rl.proto). Weights
// leave through ws_send (weight_sync's TCP transport on the PreparedSync plan, sync_layout.h)
// or sync_weights (pushed to each engine with load_shard calls: the fallback, and how a
// restarted engine catches up). One call at a time (max_concurrency 1).
#include <future>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rl/algo/checkpoint.h"
#include "rl/job/role_env.h"
#include "rl/job/role_protocol.h"
#include "rl/job/sync_layout.h"
#include "rl/job/tp_group.h"
#include "rl/roles/trainer_shard.h"
#include "rl/train/grpo_step.h"
#include "runtime/actor/actor.h"
#include "weight_sync/tcp/tcp_transport.h"

namespace skyrl::rl {
namespace {

class TrainerActor : public Actor {
 public:
  static absl::StatusOr<std::unique_ptr<TrainerActor>> Create(absl::string_view init) {
    auto args = DecodeRoleArgs(init);
    if (!args.ok()) return args.status();
    auto setup = RoleSetup(*args);
    if (!setup.ok()) return setup.status();
    // The TP size is the group the driver made (args->world), which may override the file's.
    if (auto st = ValidateTensorParallel(setup->model, args->world, "trainer.tp_size"); !st.ok()) return st;
    auto self = std::unique_ptr<TrainerActor>(new TrainerActor());
    self->args_ = *args;
    self->setup_ = *setup;
    // Rank 0 binds now and accepts in the background (see TpGroup).
    if (auto st = self->group_.Join(*args); !st.ok()) return st;
    if (self->group_.comm() && !self->shard_) {
      if (auto s = self->MakeShard(); !s.ok()) return s;
    }
    return self;
  }
  static void RegisterMethods(MethodTable<TrainerActor>& t) {
    t.Add(role::trainer::kPort, &TrainerActor::Port);
    t.Add(role::trainer::kTrain, &TrainerActor::Train);
    t.Add(role::trainer::kSyncWeights, &TrainerActor::SyncWeights);
    t.Add(role::trainer::kWsSend, &TrainerActor::WsSend);
    t.Add(role::trainer::kSave, &TrainerActor::Save);
    t.Add(role::trainer::kLoad, &TrainerActor::Load);
    t.Add(role::trainer::kVersion, &TrainerActor::Version);
  }

  absl::StatusOr<pb::Port> Port(const pb::Empty&) {
    pb::Port p;
    p.set_port(group_.port());
    return p;
  }

  // Every rank must be called with the same batch, concurrently.
  absl::StatusOr<pb::TrainReply> Train(const pb::TrainRequest& request) {
    if (auto s = Ready(); !s.ok()) return s;
    const auto t0 = RoleClock::now();
    auto batch = DecodeTrainBatch(request.batch());
    if (!batch.ok()) return batch.status();
    auto stats = shard_->Update(*batch);
    if (!stats.ok()) return stats.status();
    pb::TrainReply r;
    r.set_loss(stats->loss);
    r.set_policy_loss(stats->policy_loss);
    r.set_kl(stats->kl);
    r.set_clip_fraction(stats->clip_fraction);
    r.set_grad_norm(stats->grad_norm);
    r.set_version(shard_->version());
    r.set_compute_s(SecondsSince(t0));
    return r;
  }

  // Pushes this rank's shard of the current version to each engine (in parallel), straight
  // from this process.
  absl::StatusOr<pb::SyncWeightsReply> SyncWeights(const pb::SyncWeightsRequest& request) {
    if (auto s = Ready(); !s.ok()) return s;
    const auto t0 = RoleClock::now();
    if (!client_) {
      auto c = ConnectClient("sync_weights");
      if (!c.ok()) return c.status();
      client_ = std::move(*c);
    }
    auto shard =
        role::MakeLoadShardRequest(shard_->version(), args_.rank, args_.world, shard_->ExportShard());
    if (!shard.ok()) return shard.status();
    const std::string payload = shard->SerializeAsString();
    const double encode_s = SecondsSince(t0);
    std::vector<std::future<absl::StatusOr<std::string>>> calls;
    for (const auto& id : request.engines())
      calls.push_back(client_->CallAsync(ActorHandle{id}, role::engine::kLoadShard.name, payload));
    pb::SyncWeightsReply reply;
    for (size_t i = 0; i < calls.size(); ++i) {
      auto r = calls[i].get();
      if (r.ok()) continue;
      pb::EngineFailure* f = reply.add_failed();
      f->set_engine(request.engines(static_cast<int>(i)));
      f->set_error(r.status().ToString());
    }
    reply.set_version(shard_->version());
    reply.set_encode_s(encode_s);
    reply.set_seconds(SecondsSince(t0));
    reply.set_bytes(static_cast<int64_t>(payload.size()));
    return reply;
  }

  // Sends this rank's shard of the current version (as transport version = trainer version
  // + 1) to the engines that need its bytes, per the plan; returns once every receiver
  // confirmed.
  absl::StatusOr<pb::WsSendReply> WsSend(const pb::WsRequest& a) {
    if (auto s = role::CheckWsSend(a); !s.ok()) return s;
    if (auto s = Ready(); !s.ok()) return s;
    const auto t0 = RoleClock::now();
    if (!ws_ || ws_engines_ != a.engines() || ws_prefix_ != a.prefix()) {
      if (!rendezvous_) {
        auto r = ConnectRendezvous("weight sync");
        if (!r.ok()) return r.status();
        rendezvous_ = std::move(*r);
      }
      auto plan = MakePolicySync(setup_.model, args_.world, a.engines(), role::EngineTp(a));
      if (!plan.ok()) return plan.status();
      auto sched = (*plan)->SenderSchedule(args_.rank);
      if (!sched.ok()) return sched.status();
      weight_sync::TcpOptions o;
      o.rendezvous = rendezvous_.get();
      o.key_prefix = a.prefix();
      o.transfer.io_timeout = absl::Seconds(role::IoTimeoutS(a));
      o.transfer.sync_timeout = absl::Seconds(role::IoTimeoutS(a) * 3);
      o.stats = &ws_stats_;
      auto transport = weight_sync::CreateTcpTransport(o);
      if (!transport.ok()) return transport.status();
      ws_ = std::move(*transport);
      ws_schedule_ = std::move(*sched);
      ws_engines_ = a.engines();
      ws_prefix_ = a.prefix();
    }
    const std::vector<uint8_t> bytes = FlattenShard(shard_->ExportShard());
    if (static_cast<int64_t>(bytes.size()) != ws_schedule_.shard_bytes) {
      return absl::InternalError(
          absl::StrCat("ws_send: shard of ", bytes.size(), " bytes, plan wants ", ws_schedule_.shard_bytes));
    }
    const double encode_s = SecondsSince(t0);
    if (auto s = ws_->Send(static_cast<uint64_t>(shard_->version()) + 1, ws_schedule_, bytes); !s.ok())
      return s;
    // Which paths the sync took, cumulative over this shard's transports.
    pb::WsSendReply r;
    r.set_version(shard_->version());
    r.set_encode_s(encode_s);
    r.set_seconds(SecondsSince(t0));
    r.set_bytes(static_cast<int64_t>(bytes.size()));
    r.set_tcp_connections(ws_stats_.tcp_connections.load());
    r.set_local_connections(ws_stats_.local_connections.load());
    r.set_direct_write_bytes(ws_stats_.direct_write_bytes.load());
    return r;
  }

  absl::StatusOr<pb::Version> Save(const pb::Directory& dir) {
    if (auto s = Ready(); !s.ok()) return s;
    if (auto s = shard_->Save(dir.path()); !s.ok()) return s;
    return CurrentVersion();
  }
  absl::StatusOr<pb::Version> Load(const pb::Directory& dir) {
    if (auto s = Ready(); !s.ok()) return s;
    if (auto s = shard_->Load(dir.path()); !s.ok()) return s;
    return CurrentVersion();
  }
  absl::StatusOr<pb::Version> Version(const pb::Empty&) {
    if (auto s = Ready(); !s.ok()) return s;
    return CurrentVersion();
  }

 private:
  TrainerActor() = default;
  pb::Version CurrentVersion() const {
    pb::Version v;
    v.set_version(shard_->version());
    return v;
  }
  absl::Status MakeShard() {
    TrainerShardOptions o{setup_.model, setup_.grpo, setup_.optim, setup_.sampling.temperature,
                          static_cast<uint64_t>(setup_.config.trainer.seed)};
    auto shard = TrainerShard::Create(o, group_.comm());
    if (!shard.ok()) return shard.status();
    shard_ = std::move(*shard);
    return absl::OkStatus();
  }
  // Rank 0 of a group: the group is complete once every rank has connected.
  absl::Status Ready() {
    if (shard_) return absl::OkStatus();
    if (auto s = group_.Complete("trainer"); !s.ok()) return s;
    return MakeShard();
  }

  RoleArgs args_;
  JobSetup setup_;
  TpGroup group_;
  std::unique_ptr<TrainerShard> shard_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<weight_sync::Rendezvous> rendezvous_;
  weight_sync::TcpStats ws_stats_;  // outlives every transport that counts into it
  std::unique_ptr<weight_sync::Transport> ws_;
  weight_sync::RankSchedule ws_schedule_;
  int ws_engines_ = 0;
  std::string ws_prefix_;
};
SKYRL_REGISTER_ACTOR(TrainerActor, role::trainer::kClass);

}  // namespace
}  // namespace skyrl::rl
