// recovery_bench: how long an actor is unavailable after each kind of failure, on a real
// cluster (Redis, skyrl-head, three skyrl-workers, one echo actor that restarts forever),
// while a caller calls it every 10 ms:
//   worker_kill_replaced     its worker SIGKILLed and a fresh one started on the machine (the
//                            fresh one finds the old process gone: certain at once)
//   worker_kill              its worker SIGKILLed; the two peers confirm the death
//   worker_kill_with_peer    its worker and one peer SIGKILLed together: nobody can confirm,
//                            the keep limit ends the wait (K + T after it was last heard)
//   worker_freeze            its worker SIGSTOPped past T (its actor stops on its lease)
//   head_kill                the head SIGKILLed and started again on Redis
//   redis_kill               Redis SIGKILLed and started again 3 s later
// Except in worker_kill_replaced, each worker runs in its own pid namespace (as on its own
// machine), so no worker can see another's processes. A cut-off host needs network
// namespaces: tests/netns/hosts_test.cc measures it.
//
// For the kills and the freeze: the time from the fault to the first answer from the new
// incarnation; for head and Redis: the longest gap between answers around the fault (the
// actor keeps serving; the control plane is away). Each is also given over the death
// threshold T of the same run, the baseline that bounds it. Ends with RESULT lines.
// Usage: recovery_bench [--rounds N] [--period-ms P] [--misses M] [--keep-ms K] [--only KIND]
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "runtime/client/client.h"
#include "runtime/common/subprocess.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"
#include "skyrl/node.grpc.pb.h"
#include "tests/util/paths.h"
#include "tests/util/redis_server.h"

namespace skyrl::bench {
namespace {

using testing::BinDir;
using testing::MakeTempDir;
using testing::RedisServer;

struct Flags {
  int rounds = 3;
  int period_ms = 1000, misses = 5, keep_ms = 30000;  // the head's defaults
  std::string only;
};

struct Answer {
  absl::Time at;
  bool ok = false;
  std::string pid;
};

// Calls the actor's "pid" every 10 ms and keeps every outcome.
class Caller {
 public:
  Caller(Client& client, ActorHandle actor) : client_(client), actor_(std::move(actor)) {
    thread_ = std::thread([this] {
      while (!stop_) {
        absl::StatusOr<std::string> r = client_.Call(actor_, "pid", "", absl::Seconds(1));
        std::lock_guard<std::mutex> lock(mu_);
        answers_.push_back({absl::Now(), r.ok(), r.ok() ? *r : ""});
        absl::SleepFor(absl::Milliseconds(10));
      }
    });
  }
  ~Caller() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::vector<Answer> Answers() {
    std::lock_guard<std::mutex> lock(mu_);
    return answers_;
  }

 private:
  Client& client_;
  ActorHandle actor_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<Answer> answers_;
  std::thread thread_;
};

class Cluster {
 public:
  Cluster(const Flags& f, bool own_pid_namespaces) : f_(f), own_ns_(own_pid_namespaces) {}
  ~Cluster() {
    for (auto& w : workers_) w.Signal(SIGCONT).IgnoreError();
    client_.reset();
    workers_.clear();
    head_.reset();
    redis_.reset();
    if (!dir_.empty() && !keep_logs_) std::filesystem::remove_all(dir_);
  }

