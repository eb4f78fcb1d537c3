// The RL roles as actors (compiled into skyrl-actor-host-rl, so the registrations are kept):
//
//   grpo_trainer    one TP rank of the trainer (TrainerShard: policy shard, frozen reference
//                   shard, AdamW). Rank 0 binds the TCP collective's port in its constructor
//                   and returns it from "port"; the driver passes host:port to ranks >= 1,
//                   whose constructors connect. Methods: port, train, sync_weights, save, load,
//                   version.
//   grpo_generator  one TP rank of an inference engine (GeneratorEngine; the engine's ranks
//                   form their own TCP group as the trainer's do, "port" on rank 0). Every rank
//                   of an engine gets the same generate call. Weights: ws_receive, or
//                   load_shard from every trainer rank (gathered, then cut to this rank).
//                   Methods: load_shard, generate, sleep, wake_up, version, state, pid.
//   grpo_reward     rule-based rewards of the config's task. Method: score.
//   grpo_reference  the frozen initial policy at TP 1 (InitFullParameters with the trainer's
//                   seed). Method: logprobs.
// Init args: the RoleArgs JSON (job_setup.h). Every method that does model work returns
// "compute_s", the seconds it spent computing, so the driver can measure its own overhead.
// Weight sync, two paths: "ws_send" (trainer) / "ws_receive" (engine) run one version through
// weight_sync's TCP transport on the PreparedSync plan (sync_layout.h), addresses through the
// head's KV; "sync_weights" / "load_shard" push each trainer shard to each engine with actor
// calls (the fallback, and how a restarted engine catches up).
// The actor host runs one call at a time per actor (max_concurrency 1).

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "actors/algo/checkpoint.h"
#include "actors/job/job_setup.h"
#include "actors/job/wire.h"
#include "actors/model/tcp_collective.h"
#include "actors/model/torch_status.h"
#include "actors/roles/generator_engine.h"
#include "actors/roles/trainer_shard.h"
#include "actors/tasks/tokenizer.h"
#include "actors/train/grpo_step.h"
#include "runtime/actor/actor.h"
#include "actors/job/sync_layout.h"
#include "runtime/client/client.h"
#include "weight_sync/kv_rendezvous.h"
#include "weight_sync/tcp/tcp_transport.h"

