#include "rl/job/grpo_driver.h"

#include <algorithm>
#include <cstdio>
#include <future>
#include <optional>
#include <random>

#include "absl/strings/str_cat.h"
#include "rl/algo/checkpoint.h"
#include "rl/job/job_setup.h"
#include "rl/job/role_stubs.h"
#include "rl/tasks/tokenizer.h"
#include "rl/train/grpo_step.h"
#include "rl/train/step_timer.h"

namespace skyrl::rl {
namespace {

using Phase = StepTimer::Phase;

absl::Status Prefix(absl::string_view what, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
}

// The job's actors: the placement group, the role actors started in it, and the operations
// the loop runs on them, one per phase of a step.
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

  // The placement group, every role actor in it, and version 0 (the initial weights) on every
  // engine.
  absl::Status Start();
  const JobActors& actors() const { return actors_; }
  bool colocated() const { return s_.config.trainer.colocate_all; }

  // ---- the phases of a step ----

  struct Generated {
    Rollout rollout;
    int64_t min_version = 0;
    double compute_s = 0;  // the slowest engine's
  };
  // Whole groups per engine, every engine at once. An engine that died (TP 1) gets the
  // current weights again once the runtime restarted it, and is asked again, up to
  // engine_retries times; `recovered` counts those.
  absl::StatusOr<Generated> Generate(const PromptSet& prompts, int step, Recoveries& recovered);

  struct Scores {
    Scored scored;
    torch::Tensor reference_logprobs;
    double compute_s = 0;    // the slower of reward and reference
    double reference_s = 0;  // the reference's own
  };
  // Reward and reference, both in flight at once (they are independent).
  absl::StatusOr<Scores> Score(const PromptSet& prompts, const Rollout& rollout);

  struct Trained {
    pb::TrainReply rank0;  // loss, KL, ... as rank 0 reports them
    int64_t version = 0;
    double compute_s = 0;  // the slowest shard's
  };
  // Every trainer shard on the same batch at once (their TP collective needs them all).
  absl::StatusOr<Trained> Train(const TrainBatch& batch, int64_t version);

  // One version to every engine: weight_sync's TCP transport ("tcp"), falling back to the
  // push for the step when it fails, or the push ("push"). Returns the shards' encode seconds.
  absl::StatusOr<double> Sync(int64_t version, Recoveries& recovered) {
    return opt_.weight_sync == WeightSyncMode::kTcp ? SyncTcp(version, recovered)
                                                    : Push(actors_.engines, recovered);
  }

  // colocate_all: every engine rank sleeps (drops its weights, freeing the shared device for
  // the trainer) before training. Weight sync then stages the new version in the sleeping
  // engines; WakeEngines before generating swaps it in. Return how many engines slept / woke.
  absl::StatusOr<int> SleepEngines();
  absl::StatusOr<int> WakeEngines();

  absl::StatusOr<std::vector<int64_t>> EngineVersions();

  // Each trainer shard's weight-sync connections by path, as its last ws_send reported.
  struct SyncPaths {
    int64_t tcp = 0, local = 0, direct_bytes = 0;
  };
  const std::vector<SyncPaths>& shard_paths() const { return shard_paths_; }
  // Bytes the trainer shards sent in the last weight sync (0 when it went the push way).
  int64_t last_sync_bytes() const { return last_sync_bytes_; }

 private:
  absl::StatusOr<double> SyncTcp(int64_t version, Recoveries& recovered);
  absl::StatusOr<double> Push(std::vector<std::string> engines, Recoveries& recovered);
  absl::StatusOr<std::string> CreateRole(const std::string& cls, const RoleArgs& a, int bundle, double cpu,
                                         int max_restarts);
  // "host:port" of a TP group's rank 0 (its actor's host, the port its TP group listens on).
  absl::StatusOr<std::string> GroupMaster(const std::string& actor_id, absl::StatusOr<int64_t> port,
                                          absl::string_view who);

