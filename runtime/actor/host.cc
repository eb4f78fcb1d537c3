#include "runtime/actor/host.h"

#include <grpcpp/grpcpp.h>

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <mutex>
#include <optional>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/actor/actor.h"
#include "runtime/actor/actor_service.h"
#include "runtime/common/ids.h"
#include "runtime/common/lease.h"
#include "runtime/common/logging.h"
#include "runtime/common/signals.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"
#include "runtime/rpc/tls.h"
#include "runtime/rpc/status.h"
#include "skyrl/actor.grpc.pb.h"

namespace skyrl {
namespace {

// The constructor's bytes from `path` (--init-args-file), which is then removed: the worker
// writes one per start.
absl::StatusOr<std::string> ReadInitArgs(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("--init-args-file: cannot open ", path));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return absl::DataLossError(absl::StrCat("--init-args-file: cannot read ", path));
  std::remove(path.c_str());
  return bytes;
}

// The call records, for the worker to serve once this process is gone: written aside, then
// renamed, so a reader never sees half a file.
absl::Status WriteCallRecords(const std::string& path, const v1::ActorTelemetryReply& records) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out || !records.SerializeToOstream(&out) || !out.flush())
      return absl::InternalError(absl::StrCat("--call-records-file: cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return absl::InternalError(absl::StrCat("--call-records-file: cannot rename ", tmp, " to ", path));
  return absl::OkStatus();
}

// Watches, a few times a second, for what must end this process at once: its worker gone
// (re-parented), or the worker's lease run out (runtime/common/lease.h). Returns at once.
void Watch(pid_t parent, std::optional<LeaseReader> lease) {
  std::thread([parent, lease = std::move(lease)] {
    while (true) {
      if (parent != 0 && getppid() != parent) kill(getpid(), SIGKILL);
      if (lease)
        if (std::optional<absl::Duration> late = lease->Overdue(MonotonicNowNs())) {
          // Straight to the log: no lock, no allocation that could wait on a stopped thread.
          std::fprintf(stderr,
                       "skyrl-actor-host: fenced: this node's worker has not renewed its lease (it could not "
                       "reach the head, or is frozen or stalled; %.0f ms past it); the head restarts this "
                       "actor elsewhere, so this process stops serving now\n",
                       absl::ToDoubleMilliseconds(*late));
          std::fflush(stderr);
          _exit(kLeaseRanOutExitCode);
        }
      std::this_thread::sleep_for(std::chrono::milliseconds(lease ? 25 : 200));
    }
  }).detach();
}

}  // namespace

void PrepareActorHost() {
  static std::once_flag once;
  std::call_once(once, [] {
    BlockTerminationSignals();  // before gRPC's threads start, as RunActorHost does
    grpc_init();                // held for the process's life
  });
}