  absl::Status Start() {
    dir_ = MakeTempDir("recovery");
    absl::StatusOr<std::unique_ptr<RedisServer>> redis = RedisServer::Start("", /*fsync_always=*/false);
    if (!redis.ok()) return redis.status();
    redis_ = std::move(*redis);
    if (absl::Status s = StartHead(); !s.ok()) return s;
    for (int i = 0; i < 3; ++i)
      if (absl::Status s = StartWorker(); !s.ok()) return s;
    if (absl::Status s = WaitForAlive(3); !s.ok()) return s;
    absl::SleepFor(absl::Milliseconds(f_.period_ms * 3));  // every worker holds its peer list
    ClientOptions o;
    o.call_timeout = absl::Seconds(1);
    o.restart_wait = absl::Seconds(1);
    o.keepalive_time = absl::Seconds(5);
    o.keepalive_timeout = absl::Milliseconds(500);
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(address_, Token(), o);
    if (!c.ok()) return c.status();
    client_ = std::move(*c);
    v1::ActorSpec spec = ActorSpecFor("echo");
    spec.set_max_restarts(-1);
    absl::StatusOr<ActorHandle> actor = client_->CreateActor(spec);
    if (!actor.ok()) return actor.status();
    actor_ = *actor;
    absl::StatusOr<v1::ActorInfo> info = client_->Describe(*actor_);
    if (!info.ok()) return info.status();
    actor_node_ = info->node_id();
    return absl::OkStatus();
  }

  absl::Status StartHead() {
    if (port_ == 0) {
      absl::StatusOr<int> port = PickFreePort();
      if (!port.ok()) return port.status();
      port_ = *port;
      address_ = absl::StrCat("127.0.0.1:", port_);
    }
    SpawnOptions o;
    o.argv = {BinDir() + "/skyrl-head",
              "--port",
              std::to_string(port_),
              "--store",
              redis_->url(),
              "--heartbeat-period-ms",
              std::to_string(f_.period_ms),
              "--heartbeat-misses",
              std::to_string(f_.misses),
              "--headless-keep-ms",
              std::to_string(f_.keep_ms)};
    o.log_path = dir_ + "/head.log";
    o.env_set = Env();
    absl::StatusOr<Subprocess> p = Subprocess::Start(o);
    if (!p.ok()) return p.status();
    head_ = std::move(*p);
    for (absl::Time deadline = absl::Now() + absl::Seconds(30); absl::Now() < deadline;
         absl::SleepFor(absl::Milliseconds(20)))
      if (!Token().empty() && Nodes().ok()) return absl::OkStatus();
    return absl::UnavailableError("the head did not start; see " + o.log_path);
  }

  absl::Status StartWorker() {
    SpawnOptions o;
    if (own_ns_) o.argv = {"unshare", "--pid", "--fork", "--mount-proc", "--kill-child=SIGKILL"};
    // Each its own log folder (and so lease file), as on its own machine.
    for (std::string a :
         {BinDir() + "/skyrl-worker", std::string("--head"), address_, std::string("--resources"),
          std::string("CPU=2"), std::string("--log-dir"), absl::StrCat(dir_, "/w", started_, "-logs")})
      o.argv.push_back(a);
    o.log_path = absl::StrCat(dir_, "/w", started_++, ".log");
    o.env_set = Env();
    absl::StatusOr<Subprocess> p = Subprocess::Start(o);
    if (!p.ok()) return p.status();
    workers_.push_back(std::move(*p));
    return absl::OkStatus();
  }

  // The worker (index into workers_) of the node the actor first ran on: the one whose log
  // names that node.
  int ActorWorker() const {
    for (int i = 0; i < started_; ++i) {
      std::ifstream in(absl::StrCat(dir_, "/w", i, ".log"));
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (text.find("as " + actor_node_) != std::string::npos) return i;
    }
    return -1;
  }

  absl::StatusOr<std::vector<v1::NodeInfo>> Nodes() {
    auto stub = v1::NodeService::NewStub(rpc::MakeChannel(address_));
    grpc::ClientContext ctx;
    rpc::PrepareCall(&ctx, Token(), absl::Seconds(1));
    v1::ListNodesReply reply;
    grpc::Status s = stub->ListNodes(&ctx, {}, &reply);
    if (!s.ok()) return absl::UnavailableError(s.error_message());
    return std::vector<v1::NodeInfo>(reply.nodes().begin(), reply.nodes().end());
  }