  Client& client_;
  const std::string yaml_;
  const JobSetup s_;
  const DistributedOptions opt_;
  JobActors actors_;
  std::vector<TrainerStub> trainers_;
  std::vector<EngineStub> engines_;  // every rank, as actors_.engines
  std::optional<RewardStub> reward_;
  std::optional<ReferenceStub> reference_;
  int epoch_ = 0, hosts_epoch_ = -1;
  std::vector<SyncPaths> shard_paths_;
  int64_t last_sync_bytes_ = 0;
  std::vector<std::string> engine_hosts_;
  bool gpu_ = false;  // colocate_all on GPU bundles
  int aux_bundle_ = 0;
};

absl::StatusOr<std::string> Job::CreateRole(const std::string& cls, const RoleArgs& a, int bundle, double cpu,
                                            int max_restarts) {
  v1::ActorSpec spec = ActorSpecFor(cls, {{"CPU", cpu}});
  if (gpu_ && bundle != aux_bundle_) (*spec.mutable_resources())["GPU"] = 0.5;
  spec.set_init_args(EncodeRoleArgs(a));
  spec.set_placement_group_id(actors_.placement_group);
  spec.set_bundle_index(bundle);
  spec.set_host("rl");
  spec.set_max_restarts(max_restarts);
  auto h = client_.CreateActor(spec);
  if (!h.ok()) return Prefix(absl::StrCat(cls, " (bundle ", bundle, ")"), h.status());
  return h->actor_id;
}

absl::StatusOr<std::string> Job::GroupMaster(const std::string& actor_id, absl::StatusOr<int64_t> port,
                                             absl::string_view who) {
  if (!port.ok()) return port.status();
  auto info = client_.Describe(ActorHandle{actor_id});
  if (!info.ok()) return Prefix(who, info.status());
  const std::string& addr = info->address();
  return absl::StrCat(addr.substr(0, addr.rfind(':')), ":", *port);
}

absl::Status Job::Start() {
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
  aux_bundle_ = gpu_ ? pairs : tp + engines;
  auto engine_bundle = [&](int i) { return gpu_ ? i : tp + i; };
  auto ready = client_.WaitPlacementGroup(actors_.placement_group, opt_.ready_timeout);
  if (!ready.ok()) return Prefix("placement group", ready.status());

  RoleArgs base;
  base.config_yaml = yaml_;
  base.world = tp;
  auto add_trainer = [&](const std::string& id) {
    actors_.trainers.push_back(id);
    trainers_.emplace_back(client_, id, absl::StrCat("trainer rank ", trainers_.size()));
  };
  // Trainer rank 0 first: it binds the TP group's port; the others connect to it.
  auto r0 = CreateRole(role::trainer::kClass, base, 0, 1, 0);
  if (!r0.ok()) return r0.status();
  add_trainer(*r0);
  if (tp > 1) {
    auto master = GroupMaster(*r0, trainers_[0].Port(), "trainer rank 0");
    if (!master.ok()) return master.status();
    base.master = *master;
    for (int r = 1; r < tp; ++r) {
      RoleArgs a = base;
      a.rank = r;
      auto id = CreateRole(role::trainer::kClass, a, r, 1, 0);
      if (!id.ok()) return id.status();
      add_trainer(*id);
    }
  }
  for (int e = 0; e < s_.config.generator.num_engines; ++e) {
    RoleArgs a = base;
    a.world = etp;
    a.rank = 0;
    a.master.clear();
    a.engine = e;
    // A TP-1 engine restarts as often as it dies; a larger one cannot re-form its group.
    const int restarts = etp == 1 ? -1 : 0;
    auto add_engine = [&](const std::string& id, int r) {
      actors_.engines.push_back(id);
      engines_.emplace_back(client_, id, absl::StrCat("engine ", e, " rank ", r));
    };
    auto id0 = CreateRole(role::engine::kClass, a, engine_bundle(e * etp), 1, restarts);
    if (!id0.ok()) return id0.status();
    add_engine(*id0, 0);
    if (etp > 1) {
      auto master = GroupMaster(*id0, engines_.back().Port(), absl::StrCat("engine ", e, " rank 0"));
      if (!master.ok()) return master.status();
      a.master = *master;
      for (int r = 1; r < etp; ++r) {
        a.rank = r;
        auto id = CreateRole(role::engine::kClass, a, engine_bundle(e * etp + r), 1, restarts);
        if (!id.ok()) return id.status();
        add_engine(*id, r);
      }
    }
  }
  RoleArgs aux = base;
  aux.world = 1;
  aux.master.clear();
  auto reward = CreateRole(role::reward::kClass, aux, aux_bundle_, 0.5, 3);
  if (!reward.ok()) return reward.status();
  actors_.reward = *reward;
  reward_.emplace(client_, *reward, "reward");
  auto reference = CreateRole(role::reference::kClass, aux, aux_bundle_, 0.5, 3);
  if (!reference.ok()) return reference.status();
  actors_.reference = *reference;
  reference_.emplace(client_, *reference, "reference");
  Recoveries uncounted;  // the first version, before any step
  return Sync(0, uncounted).status();
}

// One version through weight_sync's TCP transport: every engine receives while every trainer
// shard sends (all in flight at once). On failure: a message on stderr, a new key prefix (so
// a restarted engine's new address is the one looked up next time), and the push.
absl::StatusOr<double> Job::SyncTcp(int64_t version, Recoveries& recovered) {
  if (hosts_epoch_ != epoch_) {
    engine_hosts_.clear();
    for (const auto& e : actors_.engines) {
      auto info = client_.Describe(ActorHandle{e});
      if (!info.ok()) return Prefix("engine", info.status());
      engine_hosts_.push_back(info->address().substr(0, info->address().rfind(':')));
    }
    hosts_epoch_ = epoch_;
  }
  pb::WsRequest request;
  request.set_prefix(absl::StrCat("grpo/", actors_.placement_group, "/", epoch_));
  request.set_engine_tp(actors_.engine_tp);
  request.set_engines(static_cast<int>(engines_.size()) / actors_.engine_tp);
  request.set_trainer_tp(static_cast<int>(trainers_.size()));
  request.set_version(version);
  std::vector<Pending<pb::WsReceiveReply>> recv;
  for (size_t e = 0; e < engines_.size(); ++e) {
    pb::WsRequest r = request;
    r.set_rank(static_cast<int>(e));
    r.set_host(engine_hosts_[e]);
    recv.push_back(engines_[e].WsReceive(r));
  }
  std::vector<Pending<pb::WsSendReply>> send;
  for (const TrainerStub& t : trainers_) send.push_back(t.WsSend(request));
  double encode_s = 0;
  int64_t bytes = 0;
  std::string error;
  last_sync_bytes_ = 0;
  for (size_t r = 0; r < send.size(); ++r) {
    absl::StatusOr<pb::WsSendReply> sent = send[r].Get();
    if (!sent.ok()) {
      if (error.empty()) error = sent.status().ToString();
      continue;
    }
    encode_s = std::max(encode_s, sent->encode_s());
    bytes += sent->bytes();
    // Cumulative per shard (a shard's transport lives as long as the shard).
    if (r >= shard_paths_.size()) shard_paths_.resize(r + 1);
    shard_paths_[r] = {sent->tcp_connections(), sent->local_connections(), sent->direct_write_bytes()};
  }
  for (auto& pending : recv) {
    absl::StatusOr<pb::WsReceiveReply> got = pending.Get();
    if (!got.ok() && error.empty()) error = got.status().ToString();
  }
  if (error.empty()) {
    last_sync_bytes_ = bytes;
    return encode_s;
  }
  std::fprintf(stderr, "skyrl-grpo: TCP weight sync of version %lld failed (%s); pushing it instead\n",
               static_cast<long long>(version), error.c_str());
  ++recovered.sync_fallbacks;
  ++epoch_;
  return Push(actors_.engines, recovered);
}

// Every trainer shard pushes its shard to `engines`; engines that failed are retried (their
// restart is awaited by the client) up to engine_retries times. Returns the seconds the
// shards spent encoding (serialization overhead).
absl::StatusOr<double> Job::Push(std::vector<std::string> engines, Recoveries& recovered) {
  double encode_s = 0;
  for (int attempt = 0; !engines.empty(); ++attempt) {
    pb::SyncWeightsRequest request;
    request.mutable_engines()->Add(engines.begin(), engines.end());
    std::vector<Pending<pb::SyncWeightsReply>> calls;
    for (const TrainerStub& t : trainers_) calls.push_back(t.SyncWeights(request));
    std::vector<std::string> failed;
    std::string last_error;
    for (auto& call : calls) {
      absl::StatusOr<pb::SyncWeightsReply> reply = call.Get();
      if (!reply.ok()) return reply.status();
      encode_s = std::max(encode_s, reply->encode_s());
      for (const pb::EngineFailure& f : reply->failed()) {
        last_error = f.error();
        if (std::find(failed.begin(), failed.end(), f.engine()) == failed.end()) failed.push_back(f.engine());
      }
    }
    if (!failed.empty()) {
      if (attempt >= opt_.engine_retries) {
        return absl::UnavailableError(absl::StrCat("weight sync to engine ", failed[0], " failed ",
                                                   attempt + 1, " times; last: ", last_error));
      }
      ++recovered.engine_calls;
      ++epoch_;
    }
    engines = failed;
  }
  return encode_s;
}

absl::StatusOr<Job::Generated> Job::Generate(const PromptSet& prompts, int step, Recoveries& recovered) {
  const int etp = actors_.engine_tp;
  const int engines = static_cast<int>(engines_.size()) / etp;
  const auto slices = SplitPrompts(prompts, s_.grpo.group_size, engines);
  std::vector<absl::StatusOr<pb::GenerateRequest>> requests;
  for (int e = 0; e < engines; ++e)
    requests.push_back(role::MakeGenerateRequest(
        EngineSeed(static_cast<uint64_t>(s_.config.trainer.seed), step, e), slices[e].batch));
  // Every rank of an engine gets the same call (their TP collective needs them together);
  // the ranks sample the same tokens, rank 0 answers for the engine.
  std::vector<Pending<pb::GenerateReply>> calls;
  for (int i = 0; i < engines * etp; ++i) calls.push_back(engines_[i].Generate(requests[i / etp]));
  Generated g;
  g.min_version = INT64_MAX;
  std::vector<Rollout> parts(engines);
  for (int e = 0; e < engines; ++e) {
    absl::StatusOr<pb::GenerateReply> reply = calls[e * etp].Get();
    for (int r = 1; r < etp; ++r) {
      absl::StatusOr<pb::GenerateReply> other = calls[e * etp + r].Get();
      if (!other.ok() && reply.ok()) reply = other.status();
    }
    for (int attempt = 0;
         etp == 1 && !reply.ok() && EngineStub::Recoverable(reply.status()) && attempt < opt_.engine_retries;
         ++attempt) {
      // The engine died (or came back empty): the runtime restarts it; give it the
      // current weights, then ask again.
      ++recovered.engine_calls;
      ++epoch_;              // its TCP endpoint is new: look addresses up under a fresh prefix
      Recoveries uncounted;  // the retry of the generation is what counts
      if (auto s = Push({actors_.engines[e]}, uncounted); !s.ok()) return s.status();
      reply = engines_[e].Generate(requests[e]).Get();
    }
    if (!reply.ok()) return reply.status();
    absl::StatusOr<Rollout> rollout = DecodeRollout(reply->rollout());
    if (!rollout.ok()) return Prefix(engines_[e * etp].name(), rollout.status());
    parts[e] = *std::move(rollout);
    g.min_version = std::min<int64_t>(g.min_version, reply->version());
    g.compute_s = std::max(g.compute_s, reply->compute_s());
  }
  auto joined = ConcatRollouts(parts, Tokenizer::kPad);
  if (!joined.ok()) return joined.status();
  g.rollout = std::move(*joined);
  return g;
}

absl::StatusOr<Job::Scores> Job::Score(const PromptSet& prompts, const Rollout& rollout) {
  auto rollout_bytes = EncodeRollout(rollout);
  if (!rollout_bytes.ok()) return rollout_bytes.status();
  Pending<pb::ScoreReply> score_call = reward_->Score(prompts.examples, *rollout_bytes);
  Pending<pb::LogprobsReply> ref_call = reference_->Logprobs(*std::move(rollout_bytes));
  absl::StatusOr<pb::ScoreReply> score = score_call.Get();
  absl::StatusOr<pb::LogprobsReply> ref = ref_call.Get();
  if (!score.ok()) return score.status();
  if (!ref.ok()) return ref.status();
  absl::StatusOr<torch::Tensor> logprobs = role::RefOf(*ref);
  if (!logprobs.ok()) return Prefix(reference_->name(), logprobs.status());
  return Scores{role::ScoredOf(*score), *std::move(logprobs), std::max(score->compute_s(), ref->compute_s()),
                ref->compute_s()};
}

absl::StatusOr<Job::Trained> Job::Train(const TrainBatch& batch, int64_t version) {
  auto batch_bytes = EncodeTrainBatch(batch);
  if (!batch_bytes.ok()) return batch_bytes.status();
  std::vector<Pending<pb::TrainReply>> calls;
  for (const TrainerStub& t : trainers_) calls.push_back(t.Train(*batch_bytes));
  Trained out;
  out.version = version + 1;
  absl::Status error;
  for (size_t r = 0; r < calls.size(); ++r) {
    absl::StatusOr<pb::TrainReply> reply = calls[r].Get();
    if (!reply.ok()) {
      if (error.ok()) error = reply.status();
      continue;
    }
    out.compute_s = std::max(out.compute_s, reply->compute_s());
    out.version = reply->version();
    if (r == 0) out.rank0 = *reply;
  }
  if (!error.ok()) return error;
  return out;
}

absl::StatusOr<int> Job::SleepEngines() {
  std::vector<Pending<pb::EngineState>> calls;
  for (const EngineStub& e : engines_) calls.push_back(e.Sleep(/*keep_weights=*/false));
  int n = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    absl::StatusOr<pb::EngineState> r = calls[i].Get();
    if (!r.ok()) return r.status();
    if (r->state() != role::engine::kAsleep)
      return absl::InternalError(absl::StrCat(engines_[i].name(), ": sleep left it ", r->state()));
    ++n;
  }
  return n;
}