int RunActorHost(int argc, char** argv) {
  pid_t parent = 0;
  if (const char* worker = std::getenv("SKYRL_WORKER_PID")) {
    // Die with the worker that launched us; if it is already gone, do not start at all.
    // Not PR_SET_PDEATHSIG: it fires when the parent *thread* that forked us exits, and the
    // worker forks from gRPC handler threads, which come and go (actors were SIGKILLed at
    // random under load). Watch for re-parenting instead.
    if (std::to_string(getppid()) != worker) return 1;
    parent = getppid();
  }
  std::optional<LeaseReader> lease;
  if (const char* path = std::getenv("SKYRL_ACTOR_LEASE"); path != nullptr && *path != '\0') {
    absl::StatusOr<LeaseReader> opened = LeaseReader::Open(path);
    if (!opened.ok()) {
      std::fprintf(stderr, "skyrl-actor-host: SKYRL_ACTOR_LEASE: %s\n",
                   std::string(opened.status().message()).c_str());
      return 1;
    }
    lease.emplace(std::move(*opened));
  }
  // Blocked first, so the watchdog thread (like every other) leaves SIGTERM to the main one.
  BlockTerminationSignals();
  if (parent != 0 || lease) Watch(parent, std::move(lease));
  // gRPC's start-up (its threads, pollers, resolvers: about 10 ms) runs beside the actor's
  // constructor rather than after it; the server below finds it done. Joined on every way out.
  std::thread grpc_warm([] { grpc_init(); });
  absl::Cleanup join_warm = [&grpc_warm] {
    if (grpc_warm.joinable()) grpc_warm.join();
  };
  CLI::App app{"skyrl-actor-host: runs one actor and serves calls to it"};
  std::string class_name, init_args, init_args_file, actor_id, bind = "127.0.0.1", port_file, token_file,
                                                               log_level = "info";
  int port = 0, max_concurrency = 1;
  CallLimits limits;
  TelemetryOptions telemetry{.enabled = CallTelemetry::EnabledByEnvironment()};
  std::string call_records_file;
  if (const char* env = std::getenv("SKYRL_ACTOR_ID")) actor_id = env;
  app.add_option("--class", class_name, "registered actor class")->required();
  auto* inline_args = app.add_option("--init-args", init_args, "bytes passed to the constructor");
  app.add_option("--init-args-file", init_args_file,
                 "read the constructor's bytes from this file (any size, any bytes), then delete it")
      ->excludes(inline_args);
  app.add_option("--actor-id", actor_id, "the actor's id (default $SKYRL_ACTOR_ID, else random)");
  app.add_option("--port", port, "port to serve on (0: any free port)")->check(CLI::Range(0, 65535));
  app.add_option("--bind", bind, "address to listen on");
  app.add_option("--port-file", port_file, "write the bound port here once ready");
  app.add_option("--token-file", token_file, "cluster token file (else $SKYRL_TOKEN, else ~/.skyrl/token)");
  app.add_option("--max-concurrency", max_concurrency, "calls that may run at once (threads start as needed)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--message-bytes", limits.message_bytes,
                 "largest message this host writes; larger results go as parts")
      ->check(CLI::Range(size_t{4096}, size_t(rpc::kMaxMessageBytes)));
  app.add_option("--max-call-bytes", limits.max_call_bytes, "largest args of one call, and largest result")
      ->check(CLI::Range(size_t{4096}, size_t{1} << 40));
  app.add_option("--call-records", telemetry.ring,
                 "recent calls whose timestamps are kept for timelines (0: none; counts are kept anyway)")
      ->check(CLI::Range(size_t{0}, size_t{1} << 20));
  app.add_option("--call-records-file", call_records_file,
                 "write the kept call records here when stopped by a signal (for `skyrl timeline`)");
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|critical|off");
  CLI11_PARSE(app, argc, argv);
  auto fail = [](const absl::Status& s, int code) {
    std::fprintf(stderr, "skyrl-actor-host: %s\n", std::string(s.message()).c_str());
    return code;
  };
  if (absl::Status s = InitLogging("actor", log_level); !s.ok()) return fail(s, 2);
  if (actor_id.empty()) actor_id = ActorId::Random().ToString();
  if (auto id = ActorId::Parse(actor_id); !id.ok()) return fail(id.status(), 2);
  if (!init_args_file.empty()) {
    absl::StatusOr<std::string> bytes = ReadInitArgs(init_args_file);
    if (!bytes.ok()) return fail(bytes.status(), 2);
    init_args = std::move(*bytes);
  }
  absl::StatusOr<std::string> token = rpc::LoadToken(token_file, false);
  if (!token.ok()) return fail(token.status(), 2);
  const ActorClass* cls = ActorRegistry::Get().Find(class_name);
  if (cls == nullptr)
    return fail(absl::NotFoundError(absl::StrCat(
                    "--class: no actor class \"", class_name,
                    "\" in this host (it has: ", absl::StrJoin(ActorRegistry::Get().Names(), ", "), ")")),
                2);
  absl::StatusOr<std::unique_ptr<Actor>> actor = cls->create(init_args);
  if (!actor.ok()) {
    std::fprintf(stderr, "constructor of %s failed: %s\n", class_name.c_str(),
                 std::string(actor.status().message()).c_str());
    return 3;
  }
  rpc::TokenAuth auth(*token);
  ActorServiceImpl service(actor_id, *cls, **actor, auth, max_concurrency, limits, telemetry);
  grpc_warm.join();
  grpc::ServerBuilder builder;
  int bound = 0;
  builder.AddListeningPort(absl::StrCat(bind, ":", port), rpc::ServerCredentials(), &bound);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Clients ping while calls are in flight (ClientOptions.keepalive_time, at least 5 s), to
  // notice a frozen or vanished actor; accept that instead of answering GOAWAY.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 4000);
  builder.SetMaxReceiveMessageSize(rpc::kMaxMessageBytes);
  builder.SetMaxSendMessageSize(rpc::kMaxMessageBytes);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || bound == 0)
    return fail(absl::UnavailableError(absl::StrCat("cannot listen on ", bind, ":", port)), 1);
  if (!port_file.empty()) {
    std::string tmp = port_file + ".tmp";
    std::ofstream(tmp) << bound << "\n";
    std::rename(tmp.c_str(), port_file.c_str());
  }
  spdlog::info("actor {} ({}) ready on {}:{}", actor_id, class_name, bind, bound);
  int sig = WaitForTerminationSignal();
  spdlog::info("actor {} received signal {}, stopping", actor_id, sig);
  // Streams are long-lived: end them first, or Shutdown would wait its whole grace for them.
  service.StopStreams();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (!call_records_file.empty() && telemetry.enabled) {
    if (absl::Status s = WriteCallRecords(call_records_file, service.TelemetrySnapshot(true)); !s.ok())
      spdlog::warn("{}", s.message());
  }
  return 0;
}

}  // namespace skyrl
