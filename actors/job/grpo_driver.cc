#include "actors/job/grpo_driver.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <nlohmann/json.hpp>
#include <cstdio>
#include <random>

#include "absl/strings/str_cat.h"
#include "actors/algo/checkpoint.h"
#include "actors/job/job_setup.h"
#include "actors/job/wire.h"
#include "actors/tasks/tokenizer.h"
#include "actors/train/grpo_step.h"

namespace skyrl::actors {
namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

absl::StatusOr<nlohmann::json> Json(const absl::StatusOr<std::string>& bytes, absl::string_view what) {
  if (!bytes.ok()) return absl::Status(bytes.status().code(), absl::StrCat(what, ": ", bytes.status().message()));
  nlohmann::json j = nlohmann::json::parse(*bytes, nullptr, false);
  if (j.is_discarded()) return absl::InternalError(absl::StrCat(what, ": reply is not JSON"));
  return j;
}

// An engine that died is worth a retry (the runtime restarts it); anything else is not.
bool EngineRetryable(const absl::Status& s) {
  return s.code() == absl::StatusCode::kUnavailable || s.code() == absl::StatusCode::kDeadlineExceeded ||
         (s.code() == absl::StatusCode::kFailedPrecondition &&
          (s.message().find("state") != absl::string_view::npos ||
           s.message().find("EMPTY") != absl::string_view::npos));  // restarted engine without weights
}

class Job {
 public:
  Job(Client& client, const std::string& yaml, JobSetup setup, const DistributedOptions& options)
      : client_(client), yaml_(yaml), s_(std::move(setup)), opt_(options) {}

  ~Job() {
    if (!opt_.remove_actors) return;
    auto kill = [&](const std::string& id) {
      if (!id.empty()) (void)client_.Kill(ActorHandle{id});
    };
    for (const auto& id : actors_.trainers) kill(id);
    for (const auto& id : actors_.engines) kill(id);
    kill(actors_.reward);
    kill(actors_.reference);
    if (!actors_.placement_group.empty()) (void)client_.RemovePlacementGroup(actors_.placement_group);
  }

