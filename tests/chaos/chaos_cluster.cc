#include "tests/chaos/chaos_cluster.h"

#include <signal.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"
#include "runtime/rpc/status.h"
#include "skyrl/actor_directory.grpc.pb.h"
#include "skyrl/node.grpc.pb.h"
#include "tests/util/paths.h"
#include "tests/util/processes.h"

namespace skyrl::testing {
namespace {

// The head's liveness settings in this workload: a node is dead after 2 s without heartbeats.
constexpr int kHeartbeatMs = 500;
constexpr int kHeartbeatMisses = 4;
constexpr absl::Duration kDeathThreshold = absl::Milliseconds(kHeartbeatMs * kHeartbeatMisses);
// Cut off from the head, a worker keeps its actors on its peers' word this long after its
// last answer: 2 T, as the default's 10 s is of the default 5 s threshold.
constexpr int kHeadlessKeepMs = 2 * kHeartbeatMs * kHeartbeatMisses;
// Head and Redis restarts come this often in a long run (and once each in a short one).
constexpr absl::Duration kRestartEvery = absl::Minutes(5);

std::string ReadFile(const std::string& path, size_t tail = 0) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  if (tail > 0) {
    in.seekg(0, std::ios::end);
    std::streamoff size = in.tellg();
    in.seekg(size > std::streamoff(tail) ? size - std::streamoff(tail) : 0);
  }
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

template <typename F>
grpc::Status Authed(const std::string& token, F fn) {
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, token, absl::Seconds(5));
  return fn(&ctx);
}

}  // namespace

ChaosRun::ChaosRun(ChaosOptions options) : options_(std::move(options)), rng_(options_.seed) {}

ChaosRun::~ChaosRun() { ThawDue(/*all=*/true); }

std::map<std::string, std::string> ChaosRun::Env() const {
  // HOME: the head writes its token under it; every process of this cluster (and so every
  // actor process) carries it, which is how ActorProcesses tells ours from others.
  return {{"HOME", options_.dir}, {"SKYRL_TOKEN", ""}};
}

std::string ChaosRun::Token() const {
  std::ifstream in(options_.dir + "/.skyrl/token");
  std::string token;
  in >> token;
  return token;
}

absl::Status ChaosRun::StartHead() {
  if (head_port_ == 0) {
    absl::StatusOr<int> port = PickFreePort();
    if (!port.ok()) return port.status();
    head_port_ = *port;
    address_ = absl::StrCat("127.0.0.1:", head_port_);
  }
  SpawnOptions o;
  o.argv = {BinDir() + "/skyrl-head",
            "--port",
            std::to_string(head_port_),
            "--store",
            redis_->url(),
            "--heartbeat-period-ms",
            std::to_string(kHeartbeatMs),
            "--heartbeat-misses",
            std::to_string(kHeartbeatMisses),
            "--headless-keep-ms",
            std::to_string(kHeadlessKeepMs)};
  o.log_path = options_.dir + "/head.log";
  o.env_set = Env();
  absl::StatusOr<Subprocess> p = Subprocess::Start(o);
  if (!p.ok()) return p.status();
  head_ = std::move(*p);
  for (absl::Time deadline = absl::Now() + absl::Seconds(30); absl::Now() < deadline;) {
    if (!Token().empty() && ListNodes().ok()) return absl::OkStatus();
    if (!head_->running()) break;
    absl::SleepFor(absl::Milliseconds(50));
    head_->TryWait();
  }
  return absl::UnavailableError("the head did not start serving within 30 s; see head.log");
}

absl::Status ChaosRun::StartWorker() {
  std::string name = absl::StrCat("w", next_worker_++);
  SpawnOptions o;
  o.argv = {
      BinDir() + "/skyrl-worker", "--head", address_, "--resources", "CPU=4", "--labels", "name=" + name};
  o.log_path = options_.dir + "/" + name + ".log";
  o.env_set = Env();
  absl::StatusOr<Subprocess> p = Subprocess::Start(o);
  if (!p.ok()) return p.status();
  workers_.push_back(Worker{name, std::move(*p)});
  return absl::OkStatus();
}