// A restarted engine is EMPTY, not asleep: its wake_up fails with FailedPrecondition (or
// Unavailable while it restarts), and Generate's recovery gives it the current weights, so
// those are skipped here.
absl::StatusOr<int> Job::WakeEngines() {
  std::vector<Pending<pb::EngineState>> calls;
  for (const EngineStub& e : engines_) calls.push_back(e.WakeUp());
  int n = 0;
  for (auto& call : calls) {
    absl::StatusOr<pb::EngineState> r = call.Get();
    if (r.ok()) {
      ++n;
    } else if (!EngineStub::Recoverable(r.status())) {
      return r.status();
    }
  }
  return n;
}

absl::StatusOr<std::vector<int64_t>> Job::EngineVersions() {
  std::vector<int64_t> v;
  for (const EngineStub& e : engines_) {
    absl::StatusOr<int64_t> r = e.Version();
    if (!r.ok()) return r.status();
    v.push_back(*r);
  }
  return v;
}

// The loop over steps. Per step, in phases: generate (or take what was generated ahead),
// score (reward and reference), train, wait (async: for the generation ahead), sync, record.
class Loop {
 public:
  Loop(const JobConfig& config, const JobSetup& setup, const Task& task, const DistributedOptions& options,
       Job& job, DistributedSummary& out)
      : config_(config),
        tc_(config.trainer),
        setup_(setup),
        task_(task),
        opt_(options),
        job_(job),
        out_(out),
        rng_(PromptRngSeed(static_cast<uint64_t>(tc_.seed))) {}
  ~Loop() { JoinAhead(); }  // never leave the generation thread running on the job

