// skyrl-head: the cluster's metadata daemon. Wiring only; the logic lives in NodeManager.
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "runtime/common/clock.h"
#include "runtime/common/logging.h"
#include "runtime/common/signals.h"
#include "runtime/head/node_manager.h"
#include "runtime/head/actor_directory_service.h"
#include "runtime/head/actor_manager.h"
#include "runtime/head/kv_service.h"
#include "runtime/head/job_manager.h"
#include "runtime/head/job_service.h"
#include "runtime/head/node_events.h"
#include "runtime/head/placement_group_manager.h"
#include "runtime/head/placement_group_service.h"
#include "runtime/head/retention.h"
#include "runtime/head/node_service.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"
#include "runtime/rpc/tls.h"
#include "runtime/store/store.h"
#include "runtime/store/write_behind_store.h"
#include "runtime/common/logging.h"

int main(int argc, char** argv) {
  skyrl::BlockTerminationSignals();
  // Debian's abseil is built without NDEBUG, so every Mutex lock would run the deadlock
  // detector's lock-graph bookkeeping (a few % of the head's CPU under load). The tests keep
  // it on, which is where a lock-order bug should show.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  CLI::App app{"skyrl-head: the SkyRL Runtime head daemon"};
  int port = 7420;
  std::string bind = "127.0.0.1", store_spec = "memory", ns = "default", log_level = "info";
  std::string token_file, jobs_dir;
  int heartbeat_ms = 1000, misses = 5;
  app.add_option("--port", port, "gRPC port")->check(CLI::Range(1, 65535));
  app.add_option("--bind", bind, "address to listen on (127.0.0.1 unless told otherwise)");
  app.add_option("--store", store_spec, "metadata store: memory | redis://[:password@]host:port[/db]");
  double store_retry_window_s = 5;
  app.add_option("--store-retry-window-s", store_retry_window_s,
                 "with Redis: how long a write waits for an unreachable Redis before the head goes on from "
                 "memory, queueing writes until Redis is back")
      ->check(CLI::Range(0.1, 3600.0));
  app.add_option("--namespace", ns, "cluster name: the store keeps each cluster's tables apart");
  app.add_option("--token-file", token_file, "cluster token file (else $SKYRL_TOKEN, else ~/.skyrl/token, created if missing)");
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|critical|off");
  app.add_option("--jobs-dir", jobs_dir, "job drivers' logs and working directories, and audit.log (default ~/.skyrl/jobs)");
  app.add_option("--heartbeat-period-ms", heartbeat_ms, "expected worker heartbeat period")
      ->check(CLI::Range(10, 600000));
  app.add_option("--heartbeat-misses", misses, "missed heartbeats before a node is dead")
      ->check(CLI::Range(1, 1000));
  int64_t keep_terminal = skyrl::head::kDefaultKeepTerminal;
  app.add_option("--keep-terminal", keep_terminal,
                 "DEAD actors and REMOVED placement groups kept per table (memory and store), the oldest "
                 "evicted first; 0 keeps none");
  std::string tls_cert, tls_key, tls_ca;
  app.add_option("--tls-cert", tls_cert, "serve TLS with this certificate chain (PEM); also $SKYRL_TLS_CERT");
  app.add_option("--tls-key", tls_key, "private key for --tls-cert (PEM); also $SKYRL_TLS_KEY");
  app.add_option("--tls-ca", tls_ca, "CA of the cluster's certificates (PEM): verify peers, require client certificates; also $SKYRL_TLS_CA");
  CLI11_PARSE(app, argc, argv);
  absl::StatusOr<skyrl::head::RetentionOptions> retention = skyrl::head::RetentionFromFlag(keep_terminal);
  if (!retention.ok()) {
    fprintf(stderr, "skyrl-head: %s\n", std::string(retention.status().message()).c_str());
    return 2;
  }
  if (absl::Status s = skyrl::rpc::ConfigureTls(tls_cert, tls_key, tls_ca); !s.ok()) {
    fprintf(stderr, "%s: %s\n", "skyrl-head", std::string(s.message()).c_str());
    return 2;
  }

  if (absl::Status s = skyrl::InitLogging("head", log_level); !s.ok()) {
    fprintf(stderr, "skyrl-head: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  absl::StatusOr<std::string> token = skyrl::rpc::LoadToken(token_file, /*create_if_missing=*/true);
  if (!token.ok()) {
    spdlog::critical("{}", token.status().message());
    return 2;
  }
  skyrl::rpc::TokenAuth auth(*token);
  absl::StatusOr<std::unique_ptr<skyrl::store::Store>> store =
      skyrl::store::OpenStore(store_spec, ns, absl::Seconds(store_retry_window_s));
  if (store.ok() && store_spec != "memory") {
    // Redis is a replica of what this head holds: it keeps serving (and queueing writes) when
    // Redis is down longer than the retry window, and catches up when Redis is back.
    skyrl::store::WriteBehindOptions wb;
    wb.tables = {skyrl::head::kNodesTable, skyrl::head::kActorsTable, skyrl::head::kPlacementGroupsTable,
                 skyrl::head::kJobsTable, skyrl::head::kKvTable};
    absl::StatusOr<std::unique_ptr<skyrl::store::WriteBehindStore>> wrapped =
        skyrl::store::WriteBehindStore::Open(std::move(*store), wb);
    if (wrapped.ok()) {
      store = std::unique_ptr<skyrl::store::Store>(std::move(*wrapped));
    } else {
      store = wrapped.status();
    }
  }
  if (!store.ok()) {
    spdlog::critical("cannot open the metadata store: {}", store.status().message());
    return 1;
  }
  skyrl::head::NodeManager nodes(**store, skyrl::RealClock::Get(),
                                 {absl::Milliseconds(heartbeat_ms), misses,
                                  /*stall_grace=*/absl::Milliseconds(heartbeat_ms) * misses / 2});
  if (absl::Status s = nodes.Recover(); !s.ok()) {
    spdlog::critical("cannot recover cluster state: {}", s.message());
    return 1;
  }
  std::unique_ptr<skyrl::head::WorkerClient> workers = skyrl::head::MakeGrpcWorkerClient(*token);
  skyrl::head::ResourceTracker resources;
  skyrl::head::ActorManager actors(**store, nodes, resources, *workers, skyrl::RealClock::Get(), *retention);
  skyrl::head::PlacementGroupManager groups(**store, resources, actors, skyrl::RealClock::Get(), *retention);
  // Recovery order: alive nodes, then the bundles reserved on them, then the actors in them.
  skyrl::head::AddAliveNodes(nodes, resources);
  if (absl::Status s = groups.Recover(); !s.ok()) {
    spdlog::critical("cannot recover the placement group table: {}", s.message());
    return 1;
  }
  if (absl::Status s = actors.Recover(); !s.ok()) {
    spdlog::critical("cannot recover the actor table: {}", s.message());
    return 1;
  }
  if (jobs_dir.empty()) {
    const char* home = std::getenv("HOME");
    jobs_dir = absl::StrCat(home && *home ? home : "/tmp", "/.skyrl/jobs");
  }
  std::error_code ec;
  std::filesystem::create_directories(jobs_dir, ec);
  if (ec) {
    spdlog::critical("--jobs-dir {}: {}", jobs_dir, ec.message());
    return 1;
  }
  skyrl::head::JobManagerOptions job_options;
  job_options.jobs_dir = jobs_dir;
  job_options.head_address = absl::StrCat(bind == "0.0.0.0" || bind == "::" ? "127.0.0.1" : bind, ":", port);
  job_options.token = *token;
  skyrl::head::JobManager jobs(**store, actors, groups, skyrl::RealClock::Get(), job_options);
  if (absl::Status s = jobs.Recover(); !s.ok()) {
    spdlog::critical("cannot recover the job table: {}", s.message());
    return 1;
  }
  skyrl::head::JobServiceImpl job_service(jobs, auth, job_options.limits);
  skyrl::head::SchedulingNodeListener node_listener(resources, actors, groups);
  nodes.SetListener(&node_listener);
  skyrl::head::ActorDirectoryImpl actor_directory(actors, auth);
  skyrl::head::PlacementGroupServiceImpl group_service(groups, auth);
  skyrl::head::NodeServiceImpl node_service(nodes, resources, auth);
  skyrl::head::KvServiceImpl kv_service(**store, auth);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int bound_port = 0;
  builder.AddListeningPort(absl::StrCat(bind, ":", port), skyrl::rpc::ServerCredentials(),
                           &bound_port);
  // gRPC turns SO_REUSEPORT on by default, which would let a second head silently share the
  // port with the first. One port, one head.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(skyrl::rpc::kMaxMessageBytes);
  builder.SetMaxSendMessageSize(skyrl::rpc::kMaxMessageBytes);
  builder.RegisterService(&node_service);
  builder.RegisterService(&kv_service);
  builder.RegisterService(&actor_directory);
  builder.RegisterService(&group_service);
  builder.RegisterService(&job_service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || bound_port == 0) {
    spdlog::critical("cannot listen on {}:{} (in use, or not an address of this host)", bind, port);
    return 1;
  }
  spdlog::info("skyrl-head listening on {}:{} ({}), store {}", bind, bound_port, skyrl::rpc::TlsDescription(), (*store)->Describe());

  std::atomic<bool> stopping{false};
  std::thread liveness([&] {
    while (!stopping.load()) {
      nodes.CheckLiveness();  // the listener handles the dead
      groups.RetryPending();  // resources freed by exits and kills
      absl::SleepFor(absl::Milliseconds(std::max(5, heartbeat_ms / 4)));
    }
  });

  int sig = skyrl::WaitForTerminationSignal();
  spdlog::info("received signal {}, shutting down", sig);
  stopping = true;
  groups.StopWaits();  // open WaitPlacementGroup calls answer now instead of holding Shutdown
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(3));
  liveness.join();
  spdlog::info("skyrl-head stopped");
  return 0;
}
