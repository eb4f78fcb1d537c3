#include "runtime/head/head.h"

#include "runtime/head/head_metrics.h"
#include "runtime/head/dashboard.h"

#include <grpcpp/grpcpp.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "runtime/views/telemetry_view.h"
#include "runtime/common/logging.h"
#include "runtime/common/signals.h"
#include "runtime/head/actor_directory_service.h"
#include "runtime/head/actor_log_service.h"
#include "runtime/head/job_service.h"
#include "runtime/head/kv_service.h"
#include "runtime/head/node_events.h"
#include "runtime/head/node_service.h"
#include "runtime/head/placement_group_service.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/server.h"
#include "runtime/rpc/tls.h"
#include "runtime/store/metered_store.h"
#include "runtime/store/write_behind_store.h"

namespace skyrl::head {

// The gRPC face of the managers.
class HeadServices {
 public:
  HeadServices(Head& head, const std::string& token, const archive::Limits& job_limits)
      : auth_(token),
        logs_(head.logs(), auth_),
        nodes_(head.nodes(), head.actors().stops(), head.resources(), auth_,
               [&head] { return head.metrics_port(); }),
        kv_(head.store(), auth_),
        actors_(head.actors(), auth_),
        groups_(head.groups(), auth_),
        jobs_(head.jobs(), auth_, job_limits) {}
  std::vector<grpc::Service*> All() { return {&nodes_, &kv_, &actors_, &groups_, &jobs_, &logs_}; }