  // Returns whether the run stops here (the target held long enough).
  absl::StatusOr<bool> Step(int step, std::function<void(const StepMetrics&)> on_step);
  double step_total() const { return step_total_; }

 private:
  using Ahead = std::future<absl::StatusOr<std::pair<PromptSet, Job::Generated>>>;
  absl::StatusOr<PromptSet> Prompts() {
    return MakePrompts(task_, config_.environment.options, tc_.train_batch_size, setup_.grpo.group_size,
                       rng_);
  }
  bool Pipelined(int step) const { return tc_.async_enabled && step < tc_.steps; }
  void JoinAhead() {
    if (ahead_.valid()) ahead_.wait();
  }
  // Generate: wakes colocated engines, then this step's samples (generated ahead in async
  // mode), then starts step + 1's generation ahead when pipelined.
  absl::StatusOr<std::pair<PromptSet, Job::Generated>> GeneratePhase(int step);
  // Records a step whose samples were too stale to learn from.
  absl::Status RecordDropped(StepMetrics& m, StepTimer& timer, const Job::Generated& gen, int step,
                             const std::function<void(const StepMetrics&)>& on_step);
  absl::Status Record(const StepMetrics& m, double compute_s,
                      const std::function<void(const StepMetrics&)>& on_step);

  const JobConfig& config_;
  const JobConfig::Trainer& tc_;
  const JobSetup& setup_;
  const Task& task_;
  const DistributedOptions& opt_;
  Job& job_;
  DistributedSummary& out_;
  std::mt19937_64 rng_;
  const StepTimer::Clock::time_point start_ = StepTimer::Clock::now();
  int64_t version_ = 0;  // the trainer's
  int at_target_run_ = 0;
  double step_total_ = 0;
  Recoveries ahead_recovered_;  // the generation thread's; folded in after each get
  Ahead ahead_;
};

