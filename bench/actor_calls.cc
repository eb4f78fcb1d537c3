// actor_calls: actor call rates against raw gRPC, in one run.
//
//   build/bin/actor_calls [--calls N] [--payload BYTES] [--nn N] [--window 1000]
//
// Figures (all over loopback, each server in its own process):
//   raw gRPC  : sync unary ping-pong against a bare ActorService server (no auth, no dispatch)
//               that this binary starts as a child (--serve-raw);
//   sync      : skyrl::Client::Call, 1 caller, 1 actor (built-in echo), one call at a time;
//   async     : skyrl::Client::CallAsync, 1 caller, 1 actor, 1,000 futures in flight (calls
//               travel batched on the client's CallStream to the actor);
//   async, 1 in flight : the same path one call at a time (what batching costs when idle);
//   n:n async : N caller threads, N actors, each caller keeps 250 futures in flight spread over
//               all actors.
// The actors run in a real local cluster (skyrl-head + one skyrl-worker) that this benchmark
// starts; calls go straight to the actor processes with the cluster token, the head is only
// asked where an actor lives.
// Every result is checked against the payload. Ends with RESULT raw_grpc_calls_per_s,
// sync_calls_per_s, async_calls_per_s, async_one_in_flight_calls_per_s, nn_async_calls_per_s,
// sync_ratio_to_grpc.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <future>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/client/client.h"
#include "runtime/common/ids.h"
#include "runtime/common/subprocess.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"
#include "skyrl/actor.grpc.pb.h"
#include "tests/util/paths.h"