  absl::Status Start() {
    const int tp = s_.config.trainer.tp_size, etp = s_.config.generator.tensor_parallel_size;
    const int engines = s_.config.generator.num_engines * etp;  // engine rank actors
    actors_.engine_tp = etp;
    // colocate_all on a cluster with GPUs: bundle i = one whole device (GPU=1) holding trainer
    // rank i and engine rank i at GPU=0.5 each, so the pair shares that device (the scheduler
    // places fractional requests inside the bundle's device). Without GPUs (creation fails
    // with RESOURCE_EXHAUSTED) or without colocate_all: CPU bundles, one per trainer rank and
    // one per engine rank. Either way a last CPU bundle holds reward and reference.
    const int pairs = std::max(tp, engines);
    absl::StatusOr<v1::PlacementGroupInfo> created = absl::UnknownError("unset");
    if (s_.config.trainer.colocate_all) {
      PlacementGroupOptions pg;
      pg.name = absl::StrCat("grpo-", std::random_device{}());
      for (int i = 0; i < pairs; ++i) pg.bundles.push_back(Bundle{{{"CPU", 2}, {"GPU", 1}}, {}});
      pg.bundles.push_back(Bundle{{{"CPU", 1}}, {}});
      created = client_.CreatePlacementGroup(pg);
      if (created.ok()) {
        gpu_ = true;
      } else if (created.status().code() != absl::StatusCode::kResourceExhausted) {
        return Prefix("placement group (colocate_all, GPU bundles)", created.status());
      }
    }
    if (!gpu_) {
      PlacementGroupOptions pg;
      pg.name = absl::StrCat("grpo-", std::random_device{}());
      for (int i = 0; i < tp + engines; ++i) pg.bundles.push_back(Bundle{{{"CPU", 1}}, {}});
      pg.bundles.push_back(Bundle{{{"CPU", 1}}, {}});
      created = client_.CreatePlacementGroup(pg);
    }
    if (!created.ok()) return Prefix("placement group", created.status());
    actors_.placement_group = created->placement_group_id();
    actors_.gpu_colocated = gpu_;
    const int aux_bundle = gpu_ ? pairs : tp + engines;
    auto trainer_bundle = [&](int r) { return r; };
    auto engine_bundle = [&](int i) { return gpu_ ? i : tp + i; };
    auto ready = client_.WaitPlacementGroup(actors_.placement_group, opt_.ready_timeout);
    if (!ready.ok()) return Prefix("placement group", ready.status());

    auto create = [&](const std::string& cls, const RoleArgs& a, int bundle, double cpu,
                      int max_restarts) -> absl::StatusOr<std::string> {
      ActorOptions o;
      o.init_args = EncodeRoleArgs(a);
      o.resources = {{"CPU", cpu}};
      if (gpu_ && bundle != aux_bundle) o.resources["GPU"] = 0.5;
      o.placement_group_id = actors_.placement_group;
      o.bundle_index = bundle;
      o.host = "rl";
      o.max_restarts = max_restarts;
      auto h = client_.CreateActor(cls, o);
      if (!h.ok()) return Prefix(absl::StrCat(cls, " (bundle ", bundle, ")"), h.status());
      return h->actor_id;
    };
    RoleArgs base;
    base.config_yaml = yaml_;
    base.world = tp;
    // Trainer rank 0 first: it binds the TP group's port; the others connect to it.
    auto r0 = create("grpo_trainer", base, trainer_bundle(0), 1, 0);
    if (!r0.ok()) return r0.status();
    actors_.trainers.push_back(*r0);
    if (tp > 1) {
      auto port = client_.Call(ActorHandle{*r0}, "port", "");
      if (!port.ok()) return Prefix("trainer rank 0: port", port.status());
      auto info = client_.Describe(ActorHandle{*r0});
      if (!info.ok()) return Prefix("trainer rank 0", info.status());
      const std::string& addr = info->address();
      base.master = absl::StrCat(addr.substr(0, addr.rfind(':')), ":", *port);
      for (int r = 1; r < tp; ++r) {
        RoleArgs a = base;
        a.rank = r;
        auto id = create("grpo_trainer", a, trainer_bundle(r), 1, 0);
        if (!id.ok()) return id.status();
        actors_.trainers.push_back(*id);
      }
    }
    for (int e = 0; e < s_.config.generator.num_engines; ++e) {
      RoleArgs a = base;
      a.world = etp;
      a.rank = 0;
      a.master.clear();
      a.engine = e;
      const int restarts = etp == 1 ? -1 : 0;
      auto id0 = create("grpo_generator", a, engine_bundle(e * etp), 1, restarts);
      if (!id0.ok()) return id0.status();
      actors_.engines.push_back(*id0);
      if (etp > 1) {
        auto port = client_.Call(ActorHandle{*id0}, "port", "");
        if (!port.ok()) return Prefix(absl::StrCat("engine ", e, " rank 0: port"), port.status());
        auto info = client_.Describe(ActorHandle{*id0});
        if (!info.ok()) return Prefix(absl::StrCat("engine ", e, " rank 0"), info.status());
        const std::string& addr = info->address();
        a.master = absl::StrCat(addr.substr(0, addr.rfind(':')), ":", *port);
        for (int r = 1; r < etp; ++r) {
          a.rank = r;
          auto id = create("grpo_generator", a, engine_bundle(e * etp + r), 1, restarts);
          if (!id.ok()) return id.status();
          actors_.engines.push_back(*id);
        }
      }
    }
    RoleArgs aux = base;
    aux.world = 1;
    aux.master.clear();
    auto reward = create("grpo_reward", aux, aux_bundle, 0.5, 3);
    if (!reward.ok()) return reward.status();
    actors_.reward = *reward;
    auto reference = create("grpo_reference", aux, aux_bundle, 0.5, 3);
    if (!reference.ok()) return reference.status();
    actors_.reference = *reference;
    // Version 0 (the initial weights) to every engine.
    if (opt_.weight_sync == "tcp") {
      int ignored = 0;
      return SyncTcp(0, nullptr, &ignored).status();
    }
    return Sync(actors_.engines, nullptr).status();
  }