absl::StatusOr<std::pair<PromptSet, Job::Generated>> Loop::GeneratePhase(int step) {
  if (job_.colocated() && step > 1) {
    auto woke = job_.WakeEngines();
    if (!woke.ok()) return woke.status();
    out_.engine_wakes += *woke;
  }
  std::pair<PromptSet, Job::Generated> now;
  if (tc_.async_enabled && step > 1) {
    auto got = ahead_.get();  // generated while step - 1 trained
    out_.recovered += ahead_recovered_;
    ahead_recovered_ = Recoveries{};
    if (!got.ok()) return got.status();
    now = std::move(*got);
  } else {
    auto prompts = Prompts();
    if (!prompts.ok()) return prompts.status();
    auto gen = job_.Generate(*prompts, step, out_.recovered);
    if (!gen.ok()) return gen.status();
    now = {std::move(*prompts), std::move(*gen)};
  }
  if (Pipelined(step)) {
    // Step + 1's generation overlaps this step's training, on the engines' current weights.
    // The weight sync waits for it, so an engine never swaps versions mid-generation.
    auto next = Prompts();
    if (!next.ok()) return next.status();
    ahead_ = std::async(
        std::launch::async,
        [this, p = std::move(*next), step]() mutable -> absl::StatusOr<std::pair<PromptSet, Job::Generated>> {
          auto g = job_.Generate(p, step + 1, ahead_recovered_);
          if (!g.ok()) return g.status();
          return std::make_pair(std::move(p), std::move(*g));
        });
  }
  return now;
}