 private:
  rpc::TokenAuth auth_;
  ActorLogServiceImpl logs_;
  NodeServiceImpl nodes_;
  KvServiceImpl kv_;
  ActorDirectoryImpl actors_;
  PlacementGroupServiceImpl groups_;
  JobServiceImpl jobs_;
};

namespace {

// The backend, metered (its operations are the head's store metrics). Redis is a replica of
// what this head holds: behind a write-behind cache the head keeps serving (and queueing
// writes) when Redis is down longer than the retry window, and catches up when Redis is back.
struct OpenedStore {
  std::unique_ptr<store::Store> store;
  const store::MeteredStore* metered = nullptr;
  const store::WriteBehindStore* write_behind = nullptr;  // null for "memory"
};

absl::StatusOr<OpenedStore> OpenStore(const HeadOptions& options) {
  absl::StatusOr<std::unique_ptr<store::Store>> backend =
      store::OpenStore(options.store, options.ns, options.store_retry_window);
  if (!backend.ok()) return backend.status();
  OpenedStore out;
  auto metered = std::make_unique<store::MeteredStore>(std::move(*backend), RealClock::Get());
  out.metered = metered.get();
  if (options.store == "memory") {
    out.store = std::move(metered);
    return out;
  }
  store::WriteBehindOptions wb;
  wb.tables = {kNodesTable, kActorsTable, kPlacementGroupsTable, kJobsTable, kKvTable};
  absl::StatusOr<std::unique_ptr<store::WriteBehindStore>> wrapped =
      store::WriteBehindStore::Open(std::move(metered), wb);
  if (!wrapped.ok()) return wrapped.status();
  out.write_behind = wrapped->get();
  out.store = std::move(*wrapped);
  return out;
}

absl::Status Annotate(const absl::Status& s, absl::string_view what) {
  return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
}

}  // namespace

Head::Head(const HeadOptions& options, store::Store& store, WorkerClient& workers, const Clock& clock,
           const Clock& steady)
    : options_(options),
      store_(store, [this](const absl::Status& lost) { OnStoreLost(lost); }),
      clock_(clock) {
  nodes_ = std::make_unique<NodeManager>(
      store_, clock_,
      NodeManagerOptions{.heartbeat_period = options.heartbeat_period,
                         .heartbeat_misses = options.heartbeat_misses,
                         .stall_grace = options.heartbeat_period * options.heartbeat_misses / 2,
                         .headless_keep = options.headless_keep,
                         .heartbeats_per_s = options.heartbeats_per_s},
      &steady, &resources_);
  demand_ = std::make_unique<DemandQueue>(steady, /*paused=*/true, &loop_);  // paused until Recover is done
  actors_ = std::make_unique<ActorManager>(store_, *nodes_, resources_, workers, *demand_, loop_, clock_,
                                           options.retention);
  groups_ = std::make_unique<PlacementGroupManager>(store_, resources_, *actors_, *demand_, clock_,
                                                    options.retention);
  actors_->SetGroupWaiting([groups = groups_.get()](const std::string& id) { return groups->IsWaiting(id); });
  JobManagerOptions jobs;
  jobs.jobs_dir = options.jobs_dir;
  jobs.head_address = absl::StrCat(
      options.bind == "0.0.0.0" || options.bind == "::" ? "127.0.0.1" : options.bind, ":", options.port);
  jobs.token = options.token;
  // The Python package beside this build's or install's binaries (bin/../python).
  std::error_code ec;
  std::filesystem::path python =
      std::filesystem::read_symlink("/proc/self/exe", ec).parent_path().parent_path() / "python";
  if (!ec && std::filesystem::is_directory(python / "skyrl_runtime", ec)) jobs.python_path = python.string();
  jobs_ = std::make_unique<JobManager>(store_, *actors_, *groups_, clock_, jobs);
  logs_ = std::make_unique<ActorLogRelay>(*actors_, *nodes_, options.token);
}

Head::~Head() {
  Shutdown();
  // Nothing waiting is tried while the managers are destroyed (an actor's attempt asks the
  // group manager, destroyed first).
  demand_->Stop();
  // The jobs' reaper cleans up through the actors and groups; then the answers of the
  // actors' starts and kills in flight run, while the group manager they may call is here.
  jobs_.reset();
  if (actors_) actors_->Stop();
}

absl::StatusOr<std::unique_ptr<Head>> Head::Open(const HeadOptions& options, store::Store& store,
                                                 WorkerClient& workers, const Clock& clock,
                                                 const Clock* steady) {
  if (options.token.empty()) return absl::InvalidArgumentError("head: the cluster token is empty");
  if (options.jobs_dir.empty()) return absl::InvalidArgumentError("--jobs-dir: empty");
  std::error_code ec;
  std::filesystem::create_directories(options.jobs_dir, ec);
  if (ec)
    return absl::InvalidArgumentError(absl::StrCat("--jobs-dir ", options.jobs_dir, ": ", ec.message()));
  std::unique_ptr<Head> head(new Head(options, store, workers, clock, steady != nullptr ? *steady : clock));
  if (absl::Status s = head->Recover(); !s.ok()) return s;
  return head;
}

absl::Status Head::Recover() {
  // Dependency order: alive nodes, then the bundles reserved on them, then the actors in
  // them; jobs last (they only refer to the others).
  if (absl::Status s = nodes_->Recover(); !s.ok()) return Annotate(s, "cannot recover cluster state");
  if (absl::Status s = groups_->Recover(); !s.ok())
    return Annotate(s, "cannot recover the placement group table");
  if (absl::Status s = actors_->Recover(); !s.ok()) return Annotate(s, "cannot recover the actor table");
  if (absl::Status s = jobs_->Recover(); !s.ok()) return Annotate(s, "cannot recover the job table");
  listener_ = std::make_unique<SchedulingNodeListener>(*actors_, *groups_);
  nodes_->SetListener(listener_.get());
  demand_->Resume();  // every table holds its resources again: what waits may be placed
  return absl::OkStatus();
}

void Head::OnStoreLost(const absl::Status& lost) {
  spdlog::critical(
      "the metadata store lost a write ({}): this head takes no more changes and reports NOT_SERVING; "
      "restart it to recover from the store",
      lost.message());
  absl::MutexLock lock(&health_mu_);
  if (server_) server_->GetHealthCheckService()->SetServingStatus(false);
}

absl::Status Head::Start() {
  if (server_) return absl::FailedPreconditionError("head: already started");
  // Metrics first: ListNodes tells the head's metrics port, so it is known before any RPC.
  if (options_.metrics_port >= 0) {
    absl::StatusOr<std::unique_ptr<metrics::MetricsServer>> m =
        metrics::MetricsServer::Start(options_.bind, options_.metrics_port);
    if (!m.ok()) return m.status();
    metrics_server_ = std::move(*m);
    metrics_port_.store(metrics_server_->port());
    metrics_ = std::make_shared<HeadMetrics>(*this);
    metrics_server_->Add(metrics_);
    metrics_server_->AddPage("/metrics/targets",
                             [this](const http::Request& r) { return MetricsTargets(r); });
  }
  services_ = std::make_unique<HeadServices>(*this, options_.token, JobManagerOptions{}.limits);
  absl::StatusOr<rpc::ListeningServer> listening =
      rpc::StartServer(options_.bind, options_.port, services_->All(), &rpc_stats_);
  if (!listening.ok()) {
    metrics_server_.reset();
    metrics_port_.store(-1);
    return listening.status();
  }
  {
    absl::MutexLock lock(&health_mu_);
    server_ = std::move(listening->server);
    if (!store_.lost().ok()) server_->GetHealthCheckService()->SetServingStatus(false);
  }
  port_ = listening->port;
  if (options_.dashboard_port >= 0) {
    dashboard_ = std::make_unique<Dashboard>(*this, options_.token, clock_);
    absl::StatusOr<std::unique_ptr<http::HttpServer>> d =
        http::HttpServer::Start(options_.bind, options_.dashboard_port,
                                [this](const http::Request& r) { return dashboard_->Handle(r); });
    if (!d.ok()) {
      metrics_server_.reset();
      metrics_port_.store(-1);
      server_->Shutdown();
      absl::MutexLock lock(&health_mu_);
      server_.reset();
      return absl::UnavailableError(absl::StrCat("dashboard: ", d.status().message()));
    }
    dashboard_server_ = std::move(*d);
  }
  liveness_ = std::thread([this] {
    const absl::Duration tick = std::max(absl::Milliseconds(5), options_.heartbeat_period / 4);
    while (!stopping_.load()) {
      nodes_->CheckLiveness();  // the listener handles the dead (waiting work: DemandQueue)
      absl::SleepFor(tick);
    }
  });
  return absl::OkStatus();
}

http::Response Head::MetricsTargets(const http::Request& req) const {
  // The head as the scraper reached it (the Host header), else as it is bound.
  std::string host = views::HostOf(req.Header("host"));
  if (host.empty()) host = options_.bind;
  if (host == "0.0.0.0" || host == "::" || host == "[::]") {
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    host = name;
  }
  v1::ListNodesReply nodes;
  for (v1::NodeInfo& n : nodes_->List()) *nodes.add_nodes() = std::move(n);
  nodes.set_head_metrics_port(std::max(0, metrics_port()));
  return http::Response::Json(200, views::RenderTargetsJson(views::MetricsTargets(host, nodes)));
}

// From an atomic, not metrics_server_: ListNodes reads it on gRPC threads while Shutdown resets
// the server before gRPC stops. -1 again from the start of Shutdown.
int Head::metrics_port() const { return metrics_port_.load(); }
int Head::dashboard_port() const { return dashboard_server_ ? dashboard_server_->port() : -1; }

void Head::Shutdown() {
  if (stopping_.exchange(true)) return;
  metrics_port_.store(-1);
  metrics_server_.reset();  // no scrape or page reads the tables once shutdown starts
  if (dashboard_server_) dashboard_server_->Stop();
  groups_->StopWaits();  // open WaitPlacementGroup calls answer now instead of holding Shutdown
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(3));
  if (liveness_.joinable()) liveness_.join();
  std::unique_ptr<grpc::Server> server;
  {
    absl::MutexLock lock(&health_mu_);
    server = std::move(server_);  // a loss reported from now on has no health check to turn
  }
}

