#include "runtime/worker/worker.h"

#include "runtime/metrics/families.h"
#include "runtime/metrics/metrics_server.h"
#include "runtime/worker/host_telemetry.h"
#include "runtime/worker/worker_metrics.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <atomic>
#include <filesystem>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "runtime/common/clock.h"
#include "runtime/common/lease.h"
#include "runtime/common/logging.h"
#include "runtime/common/process_identity.h"
#include "runtime/common/signals.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"
#include "runtime/rpc/server.h"
#include "runtime/rpc/status.h"
#include "runtime/worker/actor_logs.h"
#include "runtime/worker/exit_reporter.h"
#include "runtime/worker/head_link_grpc.h"
#include "runtime/worker/node_resources.h"
#include "runtime/worker/worker_service.h"
#include "skyrl/actor_directory.grpc.pb.h"
#include "skyrl/kv.grpc.pb.h"
#include "skyrl/node.grpc.pb.h"

namespace skyrl::worker {
namespace {

int Fail(const absl::Status& s) {
  fprintf(stderr, "skyrl-worker: %s\n", std::string(s.message()).c_str());
  return 2;
}

absl::Status Call(const std::string& token, const std::function<grpc::Status(grpc::ClientContext*)>& fn,
                  absl::Duration timeout = absl::Seconds(5)) {
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, token, timeout);
  return rpc::FromGrpc(fn(&ctx));
}

}  // namespace

absl::StatusOr<NodeDescription> DescribeNode(const WorkerOptions& o) {
  if (absl::Status s = rpc::ValidateAddress("--head", o.head); !s.ok()) return s;
  absl::StatusOr<NodeOffer> offer = BuildOffer(o.resources, o.gpu_ids);
  if (!offer.ok()) return offer.status();
  absl::StatusOr<std::map<std::string, std::string>> labels = ParseLabels(o.labels);
  if (!labels.ok()) return labels.status();
  return NodeDescription{std::move(*offer), std::move(*labels)};
}