  const JobActors& actors() const { return actors_; }

  // One version through weight_sync's TCP transport: every engine receives while every trainer
  // shard sends (all in flight at once). On failure: a message on stderr, a new key prefix (so
  // a restarted engine's new address is the one looked up next time), and the push path.
  absl::StatusOr<double> SyncTcp(int64_t version, int* recoveries, int* fallbacks) {
    if (hosts_epoch_ != epoch_) {
      engine_hosts_.clear();
      for (const auto& e : actors_.engines) {
        auto info = client_.Describe(ActorHandle{e});
        if (!info.ok()) return Prefix("engine", info.status());
        engine_hosts_.push_back(info->address().substr(0, info->address().rfind(':')));
      }
      hosts_epoch_ = epoch_;
    }
    const std::string prefix = absl::StrCat("grpo/", actors_.placement_group, "/", epoch_);
    const int etp = actors_.engine_tp;
    const int ranks = static_cast<int>(actors_.engines.size());
    const int engines = ranks / etp;
    std::vector<std::future<absl::StatusOr<std::string>>> recv, send;
    for (int e = 0; e < ranks; ++e) {
      nlohmann::json a{{"prefix", prefix}, {"engines", engines}, {"engine_tp", etp},
                       {"trainer_tp", static_cast<int>(actors_.trainers.size())}, {"rank", e},
                       {"host", engine_hosts_[e]}, {"version", version}};
      recv.push_back(client_.CallAsync(ActorHandle{actors_.engines[e]}, "ws_receive", a.dump()));
    }
    nlohmann::json a{{"prefix", prefix}, {"engines", engines}, {"engine_tp", etp}};
    for (const auto& t : actors_.trainers) send.push_back(client_.CallAsync(ActorHandle{t}, "ws_send", a.dump()));
    double encode_s = 0;
    std::string error;
    for (size_t r = 0; r < send.size(); ++r) {
      auto j = Json(send[r].get(), absl::StrCat("trainer rank ", r, ": ws_send"));
      if (!j.ok()) {
        if (error.empty()) error = j.status().ToString();
        continue;
      }
      encode_s = std::max(encode_s, j->value("encode_s", 0.0));
      // Cumulative per shard (a shard's transport lives as long as the shard).
      if (r >= shard_paths_.size()) shard_paths_.resize(r + 1);
      shard_paths_[r] = {j->value("tcp_connections", int64_t{0}), j->value("local_connections", int64_t{0}),
                         j->value("direct_write_bytes", int64_t{0})};
    }
    for (int e = 0; e < ranks; ++e) {
      auto j = Json(recv[e].get(), absl::StrCat("engine ", e / etp, " rank ", e % etp, ": ws_receive"));
      if (!j.ok() && error.empty()) error = j.status().ToString();
    }
    if (error.empty()) return encode_s;
    std::fprintf(stderr, "skyrl-grpo: TCP weight sync of version %lld failed (%s); pushing it instead\n",
                 static_cast<long long>(version), error.c_str());
    ++*fallbacks;
    ++epoch_;
    return Sync(actors_.engines, recoveries);
  }