absl::Status Loop::RecordDropped(StepMetrics& m, StepTimer& timer, const Job::Generated& gen, int step,
                                 const std::function<void(const StepMetrics&)>& on_step) {
  m.dropped_samples = static_cast<int64_t>(gen.rollout.sequences.size(0));
  out_.run.dropped_samples += m.dropped_samples;
  timer.Skip();
  if (Pipelined(step)) ahead_.wait();
  timer.Lap(Phase::kWait);
  m.step = step;
  timer.Finish(&m);
  return Record(m, gen.compute_s, on_step);
}

absl::Status Loop::Record(const StepMetrics& m, double compute_s,
                          const std::function<void(const StepMetrics&)>& on_step) {
  out_.compute_s += compute_s;
  step_total_ += m.step_s;
  out_.run.history.push_back(m);
  // Observability, outside the step's timing: every engine's version after the sync.
  auto versions = job_.EngineVersions();
  if (!versions.ok()) return versions.status();
  out_.engine_versions.push_back(*versions);
  if (on_step) on_step(m);
  return absl::OkStatus();
}

absl::StatusOr<bool> Loop::Step(int step, std::function<void(const StepMetrics&)> on_step) {
  StepTimer timer(start_);
  auto generated = GeneratePhase(step);
  if (!generated.ok()) return generated.status();
  const PromptSet& prompts = generated->first;
  const Job::Generated& gen = generated->second;
  timer.Lap(Phase::kGenerate);

  StepMetrics m;
  m.staleness = version_ - gen.min_version;
  if (tc_.async_enabled && m.staleness > tc_.max_staleness) {
    // Too old to learn from: counted, not trained on, no new version to sync.
    if (auto s = RecordDropped(m, timer, gen, step, on_step); !s.ok()) return s;
    return false;
  }

  auto scores = job_.Score(prompts, gen.rollout);
  if (!scores.ok()) return scores.status();
  timer.Lap(Phase::kReward);
  m.reference_s = scores->reference_s;

  auto batch = MakeTrainBatch(gen.rollout, scores->scored, scores->reference_logprobs, setup_.grpo);
  if (!batch.ok()) return batch.status();
  // Off-policy samples (async): the engines' log-probs are the behaviour policy's (exactly so
  // only without top-p truncation), as in RunLocalGrpo.
  if (m.staleness > 0 && setup_.sampling.top_p >= 1) batch->old_logprobs = gen.rollout.logprobs;
  if (job_.colocated()) {
    auto slept = job_.SleepEngines();
    if (!slept.ok()) return slept.status();
    out_.engine_sleeps += *slept;
  }
  auto trained = job_.Train(*batch, version_);
  if (!trained.ok()) return trained.status();
  timer.Lap(Phase::kTrain);

  if (Pipelined(step)) ahead_.wait();  // engines idle before their weights change
  timer.Lap(Phase::kWait);

  version_ = trained->version;
  auto synced = job_.Sync(version_, out_.recovered);
  if (!synced.ok()) return synced.status();
  timer.Lap(Phase::kSync);

  m.step = step;
  m.mean_reward = scores->scored.mean_reward;
  m.exact_fraction = scores->scored.exact_fraction;
  m.response_tokens = scores->scored.response_tokens;
  m.loss = trained->rank0.loss();
  m.policy_loss = trained->rank0.policy_loss();
  m.kl = trained->rank0.kl();
  m.clip_fraction = trained->rank0.clip_fraction();
  m.grad_norm = trained->rank0.grad_norm();
  m.sync_bytes = job_.last_sync_bytes();
  timer.Finish(&m);
  // Model compute on the critical path: the slowest engine, then reward/reference (run
  // together), then the slowest shard. Everything else (RPC, serialization, scheduling,
  // the whole weight sync) is the runtime's overhead.
  if (auto s = Record(m, gen.compute_s + scores->compute_s + trained->compute_s, on_step); !s.ok()) return s;
  return RecordStep(out_.run, m, step, config_.environment.target_reward, opt_.stop_after_target,
                    at_target_run_);
}