absl::StatusOr<std::unique_ptr<Head>> OpenHead(const HeadOptions& options) {
  absl::StatusOr<OpenedStore> store = OpenStore(options);
  if (!store.ok()) return Annotate(store.status(), "cannot open the metadata store");
  std::unique_ptr<WorkerClient> workers = MakeGrpcWorkerClient(options.token);
  absl::StatusOr<std::unique_ptr<Head>> head =
      Head::Open(options, *store->store, *workers, RealClock::Get(), &MonotonicClock::Get());
  if (!head.ok()) return head.status();
  (*head)->owned_store_ = std::move(store->store);
  (*head)->metered_store_ = store->metered;
  (*head)->write_behind_ = store->write_behind;
  (*head)->owned_workers_ = std::move(workers);
  return head;
}

int RunHead(const HeadOptions& options) {
  absl::StatusOr<std::unique_ptr<Head>> head = OpenHead(options);
  if (!head.ok()) {
    spdlog::critical("{}", head.status().message());
    return 1;
  }
  if (absl::Status s = (*head)->Start(); !s.ok()) {
    spdlog::critical("{}", s.message());
    return 1;
  }
  spdlog::info("skyrl-head listening on {}:{} ({}), store {}", options.bind, (*head)->port(),
               rpc::TlsDescription(), (*head)->store().Describe());
  if ((*head)->metrics_port() >= 0)
    spdlog::info("skyrl-head metrics on http://{}:{}/metrics", options.bind, (*head)->metrics_port());
  if ((*head)->dashboard_port() >= 0)
    spdlog::info("skyrl-head dashboard on http://{}:{}/", options.bind, (*head)->dashboard_port());
  int sig = WaitForTerminationSignal();
  spdlog::info("received signal {}, shutting down", sig);
  (*head)->Shutdown();
  head->reset();
  spdlog::info("skyrl-head stopped");
  return 0;
}

}  // namespace skyrl::head