  // Every trainer shard pushes its shard to `engines`; engines that failed are retried (their
  // restart is awaited by the client) up to engine_retries times. Returns the seconds the
  // shards spent encoding (serialization overhead).
  absl::StatusOr<double> Sync(std::vector<std::string> engines, int* recoveries) {
    double encode_s = 0;
    for (int attempt = 0; !engines.empty(); ++attempt) {
      nlohmann::json args{{"engines", engines}};
      std::vector<std::future<absl::StatusOr<std::string>>> calls;
      for (const auto& t : actors_.trainers) calls.push_back(client_.CallAsync(ActorHandle{t}, "sync_weights", args.dump()));
      std::vector<std::string> failed;
      std::string last_error;
      for (size_t r = 0; r < calls.size(); ++r) {
        auto j = Json(calls[r].get(), absl::StrCat("trainer rank ", r, ": sync_weights"));
        if (!j.ok()) return j.status();
        encode_s = std::max(encode_s, j->value("encode_s", 0.0));
        for (const auto& f : (*j)["failed"]) {
          std::string id = f.value("engine", "");
          last_error = f.value("error", "");
          if (std::find(failed.begin(), failed.end(), id) == failed.end()) failed.push_back(id);
        }
      }
      if (!failed.empty()) {
        if (attempt >= opt_.engine_retries) {
          return absl::UnavailableError(absl::StrCat("weight sync to engine ", failed[0], " failed ", attempt + 1,
                                                     " times; last: ", last_error));
        }
        if (recoveries) ++*recoveries;
        ++epoch_;
      }
      engines = failed;
    }
    return encode_s;
  }

  struct Generated {
    Rollout rollout;
    int64_t min_version = 0;
    double compute_s = 0;  // the slowest engine's
  };
  absl::StatusOr<Generated> Generate(const PromptSet& prompts, int step, int* recoveries) {
    const int etp = actors_.engine_tp;
    const int engines = static_cast<int>(actors_.engines.size()) / etp;
    const auto slices = SplitPrompts(prompts, s_.grpo.group_size, engines);
    std::vector<std::string> args(engines);
    for (int e = 0; e < engines; ++e) {
      auto t = EncodeTensors({{"tokens", slices[e].batch.tokens}, {"valid", slices[e].batch.valid}});
      if (!t.ok()) return t.status();
      nlohmann::json h{{"seed", EngineSeed(static_cast<uint64_t>(s_.config.trainer.seed), step, e)}};
      args[e] = PackParts({h.dump(), *t});
    }
    // Every rank of an engine gets the same call (their TP collective needs them together);
    // the ranks sample the same tokens, rank 0 answers for the engine.
    std::vector<std::future<absl::StatusOr<std::string>>> calls;
    for (int i = 0; i < engines * etp; ++i) {
      calls.push_back(client_.CallAsync(ActorHandle{actors_.engines[i]}, "generate", args[i / etp]));
    }
    Generated g;
    g.min_version = INT64_MAX;
    std::vector<Rollout> parts(engines);
    for (int e = 0; e < engines; ++e) {
      absl::StatusOr<std::string> reply = calls[e * etp].get();
      for (int r = 1; r < etp; ++r) {
        absl::StatusOr<std::string> other = calls[e * etp + r].get();
        if (!other.ok() && reply.ok()) reply = other.status();
      }
      for (int attempt = 0; etp == 1 && !reply.ok() && EngineRetryable(reply.status()) && attempt < opt_.engine_retries;
           ++attempt) {
        // The engine died (or came back empty): the runtime restarts it; give it the
        // current weights, then ask again.
        ++*recoveries;
        ++epoch_;  // its TCP endpoint is new: look addresses up under a fresh prefix
        if (auto s = Sync({actors_.engines[e]}, nullptr); !s.ok()) return s.status();
        reply = client_.Call(ActorHandle{actors_.engines[e]}, "generate", args[e]);
      }
      if (!reply.ok()) return Prefix(absl::StrCat("engine ", e, ": generate"), reply.status());
      auto p = UnpackParts(*reply, 2, "generate reply");
      if (!p.ok()) return p.status();
      auto h = nlohmann::json::parse((*p)[0], nullptr, false);
      if (h.is_discarded()) return absl::InternalError("generate reply: header is not JSON");
      auto r = DecodeRollout((*p)[1]);
      if (!r.ok()) return r.status();
      parts[e] = std::move(*r);
      g.min_version = std::min<int64_t>(g.min_version, h.value("version", int64_t{-1}));
      g.compute_s = std::max(g.compute_s, h.value("compute_s", 0.0));
    }
    auto joined = ConcatRollouts(parts, Tokenizer::kPad);
    if (!joined.ok()) return joined.status();
    g.rollout = std::move(*joined);
    return g;
  }