namespace {

constexpr char kToken[] = "actor-calls-bench-token-0123456789";

// The baseline: the same RPC with nothing behind it.
class RawService final : public skyrl::v1::ActorService::Service {
  grpc::Status Call(grpc::ServerContext*, const skyrl::v1::ActorCallRequest* req,
                    skyrl::v1::ActorCallReply* reply) override {
    reply->set_result(req->args());
    return grpc::Status::OK;
  }
};

int ServeRaw(const std::string& port_file) {
  RawService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  if (!server) return 1;
  std::ofstream(port_file + ".tmp") << port << "\n";
  std::rename((port_file + ".tmp").c_str(), port_file.c_str());
  server->Wait();  // killed by the parent
  return 0;
}

int WaitPort(const std::string& port_file, skyrl::Subprocess& p) {
  for (int i = 0; i < 1000; ++i) {
    int port = 0;
    std::ifstream(port_file) >> port;
    if (port > 0) return port;
    if (p.TryWait()) return 0;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return 0;
}

struct Target {
  std::string actor_id;  // empty for the raw server
  std::unique_ptr<skyrl::v1::ActorService::Stub> stub;
};

skyrl::v1::ActorCallRequest Request(const Target& t, const std::string& payload) {
  skyrl::v1::ActorCallRequest req;
  req.set_actor_id(t.actor_id);
  req.set_method("echo");
  req.set_args(payload);
  return req;
}

double SyncRate(Target& t, const std::string& payload, int calls) {
  skyrl::v1::ActorCallRequest req = Request(t, payload);
  absl::Time t0 = absl::Now();
  for (int i = 0; i < calls; ++i) {
    grpc::ClientContext ctx;
    skyrl::rpc::AttachToken(&ctx, kToken);
    skyrl::v1::ActorCallReply reply;
    grpc::Status s = t.stub->Call(&ctx, req, &reply);
    if (!s.ok() || reply.result().size() != payload.size()) {
      std::fprintf(stderr, "call failed: %s\n", s.error_message().c_str());
      return -1;
    }
  }
  return calls / absl::ToDoubleSeconds(absl::Now() - t0);
}

struct Options {
  int calls = 20000, payload_bytes = 64, nn = 4, window = 1000;
};

// Starts skyrl-head on `head_port` and one skyrl-worker with `nn` CPUs into `daemons`; false
// when one cannot start.
bool StartCluster(const std::string& dir, int head_port, const std::string& head, int nn,
                  std::vector<skyrl::Subprocess>& daemons) {
  std::map<std::string, std::string> env = {{"HOME", dir}, {"SKYRL_TOKEN", kToken}};
  for (std::vector<std::string> argv :
       {std::vector<std::string>{skyrl::testing::BinDir() + "/skyrl-head", "--port",
                                 std::to_string(head_port), "--log-level", "warn"},
        std::vector<std::string>{skyrl::testing::BinDir() + "/skyrl-worker", "--head", head, "--resources",
                                 absl::StrCat("CPU=", nn), "--log-level", "warn", "--log-dir",
                                 dir + "/actors"}}) {
    skyrl::SpawnOptions o;
    o.argv = argv;
    o.env_set = env;
    o.log_path = dir + "/daemons.log";
    auto p = skyrl::Subprocess::Start(o);
    if (!p.ok()) return false;
    daemons.push_back(std::move(*p));
  }
  return true;
}

// Creates `nn` echo actors into `actors`; false (after saying why) when one cannot be created.
bool CreateEchoActors(skyrl::Client& client, int nn, const std::string& dir,
                      std::vector<skyrl::ActorHandle>& actors) {
  for (int i = 0; i < nn; ++i) {
    absl::StatusOr<skyrl::ActorHandle> a;
    for (int attempt = 0; attempt < 200; ++attempt) {  // the worker may still be registering
      a = client.CreateActor("echo", {});
      if (a.ok()) break;
      absl::SleepFor(absl::Milliseconds(50));
    }
    if (!a.ok()) {
      std::fprintf(stderr, "actor_calls: cannot create an actor: %s (logs in %s)\n",
                   std::string(a.status().message()).c_str(), dir.c_str());
      return false;
    }
    actors.push_back(*a);
  }
  return true;
}

// Calls per second of `n` skyrl::Client::Call's to `actor`, one at a time; failures counted in
// `failed`.
double ClientSyncRate(skyrl::Client& client, const skyrl::ActorHandle& actor, const std::string& payload,
                      int n, std::atomic<int>& failed) {
  absl::Time t0 = absl::Now();
  for (int i = 0; i < n; ++i)
    if (absl::Status st = client.Call(actor, "echo", payload).status(); !st.ok() && failed.fetch_add(1) == 0)
      std::fprintf(stderr, "actor_calls: first failure: %s\n", std::string(st.message()).c_str());
  return n / absl::ToDoubleSeconds(absl::Now() - t0);
}

// Keeps `window` futures in flight over `targets` until `n` calls have completed.
void ClientAsync(skyrl::Client& client, const std::vector<skyrl::ActorHandle>& targets,
                 const std::string& payload, int n, int window, std::atomic<int>& failed) {
  std::deque<std::future<absl::StatusOr<std::string>>> futures;
  for (int issued = 0; issued < n || !futures.empty();) {
    while (issued < n && int(futures.size()) < window)
      futures.push_back(client.CallAsync(targets[size_t(issued++) % targets.size()], "echo", payload));
    absl::StatusOr<std::string> r = futures.front().get();
    if (!r.ok() && failed.fetch_add(1) == 0)
      std::fprintf(stderr, "actor_calls: first failure: %s\n", std::string(r.status().message()).c_str());
    if (r.ok() && *r != payload && failed.fetch_add(1) == 0)
      std::fprintf(stderr, "actor_calls: a result differs from its payload (%zu bytes)\n", r->size());
    futures.pop_front();
  }
}

// Calls per second of each figure.
struct Rates {
  double raw = 0, sync = 0, async = 0, async_one = 0, nn = 0;
};

Rates Measure(const Options& opts, skyrl::Client& client, const std::vector<skyrl::ActorHandle>& actors,
              Target& raw, const std::string& payload, std::atomic<int>& failed) {
  Rates r;
  SyncRate(raw, payload, opts.calls / 10);  // warm up both paths
  ClientSyncRate(client, actors[0], payload, opts.calls / 10, failed);
  r.raw = SyncRate(raw, payload, opts.calls);
  r.sync = ClientSyncRate(client, actors[0], payload, opts.calls, failed);

  int async_calls = opts.calls * 5;
  absl::Time t0 = absl::Now();
  ClientAsync(client, {actors[0]}, payload, async_calls, opts.window, failed);
  r.async = async_calls / absl::ToDoubleSeconds(absl::Now() - t0);
  t0 = absl::Now();
  ClientAsync(client, {actors[0]}, payload, opts.calls, 1, failed);
  r.async_one = opts.calls / absl::ToDoubleSeconds(absl::Now() - t0);

  std::vector<std::thread> callers;
  int per_caller = async_calls / opts.nn;
  t0 = absl::Now();
  for (int i = 0; i < opts.nn; ++i)
    callers.emplace_back(
        [&] { ClientAsync(client, actors, payload, per_caller, std::max(1, opts.window / 4), failed); });
  for (auto& c : callers) c.join();
  r.nn = per_caller * opts.nn / absl::ToDoubleSeconds(absl::Now() - t0);
  return r;
}

void PrintRates(const Rates& r, int nn) {
  std::printf("%-46s %12s %10s\n", "figure", "calls/s", "vs raw");
  std::printf("%-46s %12.0f %10.2f\n", "raw gRPC unary ping-pong (sync)", r.raw, 1.0);
  std::printf("%-46s %12.0f %10.2f\n", "actor calls, 1:1 sync", r.sync, r.sync / r.raw);
  std::printf("%-46s %12.0f %10.2f\n", "actor calls, 1:1 async, 1000 in flight", r.async, r.async / r.raw);
  std::printf("%-46s %12.0f %10.2f\n", "actor calls, 1:1 async, 1 in flight", r.async_one,
              r.async_one / r.raw);
  std::printf("%-46s %12.0f %10.2f\n", absl::StrCat("actor calls, n:n async, n=", nn).c_str(), r.nn,
              r.nn / r.raw);
  std::printf("RESULT raw_grpc_calls_per_s %.0f\n", r.raw);
  std::printf("RESULT sync_calls_per_s %.0f\n", r.sync);
  std::printf("RESULT async_calls_per_s %.0f\n", r.async);
  std::printf("RESULT async_one_in_flight_calls_per_s %.0f\n", r.async_one);
  std::printf("RESULT nn_async_calls_per_s %.0f\n", r.nn);
  std::printf("RESULT sync_ratio_to_grpc %.3f\n", r.sync / r.raw);
}

int Run(const Options& opts) {
  std::string payload(size_t(opts.payload_bytes), 'p');
  std::string dir = skyrl::testing::MakeTempDir("actor-calls");

  // Baseline server: this binary again, as its own process.
  skyrl::SpawnOptions raw_opts;
  raw_opts.argv = {"/proc/self/exe", "--serve-raw", dir + "/raw.port"};
  raw_opts.argv[0] = std::string(realpath("/proc/self/exe", nullptr));
  auto raw_proc = skyrl::Subprocess::Start(raw_opts);
  if (!raw_proc.ok()) return 1;
  int raw_port = WaitPort(dir + "/raw.port", *raw_proc);

  // A real local cluster: skyrl-head and one skyrl-worker, actors created through the client.
  auto head_port = skyrl::PickFreePort();
  if (!head_port.ok()) return 1;
  std::string head = absl::StrCat("127.0.0.1:", *head_port);
  std::vector<skyrl::Subprocess> daemons;
  if (!StartCluster(dir, *head_port, head, opts.nn, daemons)) return 1;
  auto client = skyrl::Client::Connect(head, kToken);
  if (!client.ok()) return 1;
  std::vector<skyrl::ActorHandle> actors;
  if (!CreateEchoActors(**client, opts.nn, dir, actors)) return 1;
  Target raw{"",
             skyrl::v1::ActorService::NewStub(skyrl::rpc::MakeChannel(absl::StrCat("127.0.0.1:", raw_port)))};

  std::fprintf(stderr, "actor_calls: %d calls per figure, %d-byte payload, n:n with n=%d\n", opts.calls,
               opts.payload_bytes, opts.nn);
  std::atomic<int> failed{0};
  const Rates r = Measure(opts, **client, actors, raw, payload, failed);
  if (failed.load() > 0 || r.raw <= 0 || r.sync <= 0) {
    std::fprintf(stderr, "actor_calls: %d calls failed\n", failed.load());
    return 1;
  }
  PrintRates(r, opts.nn);
  client->reset();
  for (auto it = daemons.rbegin(); it != daemons.rend(); ++it) it->Stop(absl::Seconds(5));
  raw_proc->Stop(absl::Seconds(1));
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--serve-raw") == 0) return ServeRaw(argv[2]);
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--calls")) o.calls = std::max(100, std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--payload")) o.payload_bytes = std::max(1, std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--nn")) o.nn = std::max(1, std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--window")) o.window = std::max(1, std::atoi(argv[i + 1]));
  }
  return Run(o);
}