absl::Status ChaosRun::StartDriver() {
  SpawnOptions o;
  o.argv = {BinDir() + "/skyrl-chaos-driver",
            "--address",
            address_,
            "--token",
            Token(),
            "--actors",
            std::to_string(options_.actors),
            "--threads",
            std::to_string(options_.driver_threads)};
  o.log_path = options_.dir + "/driver.log";
  o.env_set = Env();
  absl::StatusOr<Subprocess> p = Subprocess::Start(o);
  if (!p.ok()) return p.status();
  driver_ = std::move(*p);
  for (absl::Time deadline = absl::Now() + absl::Seconds(60); absl::Now() < deadline;) {
    if (ReadFile(options_.dir + "/driver.log").find("actors ready") != std::string::npos)
      return absl::OkStatus();
    if (driver_->TryWait()) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return absl::UnavailableError("the driver did not create its actors; see driver.log");
}

absl::StatusOr<std::vector<v1::NodeInfo>> ChaosRun::ListNodes() {
  auto stub = v1::NodeService::NewStub(rpc::MakeChannel(address_));
  v1::ListNodesReply reply;
  absl::Status s =
      rpc::FromGrpc(Authed(Token(), [&](grpc::ClientContext* c) { return stub->ListNodes(c, {}, &reply); }));
  if (!s.ok()) return s;
  return std::vector<v1::NodeInfo>(reply.nodes().begin(), reply.nodes().end());
}

absl::StatusOr<std::vector<v1::ActorInfo>> ChaosRun::ListActors() {
  auto stub = v1::ActorDirectory::NewStub(rpc::MakeChannel(address_));
  v1::ListActorsReply reply;
  absl::Status s =
      rpc::FromGrpc(Authed(Token(), [&](grpc::ClientContext* c) { return stub->ListActors(c, {}, &reply); }));
  if (!s.ok()) return s;
  return std::vector<v1::ActorInfo>(reply.actors().begin(), reply.actors().end());
}

std::map<std::string, std::vector<int>> ChaosRun::ActorProcesses() const {
  return ActorProcessesWithHome(options_.dir);
}

int64_t ChaosRun::DriverProgress() const {
  std::string tail = ReadFile(options_.dir + "/driver.log", 4096);
  size_t at = tail.rfind("progress calls=");
  if (at == std::string::npos) return -1;
  int64_t calls = -1;
  std::string digits;
  for (size_t i = at + 15; i < tail.size() && isdigit(static_cast<unsigned char>(tail[i])); ++i)
    digits += tail[i];
  if (!absl::SimpleAtoi(digits, &calls)) return -1;
  return calls;
}

void ChaosRun::DumpDriverStacks(const std::string& why) {
  std::string out = options_.dir + "/driver-stacks.txt";
  report_.problems.push_back(absl::StrCat(why, "; every thread's stack is in ", out));
  if (!driver_ || !driver_->running()) return;
  SpawnOptions o;
  o.argv = {"gdb", "-p", std::to_string(driver_->pid()), "-batch", "-ex", "thread apply all bt"};
  o.log_path = out;
  absl::StatusOr<Subprocess> gdb = Subprocess::Start(o);
  if (!gdb.ok()) {
    report_.problems.push_back(absl::StrCat("cannot run gdb for the stacks: ", gdb.status().message()));
    return;
  }
  if (!gdb->WaitFor(absl::Seconds(60))) gdb->Stop(absl::Seconds(1));
  std::fprintf(stderr, "---- driver stacks (%s) ----\n%s\n", why.c_str(),
               ReadFile(out).substr(0, 20000).c_str());
}

void ChaosRun::ThawDue(bool all) {
  const absl::Time now = absl::Now();
  for (auto it = frozen_actors_.begin(); it != frozen_actors_.end();) {
    if (all || it->second <= now) {
      kill(it->first, SIGCONT);
      it = frozen_actors_.erase(it);
    } else {
      ++it;
    }
  }
  for (Worker& w : workers_) {
    if (w.thaw != absl::InfiniteFuture() && (all || w.thaw <= now)) {
      w.process.Signal(SIGCONT).IgnoreError();
      w.thaw = absl::InfiniteFuture();
    }
  }
}

std::string ChaosRun::InjectFault(absl::Duration elapsed) {
  // Head and Redis restarts at a third and two thirds of a short run, then every five minutes.
  const absl::Duration head_at = std::min(options_.duration / 3, kRestartEvery / 2);
  const absl::Duration redis_at = std::min(options_.duration * 2 / 3, kRestartEvery);
  const int heads = report_.faults["head_kill"], redises = report_.faults["redis_kill"];
  std::string kind;
  if (options_.churn) {
    kind = heads == 0 || elapsed >= kRestartEvery * heads ? "head_kill" : "worker_kill";
  } else if (elapsed >= head_at + kRestartEvery * heads) {
    kind = "head_kill";
  } else if (elapsed >= redis_at + kRestartEvery * redises) {
    kind = "redis_kill";
  } else {
    static const char* kRotation[] = {"worker_kill", "actor_kill", "actor_freeze", "worker_freeze"};
    kind = kRotation[fault_index_++ % 4];
  }
  auto pick = [&](size_t n) { return size_t(rng_() % n); };
  std::string what;
  if (kind == "head_kill") {
    head_->Signal(SIGKILL).IgnoreError();
    head_->Wait();
    absl::Status s = StartHead();
    if (!s.ok()) report_.problems.push_back(absl::StrCat("head restart: ", s.message()));
    what = "head SIGKILLed and restarted on Redis";
  } else if (kind == "redis_kill") {
    redis_->Kill(SIGKILL);
    absl::SleepFor(absl::Seconds(3));
    absl::Status s = redis_->Restart();
    if (!s.ok()) report_.problems.push_back(absl::StrCat("redis restart: ", s.message()));
    what = "Redis SIGKILLed, restarted on its data 3 s later";
  } else if (kind == "worker_kill" || kind == "worker_freeze") {
    std::vector<size_t> awake;
    for (size_t i = 0; i < workers_.size(); ++i)
      if (workers_[i].thaw == absl::InfiniteFuture()) awake.push_back(i);
    if (awake.empty()) return "";
    const size_t index = awake[pick(awake.size())];
    Worker& w = workers_[index];
    if (kind == "worker_kill") {
      what = absl::StrCat("worker ", w.name, " SIGKILLed; a fresh worker started");
      w.process.Signal(SIGKILL).IgnoreError();
      w.process.Wait();
      workers_.erase(workers_.begin() + index);
      if (absl::Status s = StartWorker(); !s.ok())
        report_.problems.push_back(absl::StrCat("worker start: ", s.message()));
    } else {
      // Past the death threshold: the head restarts its actors elsewhere, and the worker comes
      // back with a node id the head has declared dead.
      absl::Duration frozen = kDeathThreshold + absl::Seconds(3);
      w.process.Signal(SIGSTOP).IgnoreError();
      w.thaw = absl::Now() + frozen;
      what = absl::StrCat("worker ", w.name, " SIGSTOPped for ", absl::FormatDuration(frozen));
    }
  } else {
    std::vector<std::pair<std::string, int>> candidates;
    for (const auto& [actor, pids] : ActorProcesses())
      for (int pid : pids)
        if (kind == "actor_kill" || !frozen_actors_.contains(pid)) candidates.emplace_back(actor, pid);
    if (candidates.empty()) return "";
    auto [actor, pid] = candidates[pick(candidates.size())];
    if (kind == "actor_kill") {
      kill(pid, SIGKILL);
      frozen_actors_.erase(pid);
      what = absl::StrCat("actor ", actor, " (pid ", pid, ") SIGKILLed");
    } else {
      absl::Duration frozen = absl::Seconds(2 + pick(7));
      kill(pid, SIGSTOP);
      frozen_actors_[pid] = absl::Now() + frozen;
      what = absl::StrCat("actor ", actor, " (pid ", pid, ") SIGSTOPped for ", absl::FormatDuration(frozen));
    }
  }
  ++report_.faults[kind];
  return what;
}

ChaosReport ChaosRun::Run() {
  auto fail = [&](const std::string& why) {
    report_.problems.push_back(why);
    return report_;
  };
  absl::StatusOr<std::unique_ptr<RedisServer>> redis = RedisServer::Start("", /*fsync_always=*/true);
  if (!redis.ok()) return fail(absl::StrCat("redis: ", redis.status().message()));
  redis_ = std::move(*redis);
  if (absl::Status s = StartHead(); !s.ok()) return fail(absl::StrCat("head: ", s.message()));
  for (int i = 0; i < options_.workers; ++i)
    if (absl::Status s = StartWorker(); !s.ok()) return fail(absl::StrCat("worker: ", s.message()));
  for (absl::Time deadline = absl::Now() + absl::Seconds(30);; absl::SleepFor(absl::Milliseconds(100))) {
    absl::StatusOr<std::vector<v1::NodeInfo>> nodes = ListNodes();
    int alive = 0;
    if (nodes.ok())
      for (const v1::NodeInfo& n : *nodes) alive += n.state() == v1::NODE_ALIVE;
    if (alive == options_.workers) break;
    if (absl::Now() > deadline) return fail("the workers did not all register within 30 s");
  }
  if (absl::Status s = StartDriver(); !s.ok()) return fail(std::string(s.message()));

  const absl::Time start = absl::Now();
  absl::Time next_fault = start + options_.fault_period;
  int64_t progress = -1;
  absl::Time progressed = start;
  std::ofstream faults(options_.dir + "/faults.log");
  while (absl::Now() - start < options_.duration) {
    absl::SleepFor(absl::Milliseconds(200));
    ThawDue(/*all=*/false);
    if (std::optional<ExitInfo> e = driver_->TryWait()) {
      report_.problems.push_back(absl::StrCat("the driver exited during the run: ", e->Describe()));
      break;
    }
    if (int64_t p = DriverProgress(); p != progress) {
      progress = p;
      progressed = absl::Now();
    } else if (absl::Now() - progressed > options_.stall) {
      DumpDriverStacks(absl::StrCat("the driver made no progress for ", absl::FormatDuration(options_.stall),
                                    " (stuck at ", progress, " calls)"));
      break;
    }
    if (absl::Now() >= next_fault) {
      std::string what = InjectFault(absl::Now() - start);
      faults << absl::FormatTime("%H:%M:%E3S ", absl::Now(), absl::LocalTimeZone()) << what << std::endl;
      // Long runs show where they are.
      std::printf("[%5.0fs] calls=%lld %s\n", absl::ToDoubleSeconds(absl::Now() - start), (long long)progress,
                  what.c_str());
      std::fflush(stdout);
      next_fault += options_.fault_period;
    }
  }
  ThawDue(/*all=*/true);

  // The driver stops calling, checks that every actor answers, and prints its summary.
  if (driver_->running()) {
    driver_->Signal(SIGTERM).IgnoreError();
    // Each actor's final call may take its whole retry budget (60 s) when it is down.
    if (!driver_->WaitFor(options_.stall + absl::Seconds(60))) {
      DumpDriverStacks("the driver did not finish within its final check");
      driver_->Signal(SIGKILL).IgnoreError();
      driver_->Wait();
    }
  }
  std::optional<ExitInfo> exit = driver_->TryWait();
  std::string log = ReadFile(options_.dir + "/driver.log");
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (!absl::ConsumePrefix(&line, "chaos ")) continue;
    report_.driver_summary = std::string(line);
    for (absl::string_view field : absl::StrSplit(line, ' ')) {
      std::pair<std::string, std::string> kv = absl::StrSplit(field, absl::MaxSplits('=', 1));
      int64_t v = 0;
      if (absl::SimpleAtoi(kv.second, &v)) report_.driver[kv.first] = v;
    }
  }
  if (report_.driver_summary.empty())
    report_.problems.push_back("the driver printed no summary; see driver.log");
  if (exit && !exit->ok())
    report_.problems.push_back(
        absl::StrCat("the driver ended with ", exit->Describe(), ": ", report_.driver_summary));
  CheckSettled(report_);
  return report_;
}