  absl::StatusOr<std::vector<int64_t>> EngineVersions() {
    std::vector<int64_t> v;
    for (const auto& e : actors_.engines) {
      auto r = client_.Call(ActorHandle{e}, "version", "");
      if (!r.ok()) return Prefix("engine version", r.status());
      v.push_back(std::stoll(*r));
    }
    return v;
  }

  int epoch_ = 0, hosts_epoch_ = -1;
  // Each trainer shard's weight-sync connections by path, as its last ws_send reported.
  struct SyncPaths {
    int64_t tcp = 0, local = 0, direct_bytes = 0;
  };
  std::vector<SyncPaths> shard_paths_;
  std::vector<std::string> engine_hosts_;
  bool gpu_ = false;  // colocate_all on GPU bundles

  // colocate_all: every engine rank sleeps (drops its weights, freeing the shared device for
  // the trainer) before training. Weight sync then stages the new version in the sleeping
  // engines; WakeEngines before generating swaps it in. Returns how many engines slept.
  absl::StatusOr<int> SleepEngines() {
    std::vector<std::future<absl::StatusOr<std::string>>> calls;
    for (const auto& id : actors_.engines) calls.push_back(client_.CallAsync(ActorHandle{id}, "sleep", "drop"));
    int n = 0;
    for (size_t i = 0; i < calls.size(); ++i) {
      auto r = calls[i].get();
      if (!r.ok()) return Prefix(absl::StrCat("engine rank actor ", i, ": sleep"), r.status());
      if (*r != "ASLEEP") return absl::InternalError(absl::StrCat("engine rank actor ", i, ": sleep left it ", *r));
      ++n;
    }
    return n;
  }
  // A restarted engine is EMPTY, not asleep: its wake_up fails with FailedPrecondition (or
  // Unavailable while it restarts), and Generate's recovery gives it the current weights, so
  // those are skipped here. Returns how many engines woke.
  absl::StatusOr<int> WakeEngines() {
    std::vector<std::future<absl::StatusOr<std::string>>> calls;
    for (const auto& id : actors_.engines) calls.push_back(client_.CallAsync(ActorHandle{id}, "wake_up", ""));
    int n = 0;
    for (size_t i = 0; i < calls.size(); ++i) {
      auto r = calls[i].get();
      if (r.ok()) {
        ++n;
        continue;
      }
      if (EngineRetryable(r.status()) || r.status().code() == absl::StatusCode::kFailedPrecondition) continue;
      return Prefix(absl::StrCat("engine rank actor ", i, ": wake_up"), r.status());
    }
    return n;
  }
  Client& client_;
  const std::string yaml_;
  const JobSetup s_;
  const DistributedOptions opt_;
  JobActors actors_;

 private:
  static absl::Status Prefix(absl::string_view what, const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
  }
};

}  // namespace

