#include "runtime/head/head_metrics.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
#include "runtime/common/job_metrics_keys.h"
#include "runtime/head/head.h"
#include "runtime/head/kv_service.h"
#include "runtime/metrics/families.h"

namespace skyrl::head {
namespace {

using metrics::Counters;
using metrics::Gauges;
using metrics::Labels;
using prometheus::MetricFamily;

// "NODE_ALIVE" -> "alive", "PG_CREATED" -> "created": the enum name after its prefix.
std::string StateName(const std::string& enum_name, const std::string& prefix) {
  return absl::AsciiStrToLower(enum_name.substr(prefix.size()));
}

// Every state from `first` to `last` (named by `name`), each at 0, keyed by its label.
template <typename NameFn>
std::map<Labels, double> AllStates(int first, int last, NameFn name, const std::string& prefix) {
  std::map<Labels, double> out;
  for (int s = first; s <= last; ++s) out[{{"state", StateName(name(s), prefix)}}] = 0;
  return out;
}

// How long an ended job's last step stays exported, so a scrape after a short job still sees it.
constexpr absl::Duration kEndedJobsKept = absl::Minutes(5);

// The jobs' own step records (job_metrics_keys.h): the last step's figures per job, and the
// samples dropped over all steps. Records that are not JSON objects are a job's own bytes:
// skipped.
void AddJobSteps(Head& head, std::vector<MetricFamily>& out) {
  std::map<std::string, std::map<Labels, double>> g;
  std::map<Labels, double> dropped;
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  for (const v1::JobInfo& j : head.jobs().List()) {
    const bool running = j.state() == v1::JOB_RUNNING;
    if (!running &&
        (j.ended_unix_ms() == 0 || now_ms - j.ended_unix_ms() > absl::ToInt64Milliseconds(kEndedJobsKept)))
      continue;
    absl::StatusOr<std::vector<store::Entry>> steps =
        head.store().Scan(kKvTable, JobMetricsPrefix(j.job_id()));
    if (!steps.ok() || steps->empty()) continue;
    const Labels job = {{"job_id", j.job_id()}};  // not "job": Prometheus sets that one
    double drops = 0;
    nlohmann::json last;
    for (const store::Entry& e : *steps) {
      nlohmann::json step = nlohmann::json::parse(e.value, nullptr, /*allow_exceptions=*/false);
      if (!step.is_object()) continue;
      if (step.contains("dropped_samples") && step["dropped_samples"].is_number())
        drops += step["dropped_samples"].get<double>();
      last = std::move(step);
    }
    if (!last.is_object()) continue;
    dropped[job] = drops;
    auto number = [&](const char* key) {
      return last.contains(key) && last[key].is_number() ? last[key].get<double>() : 0.0;
    };
    g["skyrl_job_step"][job] = number("step");
    g["skyrl_job_mean_reward"][job] = number("mean_reward");
    g["skyrl_job_kl"][job] = number("kl");
    g["skyrl_job_tokens_per_second"][job] = number("tokens_per_s");
    g["skyrl_job_staleness"][job] = number("staleness");
    g["skyrl_job_step_seconds"][job] = number("step_s");
    // "reference" lies inside "reward" (the reference model runs beside the reward model).
    for (const char* phase : {"generate", "reward", "reference", "train", "wait", "sync"})
      g["skyrl_job_phase_seconds"][{{"job_id", j.job_id()}, {"phase", phase}}] =
          number((std::string(phase) + "_s").c_str());
    g["skyrl_job_weight_sync_bytes"][job] = number("sync_bytes");
    const double sync_s = number("sync_s");
    g["skyrl_job_weight_sync_gigabytes_per_second"][job] =
        sync_s > 0 ? number("sync_bytes") / sync_s / 1e9 : 0;
  }
  static const std::map<std::string, std::string> kHelp = {
      {"skyrl_job_step", "The job's last recorded step"},
      {"skyrl_job_mean_reward", "Mean reward of the last step's samples"},
      {"skyrl_job_kl", "KL to the reference policy, last step"},
      {"skyrl_job_tokens_per_second", "Response tokens per second, last step"},
      {"skyrl_job_staleness", "Trainer version minus the samples' version, last step (async)"},
      {"skyrl_job_step_seconds", "Seconds of the last step"},
      {"skyrl_job_phase_seconds", "Seconds of the last step by phase"},
      {"skyrl_job_weight_sync_bytes", "Bytes the trainer shards sent in the last weight sync"},
      {"skyrl_job_weight_sync_gigabytes_per_second", "Rate of the last weight sync, GB/s (10^9 bytes)"}};
  for (const auto& [name, help] : kHelp) out.push_back(Gauges(name, help, g[name]));
  out.push_back(Counters("skyrl_job_dropped_samples_total",
                         "Samples dropped as too stale, over the job's steps", dropped));
}

}  // namespace

std::vector<MetricFamily> HeadMetrics::Collect() const {
  std::vector<MetricFamily> out;

  auto nodes = AllStates(
      v1::NODE_ALIVE, v1::NODE_DEAD, [](int s) { return v1::NodeState_Name(static_cast<v1::NodeState>(s)); },
      "NODE_");
  std::map<Labels, double> resources;
  const std::vector<v1::NodeInfo> listed = head_.nodes().List();
  for (const v1::NodeInfo& n : listed)
    nodes[{{"state", StateName(v1::NodeState_Name(n.state()), "NODE_")}}] += 1;
  // Used = total - free, free as the scheduler books it (what `skyrl status` shows).
  head_.resources().With([&](const scheduler::Cluster& cluster) {
    for (const v1::NodeInfo& n : listed) {
      const scheduler::Pool* pool = n.state() == v1::NODE_ALIVE ? cluster.NodePool(n.node_id()) : nullptr;
      if (pool == nullptr) continue;
      const std::map<std::string, double> free = pool->free().ToMap();
      for (const auto& [kind, total] : n.resources_total()) {
        const auto f = free.find(kind);
        resources[{{"kind", "total"}, {"node", n.node_id()}, {"resource", kind}}] = total;
        resources[{{"kind", "used"}, {"node", n.node_id()}, {"resource", kind}}] =
            total - (f == free.end() ? 0.0 : f->second);
      }
    }
  });
  out.push_back(Gauges("skyrl_nodes", "Nodes the head knows, by state", nodes));
  out.push_back(Gauges(
      "skyrl_node_resources",
      "Resources of each alive node: total, and used by actors and bundles (memory in bytes)", resources));

  auto actors = AllStates(
      v1::ACTOR_PENDING, v1::ACTOR_DEAD,
      [](int s) { return v1::ActorState_Name(static_cast<v1::ActorState>(s)); }, "ACTOR_");
  std::map<Labels, double> by_class;
  for (const v1::ActorInfo& a : head_.actors().List()) {
    const std::string state = StateName(v1::ActorState_Name(a.state()), "ACTOR_");
    actors[{{"state", state}}] += 1;
    by_class[{{"class", a.spec().class_name()}, {"state", state}}] += 1;
  }
  out.push_back(Gauges("skyrl_actors", "Actors by state", actors));
  out.push_back(Gauges("skyrl_actors_by_class", "Actors by class and state", by_class));
  const ActorManager::LifeCounts life = head_.actors().Counts();
  out.push_back(Counters("skyrl_actor_restarts_total",
                         "Actor restarts since the head started (a death with restarts left)",
                         {{{}, static_cast<double>(life.restarts)}}));
  std::map<Labels, double> deaths;
  for (const auto& [cause, n] : life.deaths) deaths[{{"cause", cause}}] = static_cast<double>(n);
  out.push_back(Counters("skyrl_actor_deaths_total",
                         "Actors that became DEAD since the head started, by cause", deaths));

  auto groups = AllStates(
      v1::PG_PENDING, v1::PG_REMOVED,
      [](int s) { return v1::PlacementGroupState_Name(static_cast<v1::PlacementGroupState>(s)); }, "PG_");
  std::map<Labels, double> pending;
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  for (const v1::PlacementGroupInfo& g : head_.groups().List()) {
    groups[{{"state", StateName(v1::PlacementGroupState_Name(g.state()), "PG_")}}] += 1;
    if (g.state() == v1::PG_PENDING && g.created_unix_ms() > 0)
      pending[{{"group", g.placement_group_id()}}] = std::max<int64_t>(0, now_ms - g.created_unix_ms()) / 1e3;
  }
  out.push_back(Gauges("skyrl_placement_groups", "Placement groups by state", groups));
  out.push_back(Gauges("skyrl_placement_group_pending_seconds",
                       "Each PENDING placement group: seconds since it was created", pending));

  auto jobs = AllStates(
      v1::JOB_PENDING, v1::JOB_STOPPED, [](int s) { return v1::JobState_Name(static_cast<v1::JobState>(s)); },
      "JOB_");
  for (const v1::JobInfo& j : head_.jobs().List())
    jobs[{{"state", StateName(v1::JobState_Name(j.state()), "JOB_")}}] += 1;
  out.push_back(Gauges("skyrl_jobs", "Jobs by state", jobs));
  AddJobSteps(head_, out);

  for (MetricFamily& f : metrics::RpcServerFamilies(head_.rpc_stats())) out.push_back(std::move(f));
  if (const store::MeteredStore* metered = head_.metered_store()) {
    for (MetricFamily& f :
         metrics::LatencyFamilies(metered->stats(), "skyrl_store_operations_total",
                                  "Operations of the metadata store backend, by operation and status code",
                                  "skyrl_store_operation_seconds",
                                  "Latency of the metadata store backend's operations", "op", "code"))
      out.push_back(std::move(f));
    const store::WriteBehindStore* wb = head_.write_behind();
    out.push_back(Gauges("skyrl_store_write_behind_pending",
                         "Writes acknowledged and waiting for the store backend (Redis down)",
                         {{{}, wb ? static_cast<double>(wb->pending()) : 0.0}}));
  }
  out.push_back(
      Gauges("skyrl_store_write_lost",
             "1 once the metadata store lost a write: the head takes no more changes until restarted",
             {{{}, head_.store().lost().ok() ? 0.0 : 1.0}}));
  return out;
}

}  // namespace skyrl::head