int RunWorker(WorkerOptions o, const NodeDescription& node) {
  if (!o.gpu_ids.empty()) {
    spdlog::info("GPU ids declared by --gpu-ids: {}", o.gpu_ids);
  } else if (node.offer.gpu_ids.empty()) {
    // Asked again only for the reason (the CUDA error) to log; a node with GPUs is not.
    spdlog::info("{}; offering GPU=0", DetectGpus().note);
  }
  std::error_code ec;
  if (o.actor_host.empty())
    o.actor_host =
        (std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "skyrl-actor-host").string();
  if (o.log_dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    o.log_dir = absl::StrCat(tmp && *tmp ? tmp : "/tmp", "/skyrl-worker-", getpid());
  }
  std::filesystem::create_directories(o.log_dir, ec);
  if (ec)
    return Fail(
        absl::InvalidArgumentError(absl::StrCat("--log-dir: cannot create ", o.log_dir, ": ", ec.message())));

  // The actors' lease (head_link.h): renewed by the link each time the head answers. Its
  // name is this worker's alone: workers in other pid namespaces (containers) sharing the
  // folder may have the same pid, and one must never renew another's actors.
  std::random_device random;
  const uint64_t suffix = (uint64_t(random()) << 32) | random();
  absl::StatusOr<std::unique_ptr<LeaseWriter>> lease =
      LeaseWriter::Create(absl::StrCat(o.log_dir, "/actor-lease-", getpid(), "-", absl::Hex(suffix)));
  if (!lease.ok()) return Fail(lease.status());

  rpc::TokenAuth auth(o.token);
  // The link needs the service's bound port, so the service may be asked before it exists.
  std::atomic<HeadLink*> link{nullptr};
  auto node_id = [&] {
    HeadLink* l = link.load();
    return l == nullptr ? std::string() : l->node_id();
  };
  auto directory = v1::ActorDirectory::NewStub(rpc::MakeChannel(o.head));
  auto kv = v1::KvService::NewStub(rpc::MakeChannel(o.head));
  // The metrics read the service's processes, which exist only below: asked through a pointer.
  std::atomic<WorkerServiceImpl*> service{nullptr};
  const std::string bind_host = o.bind == "0.0.0.0" ? o.node_ip : o.bind;
  HostTelemetry host_telemetry(o.log_dir, bind_host, o.token);
  LatencyStats rpc_stats(LatencyStats::RpcBounds());  // outlives the servers below
  // The metrics server holds collectables weakly: these live as long as this function.
  auto rpc_metrics = std::make_shared<metrics::FunctionCollectable>(
      [&rpc_stats] { return metrics::RpcServerFamilies(rpc_stats); });
  auto metrics = std::make_shared<WorkerMetrics>(
      [&] {
        std::vector<std::pair<std::string, pid_t>> out;
        if (WorkerServiceImpl* s = service.load())
          for (const auto& [id, pid] : s->RunningPids()) out.emplace_back(id.ToString(), pid);
        return out;
      },
      static_cast<int>(node.offer.gpu_ids.size()), "/proc",
      WorkerMetrics::Hosts{
          .gpus_in_use =
              [&] {
                WorkerServiceImpl* s = service.load();
                return s == nullptr ? 0 : s->GpusInUse();
              },
          .telemetry = [&](const std::string& actor) -> absl::StatusOr<v1::ActorTelemetryReply> {
            absl::StatusOr<ActorId> id = ActorId::Parse(actor);
            if (!id.ok()) return id.status();
            // Short: a frozen host must not hold the scrape for long.
            return host_telemetry.Live(*id, /*with_records=*/false, absl::Milliseconds(500));
          }});
  ExitReporter exits(
      [&](const v1::ReportActorExitRequest& req) {
        v1::ReportActorExitReply reply;
        return Call(o.token,
                    [&](grpc::ClientContext* c) { return directory->ReportActorExit(c, req, &reply); });
      },
      node_id);
  WorkerServiceImpl worker_service(
      {.actor_host = o.actor_host,
       .log_dir = o.log_dir,
       .bind_host = bind_host,
       .token = o.token,
       .head_address = o.head,
       .python = o.python,
       .python_fork_server = o.python_fork_server,
       .actor_lease = lease->get(),
       .fetch_working_dir = [&](const std::string& key) -> absl::StatusOr<std::string> {
         v1::KvGetRequest req;
         req.set_key(key);
         v1::KvGetReply reply;
         absl::Status s = Call(
             o.token, [&](grpc::ClientContext* c) { return kv->Get(c, req, &reply); }, absl::Seconds(60));
         if (!s.ok()) return s;
         return std::move(*reply.mutable_value());
       },
       .on_exit =
           [&](const v1::ActorExitInfo& e) {
             metrics->RecordExit(e);
             exits.Add(e);
           },
       .head_contact = [&](const std::string& asker) -> absl::StatusOr<v1::HeadContactReply> {
         HeadLink* l = link.load();
         if (l == nullptr) return absl::UnavailableError("this worker is still starting");
         return l->Contact(asker);
       },
       .on_started = [&](absl::Duration d) { metrics->RecordStart(d); }},
      auth);

  v1::NodeInfo info;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  info.set_hostname(host);
  info.set_pid(getpid());
  // So another worker in the same process space can tell the head, for certain, that this
  // one is gone (HeadLink's process checks).
  info.set_process_space(ProcessSpace());
  if (absl::StatusOr<int64_t> start = ProcessStartTicks(getpid()); start.ok())
    info.set_pid_start_ticks(*start);
  // The head waits this long (and a threshold) for a silent node it cannot otherwise confirm
  // dead: by then the node has given up and exited (HeadLink::Round).
  info.set_head_retry_window_ms(absl::ToInt64Milliseconds(o.head_retry_window));
  for (const auto& [k, v] : node.offer.resources.ToMap()) (*info.mutable_resources_total())[k] = v;
  for (const auto& [k, v] : node.labels) (*info.mutable_labels())[k] = v;
  for (int g : node.offer.gpu_ids) info.add_gpu_ids(g);
  std::unique_ptr<HeadApi> head_api = MakeGrpcHeadApi(o.head, o.token);
  std::unique_ptr<HeadApi> probe_api = MakeGrpcHeadApi(o.head, o.token);
  std::unique_ptr<PeerApi> peer_api = MakeGrpcPeerApi(o.token);
  ServiceActors local_actors(worker_service, lease->get());
  std::optional<HeadLink> head_link;

  ActorLogServiceImpl log_service({.log_dir = o.log_dir,
                                   .running =
                                       [&](const ActorId& id) {
                                         std::vector<ActorId> running = worker_service.Running();
                                         return std::find(running.begin(), running.end(), id) !=
                                                running.end();
                                       },
                                   .telemetry = &host_telemetry},
                                  auth);

  service.store(&worker_service);
  absl::StatusOr<rpc::ListeningServer> server =
      rpc::StartServer(o.bind, o.port, {&worker_service, &log_service}, &rpc_stats);
  if (!server.ok()) return Fail(server.status());
  std::unique_ptr<metrics::MetricsServer> metrics_server;
  if (o.metrics_port >= 0) {
    absl::StatusOr<std::unique_ptr<metrics::MetricsServer>> m =
        metrics::MetricsServer::Start(o.bind, o.metrics_port);
    if (!m.ok()) return Fail(m.status());
    metrics_server = std::move(*m);
    metrics_server->Add(metrics);
    metrics_server->Add(rpc_metrics);
    spdlog::info("worker metrics on http://{}:{}/metrics", o.bind, metrics_server->port());
  }
  spdlog::info("worker service on {}:{}, actor logs in {}", o.bind, server->port, o.log_dir);
  info.set_address(absl::StrCat(o.node_ip, ":", server->port));
  if (metrics_server) info.set_metrics_port(metrics_server->port());
  // Monotonic: a step of the wall clock must not stretch the keep limit (or the leases).
  head_link.emplace(info, *head_api, *probe_api, *peer_api, local_actors, MonotonicClock::Get(),
                    HeadLinkOptions{o.head, o.head_retry_window, &ProcessGone});
  link.store(&*head_link);

  std::atomic<bool> stopping{false};
  exits.Start();
  std::thread heartbeat([&] {
    while (!stopping.load()) {
      HeadLink::Step step = head_link->Round();
      if (step.exit_code) _exit(*step.exit_code);
      absl::SleepFor(step.wait);
    }
  });

  int sig = WaitForTerminationSignal();
  spdlog::info("received signal {}, leaving the cluster", sig);
  stopping = true;
  heartbeat.join();
  // No more renewals from here: whatever outlives the steps below stops by the lease, within
  // 0.9 T. The actors stop before the head hears the node left (it restarts them elsewhere at
  // once), and their exits are not reported: the head restarts them once, on the node's
  // death, not on each exit while the node still looks ALIVE.
  exits.Stop();
  local_actors.Fence(absl::StrCat("its worker is stopping (signal ", sig, ")"));
  for (absl::Time until = absl::Now() + absl::Seconds(10);
       !worker_service.Running().empty() && absl::Now() < until;)
    absl::SleepFor(absl::Milliseconds(10));
  metrics_server.reset();
  server->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  // A start that got in meanwhile.
  local_actors.Fence(absl::StrCat("its worker is stopping (signal ", sig, ")"));
  if (std::string id = head_link->node_id(); !id.empty()) {
    v1::UnregisterNodeRequest req;
    req.set_node_id(id);
    req.set_reason(absl::StrCat("worker stopped by signal ", sig));
    v1::UnregisterNodeReply reply;
    auto stub = v1::NodeService::NewStub(rpc::MakeChannel(o.head));
    absl::Status s =
        Call(o.token, [&](grpc::ClientContext* c) { return stub->UnregisterNode(c, req, &reply); });
    if (!s.ok()) spdlog::warn("cannot unregister: {}", s.message());
  }
  return 0;
}

}  // namespace skyrl::worker