absl::StatusOr<DistributedSummary> RunDistributedGrpo(Client& client, const std::string& config_yaml,
                                                      const JobConfig& config, const DistributedOptions& options,
                                                      const std::function<void(const StepMetrics&)>& on_step,
                                                      const std::function<void(const JobActors&)>& on_started) {
  const JobConfig::Trainer& tc = config.trainer;
  if (tc.tp_size < 1 || tc.tp_size > 8) {
    return absl::InvalidArgumentError(absl::StrCat("trainer.tp_size: the job takes 1 to 8 shards, got ", tc.tp_size));
  }
  if (config.generator.tensor_parallel_size < 1 || config.generator.tensor_parallel_size > 8) {
    return absl::InvalidArgumentError(absl::StrCat("generator.tensor_parallel_size: 1 to 8, got ",
                                                   config.generator.tensor_parallel_size));
  }
  if (tc.dp_size != 1) return absl::UnimplementedError(absl::StrCat("trainer.dp_size: the job runs 1 today, got ", tc.dp_size));
  if (tc.async_enabled && tc.colocate_all) {
    // As in SkyRL: colocated engines sleep while the trainer trains, so nothing can overlap.
    return absl::InvalidArgumentError("trainer.async.enabled: needs trainer.placement.colocate_all: false "
                                      "(colocated engines sleep while the trainer trains)");
  }
  if (tc.async_enabled && tc.max_staleness < 0) {
    return absl::InvalidArgumentError(absl::StrCat("trainer.async.max_staleness: must be >= 0, got ", tc.max_staleness));
  }
  if (config.generator.num_engines > tc.train_batch_size) {
    return absl::InvalidArgumentError(absl::StrCat("generator.num_engines: ", config.generator.num_engines,
                                                   " engines for ", tc.train_batch_size, " prompts per step"));
  }
  if (options.weight_sync != "tcp" && options.weight_sync != "push") {
    return absl::InvalidArgumentError(absl::StrCat("weight_sync: tcp or push, got '", options.weight_sync, "'"));
  }
  auto setup = MakeJobSetup(config);
  if (!setup.ok()) return setup.status();
  auto task = FindTask(config.environment.task);
  if (!task.ok()) return task.status();

  DistributedSummary out;
  const auto t_setup = Clock::now();
  Job job(client, config_yaml, *setup, options);
  if (auto s = job.Start(); !s.ok()) return s;
  out.setup_s = Seconds(t_setup, Clock::now());
  if (on_started) on_started(job.actors());

  std::mt19937_64 rng(PromptRngSeed(static_cast<uint64_t>(tc.seed)));
  int64_t version = 0;  // the trainer's
  RunSummary& sum = out.run;
  int at_target_run = 0;
  double step_total = 0;
  const auto start = Clock::now();
  const bool async = tc.async_enabled;
  int ahead_recoveries = 0;  // the generation thread's; folded in after each get
  std::future<absl::StatusOr<std::pair<PromptSet, Job::Generated>>> ahead;
  for (int step = 1; step <= tc.steps; ++step) {
    const auto t0 = Clock::now();
    const bool colocate = config.trainer.colocate_all;
    if (colocate && step > 1) {
      auto woke = job.WakeEngines();
      if (!woke.ok()) return woke.status();
      out.engine_wakes += *woke;
    }
    absl::StatusOr<PromptSet> prompts = absl::UnknownError("no prompts");
    absl::StatusOr<Job::Generated> gen = absl::UnknownError("not generated");
    if (async && step > 1) {
      auto got = ahead.get();  // generated while step - 1 trained
      out.engine_recoveries += ahead_recoveries;
      ahead_recoveries = 0;
      if (!got.ok()) return got.status();
      prompts = std::move(got->first);
      gen = std::move(got->second);
    } else {
      prompts = MakePrompts(**task, config.environment.options, tc.train_batch_size, setup->grpo.group_size, rng);
      if (!prompts.ok()) return prompts.status();
      gen = job.Generate(*prompts, step, &out.engine_recoveries);
    }
    if (!gen.ok()) return gen.status();
    if (async && step < tc.steps) {
      // Step + 1's generation overlaps this step's training, on the engines' current weights.
      // The weight sync below waits for it, so an engine never swaps versions mid-generation.
      auto next = MakePrompts(**task, config.environment.options, tc.train_batch_size, setup->grpo.group_size, rng);
      if (!next.ok()) return next.status();
      ahead = std::async(std::launch::async, [&job, &ahead_recoveries, p = std::move(*next), step]() mutable
                             -> absl::StatusOr<std::pair<PromptSet, Job::Generated>> {
        auto g = job.Generate(p, step + 1, &ahead_recoveries);
        if (!g.ok()) return g.status();
        return std::make_pair(std::move(p), std::move(*g));
      });
    }
    // From here on, an early return must not leave the generation thread running on `job`.
    struct Join {
      std::future<absl::StatusOr<std::pair<PromptSet, Job::Generated>>>* f;
      ~Join() {
        if (f->valid()) f->wait();
      }
    } join{&ahead};
    const auto t1 = Clock::now();
    StepMetrics m;
    m.staleness = version - gen->min_version;
    if (async && m.staleness > tc.max_staleness) {
      // Too old to learn from: counted, not trained on, no new version to sync.
      m.dropped_samples = static_cast<int64_t>(gen->rollout.sequences.size(0));
      sum.dropped_samples += m.dropped_samples;
      const auto tw = Clock::now();
      if (async && step < tc.steps) ahead.wait();
      const auto t4 = Clock::now();
      m.step = step;
      m.generate_s = Seconds(t0, t1);
      m.wait_s = Seconds(tw, t4);
      m.step_s = Seconds(t0, t4);
      m.elapsed_s = Seconds(start, t4);
      step_total += m.step_s;
      out.compute_s += gen->compute_s;
      sum.history.push_back(m);
      auto versions = job.EngineVersions();
      if (!versions.ok()) return versions.status();
      out.engine_versions.push_back(*versions);
      if (on_step) on_step(m);
      continue;
    }

    // Reward and reference are independent: both in flight at once.
    auto rollout_bytes = EncodeRollout(gen->rollout);
    if (!rollout_bytes.ok()) return rollout_bytes.status();
    nlohmann::json ex = nlohmann::json::array();
    for (const auto& e : prompts->examples) ex.push_back({e.prompt, e.target});
    auto score_call = client.CallAsync(ActorHandle{job.actors_.reward}, "score",
                                       PackParts({nlohmann::json{{"examples", ex}}.dump(), *rollout_bytes}));
    auto ref_call = client.CallAsync(ActorHandle{job.actors_.reference}, "logprobs", *rollout_bytes);
    auto score = Json(score_call.get(), "reward: score");
    auto ref_reply = ref_call.get();
    if (!score.ok()) return score.status();
    if (!ref_reply.ok()) return absl::Status(ref_reply.status().code(), absl::StrCat("reference: logprobs: ", ref_reply.status().message()));
    auto ref_parts = UnpackParts(*ref_reply, 2, "reference reply");
    if (!ref_parts.ok()) return ref_parts.status();
    auto ref_h = nlohmann::json::parse((*ref_parts)[0], nullptr, false);
    auto ref = DecodeTensors((*ref_parts)[1]);
    if (!ref.ok()) return ref.status();
    if (ref->size() != 1) return absl::InternalError("reference reply: want one tensor");
    Scored scored;
    try {
      scored.rewards = (*score)["rewards"].get<std::vector<float>>();
      scored.mean_reward = (*score)["mean_reward"].get<double>();
      scored.exact_fraction = (*score)["exact_fraction"].get<double>();
      scored.response_tokens = (*score)["response_tokens"].get<int64_t>();
    } catch (const nlohmann::json::exception& e) {
      return absl::InternalError(absl::StrCat("reward reply: ", e.what()));
    }
    const double score_compute =
        std::max(score->value("compute_s", 0.0), ref_h.is_discarded() ? 0.0 : ref_h.value("compute_s", 0.0));
    const auto t2 = Clock::now();

    auto batch = MakeTrainBatch(gen->rollout, scored, (*ref)[0].second, setup->grpo);
    if (!batch.ok()) return batch.status();
    // Off-policy samples (async): the engines' log-probs are the behaviour policy's (exactly so
    // only without top-p truncation), as in RunLocalGrpo.
    if (m.staleness > 0 && setup->sampling.top_p >= 1) batch->old_logprobs = gen->rollout.logprobs;
    auto batch_bytes = EncodeTrainBatch(*batch);
    if (!batch_bytes.ok()) return batch_bytes.status();
    if (colocate) {
      auto slept = job.SleepEngines();
      if (!slept.ok()) return slept.status();
      out.engine_sleeps += *slept;
    }
    std::vector<std::future<absl::StatusOr<std::string>>> trains;
    for (const auto& t : job.actors_.trainers) trains.push_back(client.CallAsync(ActorHandle{t}, "train", *batch_bytes));
    double train_compute = 0;
    int64_t trained_version = version + 1;
    absl::Status train_error;
    for (size_t r = 0; r < trains.size(); ++r) {
      auto j = Json(trains[r].get(), absl::StrCat("trainer rank ", r, ": train"));
      if (!j.ok()) {
        if (train_error.ok()) train_error = j.status();
        continue;
      }
      train_compute = std::max(train_compute, j->value("compute_s", 0.0));
      trained_version = j->value("version", trained_version);
      if (r == 0) {
        m.loss = j->value("loss", 0.0);
        m.policy_loss = j->value("policy_loss", 0.0);
        m.kl = j->value("kl", 0.0);
        m.clip_fraction = j->value("clip_fraction", 0.0);
        m.grad_norm = j->value("grad_norm", 0.0);
      }
    }
    if (!train_error.ok()) return train_error;
    const auto t3 = Clock::now();
    if (async && step < tc.steps) ahead.wait();  // engines idle before their weights change
    const auto t3b = Clock::now();
    version = trained_version;
    auto synced = options.weight_sync == "tcp" ? job.SyncTcp(version, &out.engine_recoveries, &out.sync_fallbacks)
                                               : job.Sync(job.actors_.engines, &out.engine_recoveries);
    if (!synced.ok()) return synced.status();
    const auto t4 = Clock::now();

    m.step = step;
    m.mean_reward = scored.mean_reward;
    m.exact_fraction = scored.exact_fraction;
    m.response_tokens = scored.response_tokens;
    m.generate_s = Seconds(t0, t1);
    m.reward_s = Seconds(t1, t2);
    m.train_s = Seconds(t2, t3);
    m.wait_s = Seconds(t3, t3b);
    m.sync_s = Seconds(t3b, t4);
    m.step_s = Seconds(t0, t4);
    m.elapsed_s = Seconds(start, t4);
    m.tokens_per_s = m.step_s > 0 ? static_cast<double>(m.response_tokens) / m.step_s : 0;
    // Model compute on the critical path: the slowest engine, then reward/reference (run
    // together), then the slowest shard. Everything else (RPC, serialization, scheduling,
    // the whole weight sync) is the runtime's overhead.
    const double compute = gen->compute_s + score_compute + train_compute;
    out.compute_s += compute;
    step_total += m.step_s;
    sum.history.push_back(m);
    // Observability, outside the step's timing: every engine's version after the sync.
    auto versions = job.EngineVersions();
    if (!versions.ok()) return versions.status();
    out.engine_versions.push_back(*versions);
    if (on_step) on_step(m);
    if (RecordStep(sum, m, step, config.environment.target_reward, options.stop_after_target, at_target_run)) break;
  }
  FinishSummary(sum);
  for (const Job::SyncPaths& p : job.shard_paths_) {
    out.sync_tcp_connections += p.tcp;
    out.sync_local_connections += p.local;
    out.sync_direct_write_bytes += p.direct_bytes;
  }
  out.overhead_fraction = step_total > 0 ? std::max(0.0, step_total - out.compute_s) / step_total : 0;
  return out;
}

}  // namespace skyrl::actors