absl::Status ValidateDistributed(const JobConfig& config, const DistributedOptions& options) {
  const JobConfig::Trainer& tc = config.trainer;
  if (tc.tp_size < 1 || tc.tp_size > 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("trainer.tp_size: the job takes 1 to 8 shards, got ", tc.tp_size));
  }
  if (config.generator.tensor_parallel_size < 1 || config.generator.tensor_parallel_size > 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("generator.tensor_parallel_size: 1 to 8, got ", config.generator.tensor_parallel_size));
  }
  if (tc.dp_size != 1)
    return absl::UnimplementedError(absl::StrCat("trainer.dp_size: the job runs 1 today, got ", tc.dp_size));
  if (tc.async_enabled && tc.colocate_all) {
    // As in SkyRL: colocated engines sleep while the trainer trains, so nothing can overlap.
    return absl::InvalidArgumentError(
        "trainer.async.enabled: needs trainer.placement.colocate_all: false "
        "(colocated engines sleep while the trainer trains)");
  }
  if (tc.async_enabled && tc.max_staleness < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("trainer.async.max_staleness: must be >= 0, got ", tc.max_staleness));
  }
  if (config.generator.num_engines > tc.train_batch_size) {
    return absl::InvalidArgumentError(absl::StrCat("generator.num_engines: ", config.generator.num_engines,
                                                   " engines for ", tc.train_batch_size,
                                                   " prompts per step"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<WeightSyncMode> ParseWeightSyncMode(absl::string_view name, absl::string_view what) {
  if (name == "tcp") return WeightSyncMode::kTcp;
  if (name == "push") return WeightSyncMode::kPush;
  return absl::InvalidArgumentError(absl::StrCat(what, ": tcp or push, got '", name, "'"));
}

absl::StatusOr<DistributedSummary> RunDistributedGrpo(
    Client& client, const std::string& config_yaml, const JobConfig& config,
    const DistributedOptions& options, const std::function<void(const StepMetrics&)>& on_step,
    const std::function<void(const JobActors&)>& on_started) {
  if (absl::Status s = ValidateDistributed(config, options); !s.ok()) return s;
  auto setup = MakeJobSetup(config);
  if (!setup.ok()) return setup.status();
  auto task = FindTask(config.environment.task);
  if (!task.ok()) return task.status();

  DistributedSummary out;
  const auto t_setup = StepTimer::Clock::now();
  Job job(client, config_yaml, *setup, options);
  if (auto s = job.Start(); !s.ok()) return s;
  out.setup_s = std::chrono::duration<double>(StepTimer::Clock::now() - t_setup).count();
  if (on_started) on_started(job.actors());

  double step_total = 0;
  {
    Loop loop(config, *setup, **task, options, job, out);
    for (int step = 1; step <= config.trainer.steps; ++step) {
      absl::StatusOr<bool> stop = loop.Step(step, on_step);
      if (!stop.ok()) return stop.status();
      if (*stop) break;
    }
    step_total = loop.step_total();
  }
  FinishSummary(out.run);
  for (const Job::SyncPaths& p : job.shard_paths()) {
    out.sync_tcp_connections += p.tcp;
    out.sync_local_connections += p.local;
    out.sync_direct_write_bytes += p.direct_bytes;
  }
  out.overhead_fraction = step_total > 0 ? std::max(0.0, step_total - out.compute_s) / step_total : 0;
  return out;
}

}  // namespace skyrl::rl
