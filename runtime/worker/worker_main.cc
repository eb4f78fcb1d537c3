// skyrl-worker: one per node. Registers the node's resources with the head and heartbeats.
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/common/ids.h"
#include "runtime/common/logging.h"
#include "runtime/common/signals.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"
#include "runtime/rpc/tls.h"
#include "runtime/rpc/status.h"
#include "runtime/worker/node_resources.h"
#include "runtime/worker/head_link_grpc.h"
#include "runtime/worker/worker_service.h"
#include <optional>
#include "runtime/common/clock.h"
#include <filesystem>
#include "skyrl/actor_directory.grpc.pb.h"
#include "skyrl/node.grpc.pb.h"
#include <deque>
#include "absl/synchronization/mutex.h"
#include "runtime/common/logging.h"

namespace {

std::string g_token;

absl::Status Call(const std::function<grpc::Status(grpc::ClientContext*)>& fn) {
  grpc::ClientContext ctx;
  skyrl::rpc::PrepareCall(&ctx, g_token, absl::Seconds(5));
  return skyrl::rpc::FromGrpc(fn(&ctx));
}

}  // namespace

int main(int argc, char** argv) {
  skyrl::BlockTerminationSignals();
  CLI::App app{"skyrl-worker: runs actors on this node for a SkyRL Runtime cluster"};
  std::string token_file, bind = "127.0.0.1", log_dir, actor_host;
  int port = 0;
  double head_retry_window_s = 300;
  std::string head, resources_text, labels_text, gpu_ids_text, node_ip = "127.0.0.1", log_level = "info";
  app.add_option("--head", head, "head address HOST:PORT")->required();
  app.add_option("--resources", resources_text, "override detected resources, e.g. CPU=8,GPU=4,custom=2");
  app.add_option("--labels", labels_text, "node labels, e.g. accelerator=H100,pool=train");
  app.add_option("--gpu-ids", gpu_ids_text,
                 "declare device ids instead of detecting them, e.g. 0,1,2,3 (containers whose devices "
                 "CUDA cannot list; CPU-only clusters that simulate GPU placement)");
  app.add_option("--node-ip", node_ip, "address other nodes reach this one at");
  app.add_option("--head-retry-window-s", head_retry_window_s,
                 "exit (stopping this node's actors) after the head is unreachable this long; 0: never")
      ->check(CLI::Range(0.0, 86400.0));
  app.add_option("--port", port, "port of this worker's service (0: any free port)")->check(CLI::Range(0, 65535));
  app.add_option("--bind", bind, "address this worker and its actors listen on");
  app.add_option("--log-dir", log_dir, "actor logs (default $TMPDIR/skyrl-worker-<pid>)");
  app.add_option("--actor-host", actor_host, "actor host binary (default: skyrl-actor-host beside this one)");
  app.add_option("--token-file", token_file, "cluster token file (else $SKYRL_TOKEN, else ~/.skyrl/token)");
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|critical|off");
  std::string tls_cert, tls_key, tls_ca;
  app.add_option("--tls-cert", tls_cert, "serve TLS with this certificate chain (PEM); also $SKYRL_TLS_CERT");
  app.add_option("--tls-key", tls_key, "private key for --tls-cert (PEM); also $SKYRL_TLS_KEY");
  app.add_option("--tls-ca", tls_ca, "CA of the cluster's certificates (PEM): verify peers, require client certificates; also $SKYRL_TLS_CA");
  CLI11_PARSE(app, argc, argv);
  if (absl::Status s = skyrl::rpc::ConfigureTls(tls_cert, tls_key, tls_ca); !s.ok()) {
    fprintf(stderr, "%s: %s\n", "skyrl-worker", std::string(s.message()).c_str());
    return 2;
  }
  auto fail = [](const absl::Status& s) {
    fprintf(stderr, "skyrl-worker: %s\n", std::string(s.message()).c_str());
    return 2;
  };
  if (absl::Status s = skyrl::InitLogging("worker", log_level); !s.ok()) return fail(s);
  if (absl::Status s = skyrl::rpc::ValidateAddress("--head", head); !s.ok()) return fail(s);
  absl::StatusOr<skyrl::worker::NodeOffer> offer = skyrl::worker::BuildOffer(resources_text, gpu_ids_text);
  if (!offer.ok()) return fail(offer.status());
  absl::StatusOr<std::map<std::string, std::string>> labels = skyrl::worker::ParseLabels(labels_text);
  if (!labels.ok()) return fail(labels.status());
  // A worker started beside a head that is still starting waits briefly for the head to
  // write ~/.skyrl/token, as it waits for the head itself.
  absl::StatusOr<std::string> token = skyrl::rpc::LoadToken(token_file, false);
  for (absl::Time deadline = absl::Now() + absl::Seconds(10);
       absl::IsNotFound(token.status()) && token_file.empty() && absl::Now() < deadline;) {
    absl::SleepFor(absl::Milliseconds(50));
    token = skyrl::rpc::LoadToken(token_file, false);
  }
  if (!token.ok()) return fail(token.status());
  g_token = *token;
  if (!gpu_ids_text.empty()) {
    spdlog::info("GPU ids declared by --gpu-ids: {}", gpu_ids_text);
  } else if (skyrl::worker::GpuDetection gpus = skyrl::worker::DetectGpus(); gpus.ids.empty()) {
    spdlog::info("{}; offering GPU=0", gpus.note);
  }

  std::error_code ec;
  if (actor_host.empty())
    actor_host = (std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "skyrl-actor-host").string();
  if (log_dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    log_dir = absl::StrCat(tmp && *tmp ? tmp : "/tmp", "/skyrl-worker-", getpid());
  }
  std::filesystem::create_directories(log_dir, ec);
  if (ec) return fail(absl::InvalidArgumentError(absl::StrCat("--log-dir: cannot create ", log_dir, ": ", ec.message())));
  skyrl::rpc::TokenAuth auth(g_token);
  // Exits go to the head from their own thread, retried while the head is unreachable.
  absl::Mutex exits_mu;
  std::deque<skyrl::v1::ActorExitInfo> exits_to_report;
  // The link needs the service's bound port, so the service may be asked before it exists.
  std::atomic<skyrl::worker::HeadLink*> link{nullptr};
  skyrl::worker::WorkerServiceImpl worker_service(
      {.actor_host = actor_host, .log_dir = log_dir,
       .bind_host = bind == "0.0.0.0" ? node_ip : bind, .token = g_token, .head_address = head,
       .on_exit = [&](const skyrl::v1::ActorExitInfo& e) {
         absl::MutexLock lock(&exits_mu);
         exits_to_report.push_back(e);
       },
       .head_contact =
           [&]() -> absl::StatusOr<skyrl::v1::HeadContactReply> {
             skyrl::worker::HeadLink* l = link.load();
             if (l == nullptr) return absl::UnavailableError("this worker is still starting");
             return l->Contact();
           }},
      auth);
  // The standard health service (no token), for Kubernetes grpc probes and load balancers.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int bound = 0;
  builder.AddListeningPort(absl::StrCat(bind, ":", port), skyrl::rpc::ServerCredentials(), &bound);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(skyrl::rpc::kMaxMessageBytes);
  builder.RegisterService(&worker_service);

  skyrl::v1::NodeInfo info;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  info.set_hostname(host);
  info.set_pid(getpid());
  for (const auto& [k, v] : offer->resources.ToMap()) (*info.mutable_resources_total())[k] = v;
  for (const auto& [k, v] : *labels) (*info.mutable_labels())[k] = v;
  for (int g : offer->gpu_ids) info.add_gpu_ids(g);
  std::unique_ptr<skyrl::worker::HeadApi> head_api = skyrl::worker::MakeGrpcHeadApi(head, g_token);
  std::unique_ptr<skyrl::worker::HeadApi> probe_api = skyrl::worker::MakeGrpcHeadApi(head, g_token);
  std::unique_ptr<skyrl::worker::PeerApi> peer_api = skyrl::worker::MakeGrpcPeerApi(g_token);
  skyrl::worker::ServiceActors local_actors(worker_service);
  std::optional<skyrl::worker::HeadLink> head_link;

  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || bound == 0)
    return fail(absl::UnavailableError(absl::StrCat("cannot listen on ", bind, ":", port)));
  spdlog::info("worker service on {}:{}, actor logs in {}", bind, bound, log_dir);
  info.set_address(absl::StrCat(node_ip, ":", bound));
  head_link.emplace(info, *head_api, *probe_api, *peer_api, local_actors, skyrl::RealClock::Get(),
                    skyrl::worker::HeadLinkOptions{head, absl::Seconds(head_retry_window_s)});
  link.store(&*head_link);

  std::atomic<bool> stopping{false};
  auto directory = skyrl::v1::ActorDirectory::NewStub(skyrl::rpc::MakeChannel(head));
  std::thread reporter([&] {
    while (!stopping.load()) {
      std::optional<skyrl::v1::ActorExitInfo> next;
      {
        absl::MutexLock lock(&exits_mu);
        if (!exits_to_report.empty()) next = exits_to_report.front();
      }
      std::string id = link.load()->node_id();
      if (!next || id.empty()) {
        absl::SleepFor(absl::Milliseconds(10));
        continue;
      }
      skyrl::v1::ReportActorExitRequest req;
      req.set_node_id(id);
      *req.mutable_exit() = *next;
      skyrl::v1::ReportActorExitReply reply;
      absl::Status s = Call([&](grpc::ClientContext* c) { return directory->ReportActorExit(c, req, &reply); });
      if (s.ok() || absl::IsInvalidArgument(s)) {
        absl::MutexLock lock(&exits_mu);
        exits_to_report.pop_front();
      } else {
        spdlog::warn("cannot report the exit of {} to the head: {}", next->actor_id(), s.message());
        absl::SleepFor(absl::Milliseconds(200));
      }
    }
  });
  std::thread heartbeat([&] {
    while (!stopping.load()) {
      skyrl::worker::HeadLink::Step step = link.load()->Round();
      if (step.exit_code) _exit(*step.exit_code);
      absl::SleepFor(step.wait);
    }
  });

  int sig = skyrl::WaitForTerminationSignal();
  spdlog::info("received signal {}, leaving the cluster", sig);
  stopping = true;
  heartbeat.join();
  reporter.join();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (std::string node_id = link.load()->node_id(); !node_id.empty()) {
    skyrl::v1::UnregisterNodeRequest req;
    req.set_node_id(node_id);
    req.set_reason(absl::StrCat("worker stopped by signal ", sig));
    skyrl::v1::UnregisterNodeReply reply;
    auto stub = skyrl::v1::NodeService::NewStub(skyrl::rpc::MakeChannel(head));
    absl::Status s = Call([&](grpc::ClientContext* c) { return stub->UnregisterNode(c, req, &reply); });
    if (!s.ok()) spdlog::warn("cannot unregister: {}", s.message());
  }
  return 0;
}