void ChaosRun::CheckSettled(ChaosReport& report) {
  // Within 60 s of the last fault the cluster is whole again.
  std::vector<std::string> problems;
  for (absl::Time deadline = absl::Now() + absl::Seconds(60);; absl::SleepFor(absl::Milliseconds(500))) {
    problems.clear();
    report.leaked_processes = report.missing_processes = 0;
    absl::StatusOr<std::vector<v1::ActorInfo>> actors = ListActors();
    absl::StatusOr<std::vector<v1::NodeInfo>> nodes = ListNodes();
    if (!actors.ok() || !nodes.ok()) {
      problems.push_back(absl::StrCat("the head does not answer: ",
                                      (actors.ok() ? nodes.status() : actors.status()).message()));
    } else {
      std::map<std::string, const v1::ActorInfo*> alive;
      int ours = 0;
      for (const v1::ActorInfo& a : *actors) {
        if (a.spec().name().rfind("chaos-", 0) == 0 && a.state() != v1::ACTOR_DEAD) ++ours;
        if (a.state() == v1::ACTOR_ALIVE) alive[a.actor_id()] = &a;
      }
      if (int(alive.size()) != options_.actors || ours != options_.actors)
        problems.push_back(absl::StrCat(alive.size(), " of ", options_.actors, " actors ALIVE"));
      // Processes: one per ALIVE actor, none for anything else.
      std::map<std::string, std::vector<int>> procs = ActorProcesses();
      for (const auto& [actor, pids] : procs) {
        int expected = alive.contains(actor) ? 1 : 0;
        if (int(pids.size()) > expected) {
          report.leaked_processes += int(pids.size()) - expected;
          problems.push_back(absl::StrCat("actor ", actor, " has ", pids.size(), " processes (pids ",
                                          absl::StrJoin(pids, ","), "); the cluster accounts for ",
                                          expected));
        }
      }
      for (const auto& [actor, info] : alive) {
        if (!procs.contains(actor)) {
          ++report.missing_processes;
          problems.push_back(
              absl::StrCat("actor ", actor, " is ALIVE on ", info->node_id(), " with no process"));
        }
      }
      // Resources: on each alive node, total - available = what its ALIVE actors hold.
      for (const v1::NodeInfo& n : *nodes) {
        if (n.state() != v1::NODE_ALIVE) continue;
        std::map<std::string, double> held;
        for (const auto& [id, a] : alive)
          if (a->node_id() == n.node_id())
            for (const auto& [kind, amount] : a->spec().resources()) held[kind] += amount;
        for (const auto& [kind, total] : n.resources_total()) {
          auto free = n.resources_available().find(kind);
          double used = total - (free == n.resources_available().end() ? 0 : free->second);
          double want = held.contains(kind) ? held[kind] : 0;
          if (std::abs(used - want) > 1e-6)
            problems.push_back(absl::StrCat("node ", n.node_id(), " (", n.address(), "): ", kind, " used ",
                                            used, ", its live actors hold ", want));
        }
      }
    }
    if (problems.empty() || absl::Now() > deadline) break;
  }
  for (std::string& p : problems) report.problems.push_back(std::move(p));
}

}  // namespace skyrl::testing