  absl::Status WaitForAlive(int n) {
    for (absl::Time deadline = absl::Now() + absl::Seconds(30); absl::Now() < deadline;
         absl::SleepFor(absl::Milliseconds(50))) {
      absl::StatusOr<std::vector<v1::NodeInfo>> nodes = Nodes();
      if (!nodes.ok()) continue;
      int alive = 0;
      for (const v1::NodeInfo& node : *nodes) alive += node.state() == v1::NODE_ALIVE;
      if (alive == n) return absl::OkStatus();
    }
    return absl::DeadlineExceededError(absl::StrCat(n, " workers did not register; logs in ", dir_));
  }

  std::string Token() const {
    std::ifstream in(dir_ + "/.skyrl/token");
    std::string token;
    in >> token;
    return token;
  }
  std::map<std::string, std::string> Env() const { return {{"HOME", dir_}, {"SKYRL_TOKEN", ""}}; }

  const Flags& f_;
  const bool own_ns_;
  std::string dir_, address_, actor_node_;
  int port_ = 0, started_ = 0;
  bool keep_logs_ = false;  // a failed measurement leaves its logs
  std::unique_ptr<RedisServer> redis_;
  std::optional<Subprocess> head_;
  std::vector<Subprocess> workers_;
  std::unique_ptr<Client> client_;
  std::optional<ActorHandle> actor_;
};

// One fault on a fresh cluster: how long the actor was unavailable (seconds), or an error.
absl::StatusOr<double> Measure(const Flags& f, const std::string& kind) {
  const bool own_namespaces = kind != "worker_kill_replaced";
  Cluster c(f, own_namespaces);
  if (absl::Status s = c.Start(); !s.ok()) return s;
  const int victim = c.ActorWorker();
  if (victim < 0) return absl::InternalError("cannot tell which worker runs the actor; logs in " + c.dir_);
  Caller caller(*c.client_, *c.actor_);
  absl::SleepFor(absl::Milliseconds(500));
  std::vector<Answer> before = caller.Answers();
  if (before.empty() || !before.back().ok) return absl::UnavailableError("the actor does not answer before");
  const std::string old_pid = before.back().pid;
  const absl::Duration threshold = absl::Milliseconds(f.period_ms * f.misses);
  const absl::Time fault = absl::Now();
  if (kind == "worker_kill" || kind == "worker_kill_replaced" || kind == "worker_kill_with_peer") {
    c.workers_[victim].Signal(SIGKILL).IgnoreError();
    if (kind == "worker_kill_with_peer") c.workers_[(victim + 1) % 3].Signal(SIGKILL).IgnoreError();
    if (kind == "worker_kill_replaced")
      if (absl::Status s = c.StartWorker(); !s.ok()) return s;
  } else if (kind == "worker_freeze") {
    c.workers_[victim].Signal(SIGSTOP).IgnoreError();
  } else if (kind == "head_kill") {
    c.head_->Signal(SIGKILL).IgnoreError();
    c.head_->Wait();
    if (absl::Status s = c.StartHead(); !s.ok()) return s;
  } else if (kind == "redis_kill") {
    c.redis_->Kill(SIGKILL);
    absl::SleepFor(absl::Seconds(3));
    if (absl::Status s = c.redis_->Restart(); !s.ok()) return s;
  }
  const bool restarts = kind != "head_kill" && kind != "redis_kill";
  const absl::Time until = fault + threshold * 4 + absl::Milliseconds(f.keep_ms) + absl::Seconds(10);
  double result = -1;
  while (absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(50));
    std::vector<Answer> answers = caller.Answers();
    if (restarts) {
      // The new incarnation's first answer: the first after the old one stopped answering (a
      // pid alone cannot tell them apart: in their own pid namespaces both may have the same).
      auto stopped = std::find_if(answers.begin(), answers.end(),
                                  [&](const Answer& a) { return a.at > fault && !a.ok; });
      auto fresh = std::find_if(stopped, answers.end(), [&](const Answer& a) { return a.ok; });
      if (fresh != answers.end()) {
        if (fresh->pid == old_pid && !own_namespaces)
          return absl::InternalError(absl::StrCat(kind, ": the old incarnation answered after failing"));
        result = absl::ToDoubleSeconds(fresh->at - fault);
        break;
      }
    } else if (absl::Now() > fault + threshold * 2) {
      // The longest time without an answer from the fault on (the calls come every 10 ms).
      absl::Time last = fault;
      absl::Duration gap;
      for (const Answer& a : answers) {
        if (!a.ok || a.at < fault) continue;
        gap = std::max(gap, a.at - last);
        last = a.at;
      }
      result = absl::ToDoubleSeconds(std::max(gap, absl::Now() - last));
      break;
    }
  }
  if (kind == "worker_freeze") c.workers_[victim].Signal(SIGCONT).IgnoreError();
  caller.Stop();
  if (result < 0) {
    c.keep_logs_ = true;
    return absl::DeadlineExceededError(
        absl::StrCat(kind, ": the actor never answered again; logs in ", c.dir_));
  }
  return result;
}

int Run(const Flags& f) {
  const std::vector<std::string> kinds = {"worker_kill_replaced", "worker_kill", "worker_kill_with_peer",
                                          "worker_freeze",        "head_kill",   "redis_kill"};
  const double t = f.period_ms * f.misses / 1000.0, k = f.keep_ms / 1000.0;
  std::printf("recovery_bench: T = %.1f s (%d ms x %d), keep limit K = %.1f s, %d round(s) each\n", t,
              f.period_ms, f.misses, k, f.rounds);
  std::printf("%-24s %9s %9s %9s  %s\n", "failure", "median s", "max s", "max / T", "bound");
  int failed = 0;
  std::vector<std::string> results;
  for (const std::string& kind : kinds) {
    if (!f.only.empty() && kind != f.only) continue;
    std::vector<double> seconds;
    for (int r = 0; r < f.rounds; ++r) {
      absl::StatusOr<double> s = Measure(f, kind);
      if (!s.ok()) {
        std::fprintf(stderr, "%s round %d: %s\n", kind.c_str(), r + 1,
                     std::string(s.status().message()).c_str());
        ++failed;
        continue;
      }
      seconds.push_back(*s);
    }
    if (seconds.empty()) continue;
    std::sort(seconds.begin(), seconds.end());
    const double median = seconds[seconds.size() / 2], most = seconds.back();
    const char* bound = kind == "worker_kill_replaced"    ? "a few heartbeat periods (process check)"
                        : kind == "worker_kill"           ? "T + two periods (peers confirm)"
                        : kind == "worker_kill_with_peer" ? "K + T (the lease horizon)"
                        : kind == "worker_freeze"         ? "T + two periods (peers confirm)"
                        : kind == "head_kill"             ? "0: calls go to the actor directly"
                                                          : "0: calls go to the actor directly";
    std::printf("%-24s %9.2f %9.2f %9.2f  %s\n", kind.c_str(), median, most, most / t, bound);
    std::fflush(stdout);
    results.push_back(absl::StrCat("RESULT recovery_", kind, "_s ", absl::StrFormat("%.2f", most)));
  }
  for (const std::string& r : results) std::printf("%s\n", r.c_str());
  if (failed == 0) std::printf("recovery_bench: every failure measured\n");
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace skyrl::bench

int main(int argc, char** argv) {
  skyrl::bench::Flags f;
  CLI::App app{"recovery_bench: how long an actor is unavailable after each kind of failure"};
  app.add_option("--rounds", f.rounds, "faults of each kind, each on a fresh cluster")
      ->check(CLI::Range(1, 100));
  app.add_option("--period-ms", f.period_ms, "the head's heartbeat period")->check(CLI::Range(50, 10000));
  app.add_option("--misses", f.misses, "missed heartbeats before a node is dead")->check(CLI::Range(4, 100));
  app.add_option("--keep-ms", f.keep_ms, "the head's --headless-keep-ms")->check(CLI::Range(1, 600000));
  app.add_option("--only", f.only, "one kind of failure");
  CLI11_PARSE(app, argc, argv);
  return skyrl::bench::Run(f);
}
