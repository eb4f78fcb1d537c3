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
//
//   build/bin/actor_calls --overhead [--rounds 5] [--calls N]
// What telemetry costs: two clusters side by side, one as shipped (the actor hosts record every
// call, the worker serves --metrics-port and is scraped once a second, as Prometheus would)
// and one with SKYRL_CALL_TELEMETRY=0 and no metrics port. The 1:1 async figure is measured on
// both in each round (on first, then off first, ...), and the median of the rounds' ratios
// taken. Each round also counts the CPU time per call of everything involved (this process,
// the cluster's daemons and actor host). Ends with RESULT metrics_overhead_calls (percent of
// the rate lost; the target is at most 3) and metrics_overhead_calls_cpu (percent more CPU
// per call).
#include <grpcpp/grpcpp.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <deque>
#include <future>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
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
// `worker_args` and `env` are added to the worker's command line and everyone's environment.
bool StartCluster(const std::string& dir, int head_port, const std::string& head, int nn,
                  std::vector<skyrl::Subprocess>& daemons, const std::vector<std::string>& worker_args = {},
                  const std::map<std::string, std::string>& extra_env = {}) {
  std::map<std::string, std::string> env = {{"HOME", dir}, {"SKYRL_TOKEN", kToken}};
  env.insert(extra_env.begin(), extra_env.end());
  std::vector<std::string> worker = {skyrl::testing::BinDir() + "/skyrl-worker",
                                     "--head",
                                     head,
                                     "--resources",
                                     absl::StrCat("CPU=", nn),
                                     "--log-level",
                                     "warn",
                                     "--log-dir",
                                     dir + "/actors"};
  worker.insert(worker.end(), worker_args.begin(), worker_args.end());
  for (std::vector<std::string> argv :
       {std::vector<std::string>{skyrl::testing::BinDir() + "/skyrl-head", "--port",
                                 std::to_string(head_port), "--log-level", "warn"},
        worker}) {
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
      a = client.CreateActor("echo");
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

// One GET of http://127.0.0.1:port/metrics; the body's size, or -1.
long Scrape(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  long got = -1;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string req = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (write(fd, req.data(), req.size()) == ssize_t(req.size())) {
      got = 0;
      char buf[65536];
      for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) got += n;
    }
  }
  close(fd);
  return got;
}

// CPU seconds (user + system) of process `pid`, from /proc; 0 when it cannot be read.
double CpuSeconds(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(in, line)) return 0;
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; rest >> field; ++i) {  // fields 14 and 15: utime, stime (clock ticks)
    if (i == 14) utime = std::atof(field.c_str());
    if (i == 15) {
      stime = std::atof(field.c_str());
      break;
    }
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// The processes whose parent is `parent` (the worker's actor hosts).
std::vector<pid_t> Children(pid_t parent) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    std::ifstream in(e.path() / "stat");
    std::string line;
    if (!std::getline(in, line)) continue;
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    std::string state;
    long ppid = 0;
    if (rest >> state >> ppid && ppid == parent) out.push_back(static_cast<pid_t>(std::atol(name.c_str())));
  }
  return out;
}

// A cluster for the overhead figure, with its client and one echo actor.
struct OverheadCluster {
  std::string dir;
  std::vector<skyrl::Subprocess> daemons;
  std::unique_ptr<skyrl::Client> client;
  std::vector<skyrl::ActorHandle> actors;
  int metrics_port = -1;
  std::vector<pid_t> pids;  // head, worker, actor hosts

  double Cpu() const {
    double sum = 0;
    for (pid_t p : pids) sum += CpuSeconds(p);
    return sum;
  }
};