namespace skyrl::actors {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The head's KV as the transports' rendezvous (SKYRL_ADDRESS / SKYRL_TOKEN from the worker).
absl::StatusOr<std::unique_ptr<weight_sync::Rendezvous>> ConnectRendezvous() {
  const char* address = std::getenv("SKYRL_ADDRESS");
  const char* token = std::getenv("SKYRL_TOKEN");
  if (!address || !token) return absl::FailedPreconditionError("weight sync: SKYRL_ADDRESS/SKYRL_TOKEN unset");
  auto kv = weight_sync::KvRendezvous::Connect(address, token);
  if (!kv.ok()) return kv.status();
  return std::unique_ptr<weight_sync::Rendezvous>(std::move(*kv));
}

struct WsArgs {
  std::string prefix, host;
  int engines = 0, rank = -1, engine_tp = 1, trainer_tp = 1;
  double io_timeout_s = 20;
};
absl::StatusOr<WsArgs> ParseWsArgs(absl::string_view s) {
  nlohmann::json j = nlohmann::json::parse(s.begin(), s.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError("weight sync args: not a JSON object");
  WsArgs a;
  a.prefix = j.value("prefix", std::string());
  a.host = j.value("host", std::string("127.0.0.1"));
  a.engines = j.value("engines", 0);
  a.rank = j.value("rank", -1);
  a.engine_tp = j.value("engine_tp", 1);
  a.trainer_tp = j.value("trainer_tp", 1);
  a.io_timeout_s = j.value("io_timeout_s", 20.0);
  if (a.prefix.empty() || a.engines < 1) return absl::InvalidArgumentError("weight sync args: prefix and engines needed");
  return a;
}

absl::StatusOr<JobSetup> SetupFrom(const RoleArgs& a) {
  auto config = ParseJobConfig(a.config_yaml, "init args config");
  if (!config.ok()) return config.status();
  auto setup = MakeJobSetup(*config);
  if (!setup.ok()) return setup.status();
  torch::set_num_threads(config->trainer.num_threads);
  return setup;
}

absl::StatusOr<nlohmann::json> ParseJson(absl::string_view s, absl::string_view what) {
  nlohmann::json j = nlohmann::json::parse(s.begin(), s.end(), nullptr, false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(what, ": not JSON"));
  return j;
}

// One role's TP group across processes: alone (world 1), rank 0 (binds at once and accepts
// the other ranks in the background: they connect from their own constructors, which the
// driver starts after reading rank 0's port), or rank r >= 1 (connects to args.master).
// Shared by the trainer shards and the engines of TP > 1. One thread at a time.
class TpGroup {
 public:
  absl::Status Join(const RoleArgs& args) {
    if (args.world == 1) {
      comm_ = MakeSingleRankCollective();
      return absl::OkStatus();
    }
    if (args.rank == 0) {
      auto listener = TcpListener::Bind("0.0.0.0", 0);
      if (!listener.ok()) return listener.status();
      listener_ = std::move(*listener);
      TcpListener* l = listener_.get();
      const int world = args.world;
      accepted_ = std::async(std::launch::async, [l, world] { return l->Accept(world, absl::Seconds(300)); });
      return absl::OkStatus();
    }
    const std::string& m = args.master;
    int port = 0;
    if (!absl::SimpleAtoi(m.substr(m.rfind(':') + 1), &port))
      return absl::InvalidArgumentError(absl::StrCat("init args: master: bad port in '", m, "'"));
    auto comm = ConnectTcpCollective(m.substr(0, m.rfind(':')), port, args.rank, args.world, absl::Seconds(120));
    if (!comm.ok()) return comm.status();
    comm_ = std::move(*comm);
    return absl::OkStatus();
  }
  // Rank 0: waits until every rank has connected. `who` names the role in errors.
  absl::Status Complete(absl::string_view who) {
    if (comm_) return absl::OkStatus();
    if (!accepted_.valid()) return absl::InternalError(absl::StrCat(who, ": no collective"));
    auto comm = accepted_.get();
    if (!comm.ok()) return absl::UnavailableError(absl::StrCat(who, " rank 0: TP group: ", comm.status().message()));
    comm_ = std::move(*comm);
    return absl::OkStatus();
  }
  // Null until the group is complete (rank 0 before Complete()).
  Collective* comm() const { return comm_.get(); }
  int port() const { return listener_ ? listener_->port() : 0; }

 private:
  std::unique_ptr<TcpListener> listener_;
  std::future<absl::StatusOr<std::unique_ptr<Collective>>> accepted_;
  std::unique_ptr<Collective> comm_;
};

// ---------------------------------------------------------------------------------------------
class TrainerActor : public Actor {
 public:
  static absl::StatusOr<std::unique_ptr<TrainerActor>> Create(absl::string_view init) {
    auto args = DecodeRoleArgs(init);
    if (!args.ok()) return args.status();
    auto setup = SetupFrom(*args);
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
    t.Add("port", &TrainerActor::Port);
    t.Add("train", &TrainerActor::Train);
    t.Add("sync_weights", &TrainerActor::SyncWeights);
    t.Add("ws_send", &TrainerActor::WsSend);
    t.Add("save", &TrainerActor::Save);
    t.Add("load", &TrainerActor::Load);
    t.Add("version", &TrainerActor::Version);
  }

  absl::StatusOr<std::string> Port(absl::string_view) {
    return absl::StrCat(group_.port());
  }

  // args: EncodeTrainBatch bytes. Every rank must be called with the same batch, concurrently.
  absl::StatusOr<std::string> Train(absl::string_view args) {
    if (auto s = Ready(); !s.ok()) return s;
    const auto t0 = Clock::now();
    auto batch = DecodeTrainBatch(std::string(args));
    if (!batch.ok()) return batch.status();
    auto stats = shard_->Update(*batch);
    if (!stats.ok()) return stats.status();
    nlohmann::json j{{"loss", stats->loss},       {"policy_loss", stats->policy_loss},
                     {"kl", stats->kl},           {"clip_fraction", stats->clip_fraction},
                     {"grad_norm", stats->grad_norm}, {"version", shard_->version()},
                     {"compute_s", Since(t0)}};
    return j.dump();
  }

  // args: {"engines": [actor ids]}. Pushes this rank's shard of the current version to each
  // engine (in parallel), straight from this process. Returns {"version", "failed": [ids with
  // their errors], "encode_s", "seconds"}: an engine that cannot take it (dead, restarting) is
  // reported, not fatal; the driver retries it.
  absl::StatusOr<std::string> SyncWeights(absl::string_view args) {
    if (auto s = Ready(); !s.ok()) return s;
    auto j = ParseJson(args, "sync_weights");
    if (!j.ok()) return j.status();
    const auto t0 = Clock::now();
    if (!client_) {
      const char* address = std::getenv("SKYRL_ADDRESS");
      const char* token = std::getenv("SKYRL_TOKEN");
      if (!address || !token) return absl::FailedPreconditionError("sync_weights: SKYRL_ADDRESS/SKYRL_TOKEN unset");
      ClientOptions o;
      o.call_timeout = absl::Seconds(60);
      o.restart_wait = absl::Seconds(60);
      auto c = Client::Connect(address, token, o);
      if (!c.ok()) return c.status();
      client_ = std::move(*c);
    }
    auto bytes = EncodeTensors(shard_->ExportShard());
    if (!bytes.ok()) return bytes.status();
    nlohmann::json header{{"version", shard_->version()}, {"rank", args_.rank}, {"world", args_.world}};
    const std::string payload = PackParts({header.dump(), *bytes});
    const double encode_s = Since(t0);
    std::vector<std::string> engines;
    try {
      engines = j->at("engines").get<std::vector<std::string>>();
    } catch (const nlohmann::json::exception& e) {
      return absl::InvalidArgumentError(absl::StrCat("sync_weights: engines: ", e.what()));
    }
    std::vector<std::future<absl::StatusOr<std::string>>> calls;
    for (const auto& id : engines) calls.push_back(client_->CallAsync(ActorHandle{id}, "load_shard", payload));
    nlohmann::json failed = nlohmann::json::array();
    for (size_t i = 0; i < calls.size(); ++i) {
      auto r = calls[i].get();
      if (!r.ok()) failed.push_back({{"engine", engines[i]}, {"error", r.status().ToString()}});
    }
    nlohmann::json out{{"version", shard_->version()}, {"failed", failed}, {"encode_s", encode_s},
                       {"seconds", Since(t0)}, {"bytes", payload.size()}};
    return out.dump();
  }

  // args: {"prefix", "engines"}. Sends this rank's shard of the current version (as transport
  // version = trainer version + 1) to the engines that need its bytes, per the plan; returns
  // once every receiver confirmed. Returns {"version", "encode_s", "seconds", "bytes"}.
  absl::StatusOr<std::string> WsSend(absl::string_view args) {
    if (auto s = Ready(); !s.ok()) return s;
    auto a = ParseWsArgs(args);
    if (!a.ok()) return a.status();
    const auto t0 = Clock::now();
    if (!ws_ || ws_engines_ != a->engines || ws_prefix_ != a->prefix) {
      if (!rendezvous_) {
        auto r = ConnectRendezvous();
        if (!r.ok()) return r.status();
        rendezvous_ = std::move(*r);
      }
      auto plan = MakePolicySync(setup_.model, args_.world, a->engines, a->engine_tp);
      if (!plan.ok()) return plan.status();
      auto sched = (*plan)->SenderSchedule(args_.rank);
      if (!sched.ok()) return sched.status();
      weight_sync::TcpOptions o;
      o.rendezvous = rendezvous_.get();
      o.key_prefix = a->prefix;
      o.transfer.io_timeout = absl::Seconds(a->io_timeout_s);
      o.transfer.sync_timeout = absl::Seconds(a->io_timeout_s * 3);
      o.stats = &ws_stats_;
      auto transport = weight_sync::CreateTcpTransport(o);
      if (!transport.ok()) return transport.status();
      ws_ = std::move(*transport);
      ws_schedule_ = std::move(*sched);
      ws_engines_ = a->engines;
      ws_prefix_ = a->prefix;
    }
    const std::vector<uint8_t> bytes = FlattenShard(shard_->ExportShard());
    if (static_cast<int64_t>(bytes.size()) != ws_schedule_.shard_bytes) {
      return absl::InternalError(absl::StrCat("ws_send: shard of ", bytes.size(), " bytes, plan wants ",
                                              ws_schedule_.shard_bytes));
    }
    const double encode_s = Since(t0);
    if (auto s = ws_->Send(static_cast<uint64_t>(shard_->version()) + 1, ws_schedule_, bytes); !s.ok()) return s;
    // Which paths the sync took, cumulative over this shard's transports.
    nlohmann::json out{{"version", shard_->version()},
                       {"encode_s", encode_s},
                       {"seconds", Since(t0)},
                       {"bytes", bytes.size()},
                       {"tcp_connections", ws_stats_.tcp_connections.load()},
                       {"local_connections", ws_stats_.local_connections.load()},
                       {"direct_write_bytes", ws_stats_.direct_write_bytes.load()}};
    return out.dump();
  }

  absl::StatusOr<std::string> Save(absl::string_view dir) {
    if (auto s = Ready(); !s.ok()) return s;
    if (auto s = shard_->Save(std::string(dir)); !s.ok()) return s;
    return absl::StrCat(shard_->version());
  }
  absl::StatusOr<std::string> Load(absl::string_view dir) {
    if (auto s = Ready(); !s.ok()) return s;
    if (auto s = shard_->Load(std::string(dir)); !s.ok()) return s;
    return absl::StrCat(shard_->version());
  }
  absl::StatusOr<std::string> Version(absl::string_view) {
    if (auto s = Ready(); !s.ok()) return s;
    return absl::StrCat(shard_->version());
  }

 private:
  TrainerActor() = default;
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
SKYRL_REGISTER_ACTOR(TrainerActor, "grpo_trainer");

// ---------------------------------------------------------------------------------------------
class GeneratorActor : public Actor {
 public:
  static absl::StatusOr<std::unique_ptr<GeneratorActor>> Create(absl::string_view init) {
    auto args = DecodeRoleArgs(init);
    if (!args.ok()) return args.status();
    auto setup = SetupFrom(*args);
    if (!setup.ok()) return setup.status();
    // The engine's TP is the group the driver made (args->world), which may override the file's.
    if (auto st = ValidateTensorParallel(setup->model, args->world, "generator.tensor_parallel_size"); !st.ok()) return st;
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
    t.Add("load_shard", &GeneratorActor::LoadShard);
    t.Add("generate", &GeneratorActor::Generate);
    t.Add("ws_receive", &GeneratorActor::WsReceive);
    t.Add("sleep", &GeneratorActor::Sleep);
    t.Add("wake_up", &GeneratorActor::WakeUp);
    t.Add("version", &GeneratorActor::Version);
    t.Add("state", &GeneratorActor::EngineState);
    t.Add("pid", &GeneratorActor::Pid);
    t.Add("port", &GeneratorActor::Port);
  }
  absl::StatusOr<std::string> Port(absl::string_view) { return absl::StrCat(group_.port()); }

  // args: PackParts({{"version", "rank", "world"}, EncodeTensors(trainer rank's shard)}).
  // Returns the engine's version after the call. A version at or below the current one is
  // ignored (a retried push), not an error.
  absl::StatusOr<std::string> LoadShard(absl::string_view args) {
    if (auto s = Ready(); !s.ok()) return s;
    auto parts = UnpackParts(args, 2, "load_shard");
    if (!parts.ok()) return parts.status();
    auto h = ParseJson((*parts)[0], "load_shard header");
    if (!h.ok()) return h.status();
    const int64_t version = h->value("version", int64_t{-1});
    const int rank = h->value("rank", -1), world = h->value("world", 0);
    if (world < 1 || rank < 0 || rank >= world || version < 0) {
      return absl::InvalidArgumentError(absl::StrCat("load_shard: bad header ", (*parts)[0]));
    }
    if (version <= engine_->version()) return absl::StrCat(engine_->version());
    auto shard = DecodeTensors((*parts)[1]);
    if (!shard.ok()) return shard.status();
    auto& pending = pending_[version];
    pending.resize(world);
    pending[rank] = std::move(*shard);
    for (const auto& p : pending) {
      if (p.empty()) return absl::StrCat(engine_->version());  // more ranks to come
    }
    absl::StatusOr<NamedTensors> full = world == 1 ? absl::StatusOr<NamedTensors>(pending[0])
                                                   : GatherShards(setup_.model, pending);
    if (!full.ok()) return full.status();
    if (args_.world > 1) full = ShardParameters(setup_.model, *full, args_.world, args_.rank);
    if (!full.ok()) return full.status();
    if (auto s = engine_->LoadWeights(version, *full); !s.ok()) return s;
    pending_.erase(pending_.begin(), pending_.upper_bound(version));
    return absl::StrCat(engine_->version());
  }

  // args: {"prefix", "engines", "rank" (this engine's receiver rank), "host" (to listen on and
  // advertise), "version" (the trainer's)}. Receives that version through the TCP transport
  // and swaps it in. Returns {"version", "seconds", "decode_s"}.
  absl::StatusOr<std::string> WsReceive(absl::string_view args) {
    if (auto s = Ready(); !s.ok()) return s;
    auto a = ParseWsArgs(args);
    if (!a.ok()) return a.status();
    auto j = nlohmann::json::parse(args.begin(), args.end(), nullptr, false);
    const int64_t version = j.value("version", int64_t{-1});
    if (version < 0 || a->rank < 0 || a->rank >= a->engines * a->engine_tp) {
      return absl::InvalidArgumentError("ws_receive: version and receiver rank (0..engines*engine_tp-1) needed");
    }
    const auto t0 = Clock::now();
    if (!ws_ || ws_engines_ != a->engines || ws_prefix_ != a->prefix || ws_rank_ != a->rank) {
      if (!rendezvous_) {
        auto r = ConnectRendezvous();
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
    if (auto s = ws_->Receive(static_cast<uint64_t>(version) + 1, ws_schedule_, *ws_shard_); !s.ok()) return s;
    const auto t1 = Clock::now();
    weight_sync::VersionedShard::Snapshot snap = ws_shard_->Current();
    if (!snap.bytes) return absl::InternalError("ws_receive: no bytes after the sync");
    auto full = UnflattenShard(setup_.model, args_.world, *snap.bytes);
    if (!full.ok()) return full.status();
    if (version > engine_->version()) {
      if (auto s = engine_->LoadWeights(version, *full); !s.ok()) return s;
    }
    nlohmann::json out{{"version", engine_->version()}, {"seconds", Since(t0)}, {"decode_s", Since(t1)}};
    return out.dump();
  }

  // args: PackParts({{"seed"}, EncodeTensors({tokens, valid})}).
  // Returns PackParts({{"version", "compute_s"}, EncodeRollout}).
  absl::StatusOr<std::string> Generate(absl::string_view args) {
    if (auto s = Ready(); !s.ok()) return s;
    const auto t0 = Clock::now();
    auto parts = UnpackParts(args, 2, "generate");
    if (!parts.ok()) return parts.status();
    auto h = ParseJson((*parts)[0], "generate header");
    if (!h.ok()) return h.status();
    auto t = DecodeTensors((*parts)[1]);
    if (!t.ok()) return t.status();
    if (t->size() != 2) return absl::InvalidArgumentError("generate: want tensors tokens and valid");
    PromptBatch batch{(*t)[0].second, (*t)[1].second};
    auto r = engine_->Generate(batch, setup_.sampling, Tokenizer::kEos, Tokenizer::kPad, h->value("seed", uint64_t{0}));
    if (!r.ok()) return r.status();
    auto bytes = EncodeRollout(r->rollout);
    if (!bytes.ok()) return bytes.status();
    nlohmann::json out{{"version", r->version}, {"compute_s", Since(t0)}};
    return PackParts({out.dump(), *bytes});
  }
  // args: "keep" or "drop".
  absl::StatusOr<std::string> Sleep(absl::string_view level) {
    if (auto s = Ready(); !s.ok()) return s;
    if (level != "keep" && level != "drop") {
      return absl::InvalidArgumentError(absl::StrCat("sleep: level must be keep or drop, got '", level, "'"));
    }
    if (auto s = engine_->Sleep(level == "keep" ? GeneratorEngine::SleepLevel::kKeepWeights
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
  // For tests and operators: {"state", "version", "sleeps", "wakes", "cuda_visible_devices"}.
  absl::StatusOr<std::string> EngineState(absl::string_view) {
    if (auto s = Ready(); !s.ok()) return s;
    const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
    nlohmann::json out{{"state", GeneratorEngine::StateName(engine_->state())},
                       {"version", engine_->version()},
                       {"sleeps", sleeps_},
                       {"wakes", wakes_},
                       {"cuda_visible_devices", cvd ? cvd : ""}};
    return out.dump();
  }
  // For tests and operators: the process to signal.
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
SKYRL_REGISTER_ACTOR(GeneratorActor, "grpo_generator");

// ---------------------------------------------------------------------------------------------
class RewardActor : public Actor {
 public:
  static absl::StatusOr<std::unique_ptr<RewardActor>> Create(absl::string_view init) {
    auto args = DecodeRoleArgs(init);
    if (!args.ok()) return args.status();
    auto setup = SetupFrom(*args);
    if (!setup.ok()) return setup.status();
    auto task = FindTask(setup->config.environment.task);
    if (!task.ok()) return task.status();
    auto self = std::unique_ptr<RewardActor>(new RewardActor());
    self->task_ = *task;
    return self;
  }
  static void RegisterMethods(MethodTable<RewardActor>& t) { t.Add("score", &RewardActor::Score); }

  // args: PackParts({{"examples": [[prompt, target], ...]}, EncodeRollout}).
  // Returns {"rewards", "mean_reward", "exact_fraction", "response_tokens", "compute_s"}.
  absl::StatusOr<std::string> Score(absl::string_view args) {
    const auto t0 = Clock::now();
    auto parts = UnpackParts(args, 2, "score");
    if (!parts.ok()) return parts.status();
    auto h = ParseJson((*parts)[0], "score header");
    if (!h.ok()) return h.status();
    std::vector<Example> examples;
    try {
      for (const auto& e : h->at("examples")) examples.push_back({e.at(0).get<std::string>(), e.at(1).get<std::string>()});
    } catch (const nlohmann::json::exception& e) {
      return absl::InvalidArgumentError(absl::StrCat("score: examples: ", e.what()));
    }
    auto rollout = DecodeRollout((*parts)[1]);
    if (!rollout.ok()) return rollout.status();
    auto scored = ScoreRollout(*task_, examples, *rollout);
    if (!scored.ok()) return scored.status();
    nlohmann::json out{{"rewards", scored->rewards},
                       {"mean_reward", scored->mean_reward},
                       {"exact_fraction", scored->exact_fraction},
                       {"response_tokens", scored->response_tokens},
                       {"compute_s", Since(t0)}};
    return out.dump();
  }

 private:
  RewardActor() = default;
  const Task* task_ = nullptr;
};
SKYRL_REGISTER_ACTOR(RewardActor, "grpo_reward");

// ---------------------------------------------------------------------------------------------
class ReferenceActor : public Actor {
 public:
  static absl::StatusOr<std::unique_ptr<ReferenceActor>> Create(absl::string_view init) {
    auto args = DecodeRoleArgs(init);
    if (!args.ok()) return args.status();
    auto setup = SetupFrom(*args);
    if (!setup.ok()) return setup.status();
    auto self = std::unique_ptr<ReferenceActor>(new ReferenceActor());
    self->setup_ = *setup;
    self->comm_ = MakeSingleRankCollective();
    auto policy = Policy::Create(setup->model, self->comm_.get(),
                                 InitFullParameters(setup->model, static_cast<uint64_t>(setup->config.trainer.seed)));
    if (!policy.ok()) return policy.status();
    self->policy_ = std::move(*policy);
    return self;
  }
  static void RegisterMethods(MethodTable<ReferenceActor>& t) { t.Add("logprobs", &ReferenceActor::Logprobs); }

  // args: EncodeRollout. Returns PackParts({{"compute_s"}, EncodeTensors({{"ref", [B, N]}})}).
  absl::StatusOr<std::string> Logprobs(absl::string_view args) {
    const auto t0 = Clock::now();
    auto rollout = DecodeRollout(std::string(args));
    if (!rollout.ok()) return rollout.status();
    absl::StatusOr<torch::Tensor> ref = RunTorch("reference logprobs", [&]() -> absl::StatusOr<torch::Tensor> {
      torch::NoGradGuard no_grad;
      return ResponseLogprobs(*policy_, rollout->sequences, rollout->valid, rollout->prompt_len,
                              setup_.sampling.temperature);
    });
    if (!ref.ok()) return ref.status();
    auto bytes = EncodeTensors({{"ref", *ref}});
    if (!bytes.ok()) return bytes.status();
    nlohmann::json out{{"compute_s", Since(t0)}};
    return PackParts({out.dump(), *bytes});
  }

 private:
  ReferenceActor() = default;
  JobSetup setup_;
  std::unique_ptr<Collective> comm_;
  std::unique_ptr<Policy> policy_;
};
SKYRL_REGISTER_ACTOR(ReferenceActor, "grpo_reference");

}  // namespace
}  // namespace skyrl::actors
