// The head daemon as one object: it owns the metadata store, the managers (nodes, resources,
// actors, placement groups, jobs), their recovery from the store, the gRPC services and the
// liveness loop. skyrl-head's main parses flags into HeadOptions and calls RunHead; tests
// open a Head over their own store, workers and clock.
//
//   Open (store, recovery) -> Start (listening, liveness loop) -> Shutdown
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/common/clock.h"
#include "runtime/head/actor_log_service.h"
#include "runtime/head/actor_manager.h"
#include "runtime/head/event_loop.h"
#include "runtime/head/job_manager.h"
#include "runtime/head/node_manager.h"
#include "runtime/head/placement_group_manager.h"
#include "runtime/head/resource_tracker.h"
#include "runtime/http/http_server.h"
#include "runtime/head/retention.h"
#include "runtime/head/worker_client.h"
#include "runtime/metrics/metrics_server.h"
#include "runtime/common/latency_stats.h"
#include "runtime/store/metered_store.h"
#include "runtime/store/sticky_store.h"
#include "runtime/store/store.h"
#include "runtime/store/write_behind_store.h"

namespace grpc {
class Server;
}

namespace skyrl::head {

struct HeadOptions {
  std::string bind = "127.0.0.1";
  int port = 7420;  // also the port job drivers are told (SKYRL_ADDRESS)
  // "memory", or "redis://[:password@]host:port[/db]": Redis then sits behind a write-behind
  // cache, so the head keeps serving while Redis is away longer than the retry window.
  std::string store = "memory";
  std::string ns = "default";  // the store keeps each cluster's tables apart
  absl::Duration store_retry_window = absl::Seconds(5);
  std::string token;     // the cluster token every call must carry
  std::string jobs_dir;  // job drivers' logs and working directories; created if missing
  absl::Duration heartbeat_period = absl::Seconds(1);
  int heartbeat_misses = 5;
  int heartbeats_per_s = 2500;  // NodeManagerOptions::heartbeats_per_s
  // How long a worker cut off from the head may keep its actors on its peers' word, after
  // its last answer (NodeManagerOptions::headless_keep): a silent node's actors restart at
  // the latest this plus period x misses after it was last heard. Zero: no limit.
  absl::Duration headless_keep = absl::Seconds(30);
  RetentionOptions retention;
  // Prometheus /metrics on bind:metrics_port (head_metrics.h); -1: off, 0: a free port.
  int metrics_port = -1;
  // The dashboard (dashboard.h) on bind:dashboard_port; -1: off, 0: a free port.
  int dashboard_port = -1;
};

class Head;
class HeadServices;
class HeadMetrics;
class Dashboard;

// Opens a head: the store, then recovery in dependency order (nodes, the alive nodes into
// the resource tracker, placement groups and their bundles, actors in them, jobs). Errors
// say which step failed.
absl::StatusOr<std::unique_ptr<Head>> OpenHead(const HeadOptions& options);

// skyrl-head's body: opens the head, serves until SIGTERM or SIGINT, shuts down. Returns the
// process exit code (1 when the head cannot open or listen).
int RunHead(const HeadOptions& options);

class Head {
 public:
  // The same over parts the caller owns, which must outlive the head (tests; OpenHead
  // passes the ones it owns). The store is used as given (no write-behind wrapper).
  // `steady` (default: `clock`) times the lease horizon (NodeManager), which a step of the
  // wall clock must not shorten.
  static absl::StatusOr<std::unique_ptr<Head>> Open(const HeadOptions& options, store::Store& store,
                                                    WorkerClient& workers, const Clock& clock,
                                                    const Clock* steady = nullptr);
  ~Head();  // Shutdown()

  // Serves the head's services on bind:port and starts the liveness loop (silent nodes
  // declared dead, pending placement groups retried). Returns once listening.
  absl::Status Start();
  // Answers open waits, stops serving (3 s grace) and the liveness loop. Idempotent.
  void Shutdown();
  int port() const { return port_; }  // the bound port, after Start
  int metrics_port() const;           // the metrics port after Start, or -1 when off
  // /metrics/targets: every /metrics of the cluster, as Prometheus HTTP service discovery.
  http::Response MetricsTargets(const http::Request& req) const;
  int dashboard_port() const;  // the dashboard's port after Start, or -1 when off

  // The store as the managers write it: after a lost write it refuses every other
  // (store::StickyStore), the gRPC health service says NOT_SERVING, and
  // skyrl_store_write_lost is 1.
  store::StickyStore& store() { return store_; }
  // Where the actor table lives.
  EventLoop& loop() { return loop_; }
  NodeManager& nodes() { return *nodes_; }
  ResourceTracker& resources() { return resources_; }
  DemandQueue& demand() { return *demand_; }
  ActorManager& actors() { return *actors_; }
  PlacementGroupManager& groups() { return *groups_; }
  JobManager& jobs() { return *jobs_; }
  const ActorLogRelay& logs() const { return *logs_; }
  // The RPCs this head answered, by method and code.
  const LatencyStats& rpc_stats() const { return rpc_stats_; }
  // The store backend's operations, and the write-behind cache over it: set by OpenHead
  // (null for a head opened over a caller's store, and write_behind for "memory").
  const store::MeteredStore* metered_store() const { return metered_store_; }
  const store::WriteBehindStore* write_behind() const { return write_behind_; }

 private:
  friend absl::StatusOr<std::unique_ptr<Head>> OpenHead(const HeadOptions& options);
  Head(const HeadOptions& options, store::Store& store, WorkerClient& workers, const Clock& clock,
       const Clock& steady);
  absl::Status Recover();
  // The store lost a write (store_'s callback): says so, and stops serving health.
  void OnStoreLost(const absl::Status& lost);

  const HeadOptions options_;
  // Set by OpenHead: what the head owns (declared first, so destroyed last).
  std::unique_ptr<store::Store> owned_store_;
  std::unique_ptr<WorkerClient> owned_workers_;
  const store::MeteredStore* metered_store_ = nullptr;
  const store::WriteBehindStore* write_behind_ = nullptr;
  LatencyStats rpc_stats_{LatencyStats::RpcBounds()};
  store::StickyStore store_;
  const Clock& clock_;
  // Held while server_ is set or reset (the store may report a lost write from an RPC
  // meanwhile), never around a call into the server that waits for RPCs. Declared before
  // the managers: a write they make while they are destroyed may still report a loss.
  absl::Mutex health_mu_;
  // Where the actor table lives: before the managers, so it outlives them.
  EventLoop loop_;
  ResourceTracker resources_;  // before the node table, which keeps its view of the nodes
  std::unique_ptr<NodeManager> nodes_;
  std::unique_ptr<DemandQueue> demand_;  // before the managers whose entries it holds
  std::unique_ptr<ActorManager> actors_;
  std::unique_ptr<PlacementGroupManager> groups_;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<ActorLogRelay> logs_;
  std::unique_ptr<NodeListener> listener_;
  std::unique_ptr<HeadServices> services_;
  std::unique_ptr<grpc::Server> server_;  // set under health_mu_; gone after Shutdown
  std::shared_ptr<HeadMetrics> metrics_;
  std::unique_ptr<metrics::MetricsServer> metrics_server_;
  std::atomic<int> metrics_port_{-1};  // set in Start, -1 again at Shutdown; read by RPCs
  std::unique_ptr<Dashboard> dashboard_;
  std::unique_ptr<http::HttpServer> dashboard_server_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread liveness_;
};

}  // namespace skyrl::head
