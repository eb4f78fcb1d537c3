// What the CLI and the head render from the cluster's telemetry: the Prometheus scrape targets
// (`skyrl metrics targets`, and the head's /metrics/targets for Prometheus HTTP service
// discovery), and a job's timeline as a Chrome trace (`skyrl timeline`, the dashboard).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

#include "skyrl/actor.pb.h"
#include "skyrl/actor_directory.pb.h"
#include "skyrl/logs.pb.h"
#include "skyrl/node.pb.h"

namespace skyrl::views {

// "host" of "host:port" or "[v6]:port" (the brackets kept); `address` itself when it has no port.
std::string HostOf(const std::string& address);

struct MetricsTarget {
  std::string role;     // "head" or "worker"
  std::string address;  // host:port of its /metrics
  std::string node_id;  // workers
  std::string hostname;
};

// The head (at `head_host`, when it serves metrics) and every ALIVE worker that serves them.
std::vector<MetricsTarget> MetricsTargets(const std::string& head_host, const v1::ListNodesReply& nodes);
// Prometheus HTTP SD: [{"targets": ["host:port"], "labels": {"skyrl_role": ..., ...}}, ...].
std::string RenderTargetsJson(const std::vector<MetricsTarget>& targets);
std::string RenderTargetsTable(const std::vector<MetricsTarget>& targets);

// One actor's calls, as its worker gave them (or why it could not).
struct ActorCalls {
  v1::ActorInfo actor;
  v1::ActorTelemetryReply telemetry;
  std::string error;  // non-empty: no records (the track is named, and says why)
};

// Fills each of `actors`' telemetry, or its error, with `ask` (an ActorCalls RPC, or the head's
// relay in process), asking up to 16 actors at once: one on a frozen node costs its own
// timeout, not everyone's in turn.
using AskCalls = std::function<absl::StatusOr<v1::ActorCallsReply>(const v1::ActorCallsRequest&)>;
void CollectActorCalls(std::vector<ActorCalls>& actors, const AskCalls& ask);

// A job's timeline in the Chrome trace event format (Perfetto, chrome://tracing): a "job"
// process with one track of steps and their phases, from the step records the job wrote
// (`steps`: job_metrics_keys.h values, JSON, in step order; a job's own bytes, so those that
// are not JSON objects or have no timestamps are skipped); then one process per node and one track per actor,
// one slice per call from its start to its answer (a call that never ran: from arrival, named "<method> (not
// run)"). Times are microseconds since the job's first event.
std::string RenderTimeline(const std::string& job_id, const std::vector<std::string>& steps,
                           const std::vector<ActorCalls>& actors);

}  // namespace skyrl::views
