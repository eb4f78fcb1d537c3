// Helpers shared by scheduler_bench's phases (bench/scheduler.cc) and its scale shapes
// (bench/scheduler_scale.cc): a real skyrl-head started as a subprocess, simulated workers
// that start every actor at once, an asynchronous call pump, and CPU meters.
#pragma once

#include <grpcpp/grpcpp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "runtime/common/ids.h"
#include "runtime/common/resources.h"
#include "runtime/common/subprocess.h"
#include "runtime/rpc/auth.h"
#include "skyrl/worker.grpc.pb.h"
#include "tests/util/paths.h"

namespace scheduler_bench {

inline constexpr char kToken[] = "scheduler-bench-token-0123456789abcdef";

struct Latencies {
  std::vector<double> us;
  double Percentile(double p) {
    if (us.empty()) return 0;
    std::sort(us.begin(), us.end());
    return us[std::min(us.size() - 1, size_t(p * double(us.size())))];
  }
};

inline void Row(const char* what, int n, double seconds, Latencies& lat, const char* anchor) {
  std::printf("%-44s %8d %12.0f %10.3f %10.3f  %s\n", what, n, n / seconds, lat.Percentile(0.5) / 1000,
              lat.Percentile(0.99) / 1000, anchor);
}

// CPU seconds (user + system) used so far by process `pid` (0: this one). Rates on a shared
// 2-core machine swing with whatever else runs; CPU per operation does not, so each phase
// through the head also reports it, for the head and for this process (callers + simulated
// workers).
inline double CpuSeconds(pid_t pid) {
  if (pid == 0) {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
  }
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t paren = text.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream fields(text.substr(paren + 2));
  std::string f;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {  // fields 14 and 15: utime, stime (ticks)
    if (i == 14) utime = std::stod(f);
    if (i == 15) stime = std::stod(f);
  }
  return (utime + stime) / double(sysconf(_SC_CLK_TCK));
}

struct CpuMeter {
  explicit CpuMeter(pid_t head) : head_pid(head), head0(CpuSeconds(head)), self0(CpuSeconds(0)) {}
  void Print(const char* what, int ops) const {
    if (ops <= 0) return;
    double head = CpuSeconds(head_pid) - head0, self = CpuSeconds(0) - self0;
    std::printf("  cpu per %-35s head %7.1f us   bench (callers, workers) %7.1f us\n", what, head * 1e6 / ops,
                self * 1e6 / ops);
  }
  pid_t head_pid;
  double head0, self0;
};

inline skyrl::ResourceSet R(const std::string& text) { return *skyrl::ResourceSet::Parse(text); }

// Callback API, so the simulated workers cost the benchmark's side little beside the head.
class InstantWorker final : public skyrl::v1::WorkerService::CallbackService {
 public:
  // Records the actors started from now on, in the order their starts arrive.
  void Record() {
    absl::MutexLock lock(&mu_);
    recording_ = true;
    started_.clear();
  }
  std::vector<std::string> Started() {
    absl::MutexLock lock(&mu_);
    return started_;
  }
  size_t StartedCount() {
    absl::MutexLock lock(&mu_);
    return started_.size();
  }

 private:
  grpc::ServerUnaryReactor* StartActor(grpc::CallbackServerContext* ctx,
                                       const skyrl::v1::StartActorRequest* req,
                                       skyrl::v1::StartActorReply* reply) override {
    {
      absl::MutexLock lock(&mu_);
      if (recording_) started_.push_back(req->actor_id());
    }
    reply->set_address("127.0.0.1:1");
    reply->set_log_path(absl::StrCat("/dev/null/", req->actor_id()));
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  grpc::ServerUnaryReactor* KillActor(grpc::CallbackServerContext* ctx, const skyrl::v1::KillActorRequest*,
                                      skyrl::v1::KillActorReply*) override {
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  absl::Mutex mu_;
  bool recording_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::string> started_ ABSL_GUARDED_BY(mu_);
};

// Threads of a process, from /proc/PID/task.
inline int ThreadCount(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  return -1;
}

// Keeps `inflight` asynchronous calls outstanding until `total` have been started; each
// call is `launch(i, finished)`, which must call finished() exactly once when call i is over.
// Returns when every call is over. The state is shared with the completions, so a completion
// still unwinding after the last one finished touches nothing freed.
class Pump {
 public:
  using Launch = std::function<void(int i, std::function<void()> finished)>;
  Pump(Launch launch, int total) : state_(std::make_shared<State>()) {
    state_->total = total;
    state_->launch = std::move(launch);
  }
  void Run(int inflight) {
    if (state_->total == 0) return;
    for (int k = 0; k < inflight; ++k) Next(state_);
    state_->done.WaitForNotification();
  }

 private:
  struct State {
    int total = 0;
    Launch launch;
    std::atomic<int> next{0}, finished{0};
    absl::Notification done;
  };
  static void Next(const std::shared_ptr<State>& st) {
    int i = st->next.fetch_add(1);
    if (i >= st->total) return;
    st->launch(i, [st] {
      Next(st);
      if (st->finished.fetch_add(1) + 1 == st->total) st->done.Notify();
    });
  }
  std::shared_ptr<State> state_;
};

// One asynchronous call's state, its token attached and its deadline `timeout` from now.
template <typename Request, typename Reply>
struct AsyncCall {
  explicit AsyncCall(absl::Duration timeout) { skyrl::rpc::PrepareCall(&ctx, kToken, timeout); }
  grpc::ClientContext ctx;
  Request req;
  Reply reply;
};

template <typename Call>
grpc::Status Authed(Call call) {
  grpc::ClientContext ctx;
  skyrl::rpc::PrepareCall(&ctx, kToken, absl::Seconds(30));
  return call(&ctx);
}

// The simulated workers' server: every node's address is this one.
inline std::unique_ptr<grpc::Server> StartWorkerServer(InstantWorker& service, int* port) {
  grpc::ServerBuilder b;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), port);
  b.RegisterService(&service);
  return b.BuildAndStart();
}

// A real skyrl-head (memory store) on a free port, its log under a fresh directory.
struct HeadProcess {
  std::string dir, address, log_path;
  std::optional<skyrl::Subprocess> proc;
  bool ok() const { return proc.has_value(); }
};
inline HeadProcess StartHead(const std::string& name, const std::vector<std::string>& extra_flags = {}) {
  HeadProcess h;
  h.dir = skyrl::testing::MakeTempDir(name);
  auto port = skyrl::PickFreePort();
  if (!port.ok()) return h;
  h.address = absl::StrCat("127.0.0.1:", *port);
  skyrl::SpawnOptions o;
  o.argv = {skyrl::testing::BinDir() + "/skyrl-head", "--port", std::to_string(*port), "--log-level", "warn"};
  o.argv.insert(o.argv.end(), extra_flags.begin(), extra_flags.end());
  o.env_set = {{"HOME", h.dir}, {"SKYRL_TOKEN", kToken}};
  o.log_path = h.log_path = h.dir + "/head.log";
  auto proc = skyrl::Subprocess::Start(o);
  if (proc.ok()) h.proc.emplace(*std::move(proc));
  return h;
}

// Resident memory of process `pid` in MiB (VmRSS), from /proc.
inline double RssMib(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atof(line.c_str() + 6) / 1024;
  return 0;
}

// Ray's RL placement shapes at each size (bench/scheduler_scale.cc); the exit status.
int RunScaleShapes(const std::vector<std::string>& shapes, std::vector<int> sizes, int actors_per_node,
                   int clients, int inflight, double idle_s);

}  // namespace scheduler_bench
