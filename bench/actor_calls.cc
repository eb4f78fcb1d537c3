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

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--serve-raw") == 0) return ServeRaw(argv[2]);
  int calls = 20000, payload_bytes = 64, nn = 4, window = 1000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--calls")) calls = std::max(100, std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--payload")) payload_bytes = std::max(1, std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--nn")) nn = std::max(1, std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--window")) window = std::max(1, std::atoi(argv[i + 1]));
  }
  std::string payload(size_t(payload_bytes), 'p');
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
  std::map<std::string, std::string> env = {{"HOME", dir}, {"SKYRL_TOKEN", kToken}};
  std::vector<skyrl::Subprocess> daemons;
  for (std::vector<std::string> argv :
       {std::vector<std::string>{skyrl::testing::BinDir() + "/skyrl-head", "--port",
                                 std::to_string(*head_port), "--log-level", "warn"},
        std::vector<std::string>{skyrl::testing::BinDir() + "/skyrl-worker", "--head", head,
                                 "--resources", absl::StrCat("CPU=", nn), "--log-level", "warn",
                                 "--log-dir", dir + "/actors"}}) {
    skyrl::SpawnOptions o;
    o.argv = argv;
    o.env_set = env;
    o.log_path = dir + "/daemons.log";
    auto p = skyrl::Subprocess::Start(o);
    if (!p.ok()) return 1;
    daemons.push_back(std::move(*p));
  }
  auto client = skyrl::Client::Connect(head, kToken);
  if (!client.ok()) return 1;
  std::vector<skyrl::ActorHandle> actors;
  for (int i = 0; i < nn; ++i) {
    absl::StatusOr<skyrl::ActorHandle> a;
    for (int attempt = 0; attempt < 200; ++attempt) {  // the worker may still be registering
      a = (*client)->CreateActor("echo", {});
      if (a.ok()) break;
      absl::SleepFor(absl::Milliseconds(50));
    }
    if (!a.ok()) {
      std::fprintf(stderr, "actor_calls: cannot create an actor: %s (logs in %s)\n",
                   std::string(a.status().message()).c_str(), dir.c_str());
      return 1;
    }
    actors.push_back(*a);
  }
  Target raw{"", skyrl::v1::ActorService::NewStub(
                     skyrl::rpc::MakeChannel(absl::StrCat("127.0.0.1:", raw_port)))};

  std::fprintf(stderr, "actor_calls: %d calls per figure, %d-byte payload, n:n with n=%d\n", calls,
               payload_bytes, nn);
  std::atomic<int> failed{0};
  auto client_sync = [&](int n) {
    absl::Time t0 = absl::Now();
    for (int i = 0; i < n; ++i)
      if (absl::Status st = (*client)->Call(actors[0], "echo", payload).status(); !st.ok() && failed.fetch_add(1) == 0)
        std::fprintf(stderr, "actor_calls: first failure: %s\n", std::string(st.message()).c_str());
    return n / absl::ToDoubleSeconds(absl::Now() - t0);
  };
  // Keeps `window` futures in flight over `targets` until `n` calls have completed.
  auto client_async = [&](const std::vector<skyrl::ActorHandle>& targets, int n, int window) {
    std::deque<std::future<absl::StatusOr<std::string>>> futures;
    for (int issued = 0; issued < n || !futures.empty();) {
      while (issued < n && int(futures.size()) < window)
        futures.push_back((*client)->CallAsync(targets[size_t(issued++) % targets.size()], "echo", payload));
      absl::StatusOr<std::string> r = futures.front().get();
      if (!r.ok() && failed.fetch_add(1) == 0)
        std::fprintf(stderr, "actor_calls: first failure: %s\n", std::string(r.status().message()).c_str());
      if (r.ok() && *r != payload && failed.fetch_add(1) == 0)
        std::fprintf(stderr, "actor_calls: a result differs from its payload (%zu bytes)\n", r->size());
      futures.pop_front();
    }
  };
  SyncRate(raw, payload, calls / 10);  // warm up both paths
  client_sync(calls / 10);
  double raw_rate = SyncRate(raw, payload, calls);
  double sync_rate = client_sync(calls);

  int async_calls = calls * 5;
  absl::Time t0 = absl::Now();
  client_async({actors[0]}, async_calls, window);
  double async_rate = async_calls / absl::ToDoubleSeconds(absl::Now() - t0);
  t0 = absl::Now();
  client_async({actors[0]}, calls, 1);
  double async_one_rate = calls / absl::ToDoubleSeconds(absl::Now() - t0);

  std::vector<std::thread> callers;
  int per_caller = async_calls / nn;
  t0 = absl::Now();
  for (int i = 0; i < nn; ++i)
    callers.emplace_back([&] { client_async(actors, per_caller, std::max(1, window / 4)); });
  for (auto& c : callers) c.join();
  double nn_rate = per_caller * nn / absl::ToDoubleSeconds(absl::Now() - t0);
  if (failed.load() > 0 || raw_rate <= 0 || sync_rate <= 0) {
    std::fprintf(stderr, "actor_calls: %d calls failed\n", failed.load());
    return 1;
  }

  std::printf("%-46s %12s %10s\n", "figure", "calls/s", "vs raw");
  std::printf("%-46s %12.0f %10.2f\n", "raw gRPC unary ping-pong (sync)", raw_rate, 1.0);
  std::printf("%-46s %12.0f %10.2f\n", "actor calls, 1:1 sync", sync_rate, sync_rate / raw_rate);
  std::printf("%-46s %12.0f %10.2f\n", "actor calls, 1:1 async, 1000 in flight", async_rate,
              async_rate / raw_rate);
  std::printf("%-46s %12.0f %10.2f\n", "actor calls, 1:1 async, 1 in flight", async_one_rate,
              async_one_rate / raw_rate);
  std::printf("%-46s %12.0f %10.2f\n", absl::StrCat("actor calls, n:n async, n=", nn).c_str(),
              nn_rate, nn_rate / raw_rate);
  std::printf("RESULT raw_grpc_calls_per_s %.0f\n", raw_rate);
  std::printf("RESULT sync_calls_per_s %.0f\n", sync_rate);
  std::printf("RESULT async_calls_per_s %.0f\n", async_rate);
  std::printf("RESULT async_one_in_flight_calls_per_s %.0f\n", async_one_rate);
  std::printf("RESULT nn_async_calls_per_s %.0f\n", nn_rate);
  std::printf("RESULT sync_ratio_to_grpc %.3f\n", sync_rate / raw_rate);
  client->reset();
  for (auto it = daemons.rbegin(); it != daemons.rend(); ++it) it->Stop(absl::Seconds(5));
  raw_proc->Stop(absl::Seconds(1));
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return 0;
}