bool StartOverheadCluster(bool telemetry, OverheadCluster& c) {
  c.dir = skyrl::testing::MakeTempDir(telemetry ? "actor-calls-on" : "actor-calls-off");
  auto head_port = skyrl::PickFreePort();
  if (!head_port.ok()) return false;
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  if (telemetry) {
    auto port = skyrl::PickFreePort();
    if (!port.ok()) return false;
    c.metrics_port = *port;
    args = {"--metrics-port", std::to_string(c.metrics_port)};
  } else {
    env["SKYRL_CALL_TELEMETRY"] = "0";
  }
  const std::string head = absl::StrCat("127.0.0.1:", *head_port);
  if (!StartCluster(c.dir, *head_port, head, 1, c.daemons, args, env)) return false;
  auto client = skyrl::Client::Connect(head, kToken);
  if (!client.ok()) return false;
  c.client = std::move(*client);
  if (!CreateEchoActors(*c.client, 1, c.dir, c.actors)) return false;
  for (const skyrl::Subprocess& d : c.daemons) c.pids.push_back(d.pid());
  for (pid_t host : Children(c.daemons.back().pid())) c.pids.push_back(host);
  return c.pids.size() > 2;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int RunOverhead(const Options& opts, int rounds) {
  const std::string payload(size_t(opts.payload_bytes), 'p');
  OverheadCluster on, off;
  if (!StartOverheadCluster(true, on) || !StartOverheadCluster(false, off)) return 1;
  std::atomic<bool> stop{false};
  std::atomic<int> scrapes{0}, scrape_failures{0};
  std::thread scraper([&] {  // as a Prometheus with a 1 s interval would
    while (!stop.load()) {
      (Scrape(on.metrics_port) > 0 ? scrapes : scrape_failures).fetch_add(1);
      for (int i = 0; i < 10 && !stop.load(); ++i) absl::SleepFor(absl::Milliseconds(100));
    }
  });
  std::atomic<int> failed{0};
  const int n = opts.calls * 5;
  // CPU per call: this process (the client, and the scraper for the instrumented side) and
  // the cluster's daemons and actor host, over the round. Steadier than the rate on a shared
  // machine, and what the rate is bounded by when the cores are busy.
  std::vector<double> cpu_on, cpu_off;
  auto rate = [&](OverheadCluster& c) {
    const double cpu0 = CpuSeconds(getpid()) + c.Cpu();
    const absl::Time t0 = absl::Now();
    ClientAsync(*c.client, c.actors, payload, n, opts.window, failed);
    const double r = n / absl::ToDoubleSeconds(absl::Now() - t0);
    (&c == &on ? cpu_on : cpu_off).push_back((CpuSeconds(getpid()) + c.Cpu() - cpu0) / n * 1e9);
    return r;
  };
  rate(on);  // warm up both
  rate(off);
  cpu_on.clear();
  cpu_off.clear();
  std::fprintf(stderr, "actor_calls --overhead: %d rounds of %d async calls on each cluster\n", rounds, n);
  // Each round measures both, in alternating order, so a drift in the machine's speed (it is
  // shared) falls on both sides alike; the figure is the median of the rounds' ratios.
  std::vector<double> rates_on, rates_off, ratios;
  std::printf("%-8s %16s %16s %10s %14s %14s\n", "round", "on calls/s", "off calls/s", "on/off",
              "on CPU ns/call", "off CPU ns/call");
  for (int r = 0; r < rounds; ++r) {
    if (r % 2 == 0) {
      rates_on.push_back(rate(on));
      rates_off.push_back(rate(off));
    } else {
      rates_off.push_back(rate(off));
      rates_on.push_back(rate(on));
    }
    ratios.push_back(rates_on.back() / rates_off.back());
    std::printf("%-8d %16.0f %16.0f %10.3f %14.0f %14.0f\n", r + 1, rates_on.back(), rates_off.back(),
                ratios.back(), cpu_on.back(), cpu_off.back());
    std::fflush(stdout);
  }
  stop = true;
  scraper.join();
  // The records were kept: the worker's metrics show the calls made on the instrumented side.
  const long body = Scrape(on.metrics_port);
  for (OverheadCluster* c : {&on, &off}) {
    c->client.reset();
    for (auto it = c->daemons.rbegin(); it != c->daemons.rend(); ++it) it->Stop(absl::Seconds(5));
    std::error_code ec;
    std::filesystem::remove_all(c->dir, ec);
  }
  if (failed.load() > 0 || scrapes.load() == 0 || body <= 0) {
    std::fprintf(stderr, "actor_calls --overhead: %d calls failed, %d scrapes answered, %d refused\n",
                 failed.load(), scrapes.load(), scrape_failures.load());
    return 1;
  }
  const double overhead = 100.0 * (1.0 - Median(ratios));
  // Over all rounds (a round's CPU time is counted in 10 ms ticks: too coarse alone).
  double sum_on = 0, sum_off = 0;
  for (double x : cpu_on) sum_on += x;
  for (double x : cpu_off) sum_off += x;
  if (sum_on <= 0 || sum_off <= 0)
    std::fprintf(stderr, "actor_calls --overhead: rounds too short to count CPU time (10 ms ticks)\n");
  const double cpu_overhead = sum_on > 0 && sum_off > 0 ? 100.0 * (sum_on / sum_off - 1.0) : 0.0;
  std::printf("%-8s %16.0f %16.0f %10.3f %14.0f %14.0f\n", "median", Median(rates_on), Median(rates_off),
              Median(ratios), Median(cpu_on), Median(cpu_off));
  std::printf("%-8s %16s %16s %10s %14.0f %14.0f\n", "mean", "", "", "", sum_on / double(cpu_on.size()),
              sum_off / double(cpu_off.size()));
  std::printf("metrics scraped %d times during the rounds (%d failed)\n", scrapes.load(),
              scrape_failures.load());
  std::printf("RESULT metrics_overhead_calls %.1f\n", overhead);
  std::printf("RESULT metrics_overhead_calls_cpu %.1f\n", cpu_overhead);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--serve-raw") == 0) return ServeRaw(argv[2]);
  Options o;
  bool overhead = false;
  int rounds = 5;
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--overhead")) overhead = true;
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::max(1, std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--calls")) o.calls = std::max(100, std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--payload")) o.payload_bytes = std::max(1, std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--nn")) o.nn = std::max(1, std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--window")) o.window = std::max(1, std::atoi(argv[i + 1]));
  }
  return overhead ? RunOverhead(o, rounds) : Run(o);
}
