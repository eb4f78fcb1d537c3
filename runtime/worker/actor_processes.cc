#include "runtime/worker/actor_processes.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <future>
#include <set>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/common/actor_env.h"
#include "runtime/common/lease.h"
#include "runtime/common/log_tail.h"
#include "runtime/common/logging.h"

namespace skyrl::worker {
namespace {
// How long a kill of a start that had not arrived keeps refusing it: far longer than any
// start request is in flight (its deadline is the head's start timeout).
constexpr absl::Duration kRefusalsKept = absl::Minutes(10);
constexpr size_t kMaxRefusals = 16384;
}  // namespace

std::string CudaVisibleDevices(const std::vector<int>& gpu_ids) { return absl::StrJoin(gpu_ids, ","); }

bool NoSetCudaVisibleDevices(const std::map<std::string, std::string>& env) {
  if (auto it = env.find(actor_env::kNoSetCudaVisibleDevices); it != env.end()) return !it->second.empty();
  const char* own = std::getenv(actor_env::kNoSetCudaVisibleDevices);
  return own != nullptr && *own != '\0';
}

std::string ActorExit::Describe() const {
  std::string out = exit.Describe();
  if (!fenced.empty()) absl::StrAppend(&out, " (fenced: ", fenced, ")");
  if (killed_by_request) absl::StrAppend(&out, " (killed by request)");
  if (!last_lines.empty())
    absl::StrAppend(&out, "; last lines of ", log_path, ":\n  ", absl::StrJoin(last_lines, "\n  "));
  return out;
}

class ActorProcesses::Spawner {
 public:
  Spawner() : thread_([this] { Run(); }) {}
  ~Spawner() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    thread_.join();
  }
  // Runs Subprocess::Start on the spawner thread and returns its result.
  absl::StatusOr<Subprocess> Spawn(const SpawnOptions& o) {
    std::promise<absl::StatusOr<Subprocess>> done;
    std::future<absl::StatusOr<Subprocess>> result = done.get_future();
    {
      absl::MutexLock lock(&mu_);
      queue_.push_back({&o, &done});
    }
    return result.get();
  }

 private:
  struct Request {
    const SpawnOptions* options;
    std::promise<absl::StatusOr<Subprocess>>* done;
  };
  void Run() {
    while (true) {
      Request r;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](Spawner* s)
                 ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu_) { return s->stopping_ || !s->queue_.empty(); },
            this));
        if (queue_.empty()) return;  // stopping, nothing left
        r = queue_.front();
        queue_.pop_front();
      }
      r.done->set_value(Subprocess::Start(*r.options));
    }
  }
  absl::Mutex mu_;
  std::deque<Request> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

ActorProcesses::ActorProcesses(ActorProcessesOptions options)
    : spawner_(std::make_unique<Spawner>()), options_(std::move(options)) {
  if (!options_.fork_server_host.empty()) {
    if (absl::Status s = SetChildSubreaper(); !s.ok()) {
      spdlog::warn("no fork server for Python actors (each starts a fresh interpreter): {}", s.message());
    } else {
      absl::MutexLock lock(&mu_);
      subreaper_ = true;
    }
  }
  bool prestart;
  {
    absl::MutexLock lock(&mu_);
    prestart = subreaper_;
  }
  if (prestart) {
    // Prestarted: its imports run while the worker registers, not during the first start.
    absl::MutexLock lock(&launch_mu_);
    StartForkServerLocked();
  }
  reaper_ = std::thread([this] { ReapLoop(); });
}

void ActorProcesses::StartForkServerLocked() {
  fork_server_started_ = absl::Now();
  {
    absl::MutexLock lock(&mu_);
    forked_at_server_start_ = forked_;
  }
  absl::StatusOr<std::unique_ptr<ForkServer>> server =
      ForkServer::Start({.argv = {options_.fork_server_host},
                         .env = options_.fork_server_env,
                         .log_path = absl::StrCat(options_.log_dir, "/fork-server.log")});
  if (!server.ok()) {
    spdlog::warn("fork server for Python actors did not start (they start fresh interpreters): {}",
                 server.status().message());
    fork_server_.reset();
    return;
  }
  fork_server_ = std::move(*server);
  absl::MutexLock lock(&mu_);
  fork_server_pid_ = fork_server_->pid();
}

absl::StatusOr<Subprocess> ActorProcesses::StartProcess(const SpawnOptions& o,
                                                        const std::map<std::string, std::string>& env) {
  bool use_server;
  {
    absl::MutexLock lock(&mu_);
    use_server =
        subreaper_ && !o.argv.empty() && o.argv[0] == options_.fork_server_host && ForkServerSuits(env);
    if (use_server) ++forks_in_flight_;
  }
  if (!use_server) return spawner_->Spawn(o);
  if (fork_server_ == nullptr || !fork_server_->usable()) {
    // A failed server is replaced at once when it had worked, else at most every few seconds
    // (one that cannot start at all must not cost every launch a start).
    bool worked;
    {
      absl::MutexLock lock(&mu_);
      worked = forked_ > forked_at_server_start_;
    }
    if (worked || absl::Now() - fork_server_started_ > absl::Seconds(5)) {
      fork_server_.reset();
      StartForkServerLocked();
    }
  }
  absl::StatusOr<pid_t> pid = fork_server_ != nullptr && fork_server_->usable()
                                  ? fork_server_->Fork(o)
                                  : absl::UnavailableError("the fork server is not running");
  {
    absl::MutexLock lock(&mu_);
    --forks_in_flight_;
    if (pid.ok()) {
      ++forked_;
      return Subprocess::Adopt(*pid, /*own_group=*/true);
    }
    ++fork_fallbacks_;
  }
  spdlog::warn("actor started without the fork server: {}", pid.status().message());
  return spawner_->Spawn(o);
}

ActorProcesses::~ActorProcesses() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  reaper_.join();
  absl::MutexLock lock(&mu_);
  children_.clear();  // Subprocess's destructor kills and reaps
}

std::string ActorProcesses::LogPath(const ActorId& id) const {
  return absl::StrCat(options_.log_dir, "/", id.ToString(), ".log");
}

absl::Status ActorProcesses::Launch(const ActorLaunch& launch) {
  SpawnOptions o;
  o.argv = launch.argv;
  o.env_set = launch.env;
  // The devices (actor_env.h): exactly its GPUs, "" without, unless Ray's switch says the
  // actor manages its own (then its env_vars' value, or the node's, stands). Its assignment
  // is in SKYRL_GPU_IDS either way (get_gpu_ids()).
  const std::string assigned = CudaVisibleDevices(launch.gpu_ids);
  o.env_set[actor_env::kGpuIds] = assigned;
  std::string warning;
  if (!NoSetCudaVisibleDevices(launch.env)) {
    if (auto own = launch.env.find(actor_env::kCudaVisibleDevices);
        own != launch.env.end() && own->second != assigned)
      warning = absl::StrCat("skyrl-worker: CUDA_VISIBLE_DEVICES=", own->second,
                             " from the actor's env_vars is replaced by the GPUs it was given (\"", assigned,
                             "\"); set ", actor_env::kNoSetCudaVisibleDevices, "=1 to keep it\n");
    o.env_set[actor_env::kCudaVisibleDevices] = assigned;
  }
  o.env_set[actor_env::kActorId] = launch.actor_id.ToString();
  // The actor host ties its life to this process (it watches for re-parenting): a worker killed with
  // SIGKILL leaves no orphaned actors holding GPUs.
  o.env_set[actor_env::kWorkerPid] = std::to_string(getpid());
  // And it stops itself when the lease this worker renews on reaching the head runs out.
  if (!options_.lease_path.empty()) o.env_set[actor_env::kActorLease] = options_.lease_path;
  o.log_path = LogPath(launch.actor_id);
  if (!warning.empty()) {
    // The first line of the actor's log (which the process appends to).
    if (std::FILE* f = std::fopen(o.log_path.c_str(), "a")) {
      std::fputs(warning.c_str(), f);
      std::fclose(f);
    }
  }
  o.working_dir = launch.working_dir;
  absl::MutexLock launching(&launch_mu_);
  auto refused = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    if (auto r = refused_.find(launch.actor_id);
        launch.incarnation > 0 && r != refused_.end() && r->second.incarnation >= launch.incarnation)
      return absl::AbortedError(absl::StrCat("actor ", launch.actor_id.ToString(), ": start ",
                                             launch.incarnation, " was stopped before it began here (start ",
                                             r->second.incarnation, " was killed)"));
    return absl::OkStatus();
  };
  {
    absl::MutexLock lock(&mu_);
    if (children_.contains(launch.actor_id))
      return absl::AlreadyExistsError(
          absl::StrCat("actor ", launch.actor_id.ToString(), " already runs on this node"));
    if (absl::Status s = refused(); !s.ok()) return s;
  }
  absl::StatusOr<Subprocess> p = StartProcess(o, launch.env);
  if (!p.ok())
    return absl::Status(p.status().code(),
                        absl::StrCat("actor ", launch.actor_id.ToString(), ": ", p.status().message()));
  absl::MutexLock lock(&mu_);
  // A kill of this start that came while it started (Kill found nothing to signal yet).
  if (absl::Status s = refused(); !s.ok()) {
    p->Signal(SIGKILL).IgnoreError();
    p->Wait();
    return s;
  }
  auto visible = o.env_set.find(actor_env::kCudaVisibleDevices);
  spdlog::info(
      "actor {} started as pid {} with CUDA_VISIBLE_DEVICES={}", launch.actor_id.ToString(), p->pid(),
      visible != o.env_set.end() ? visible->second
                                 : "(its own: " + std::string(actor_env::kNoSetCudaVisibleDevices) + ")");
  Child child{std::move(*p)};
  child.gpu_ids = launch.gpu_ids;
  child.incarnation = launch.incarnation;
  children_.emplace(launch.actor_id, std::move(child));
  return absl::OkStatus();
}

void ActorProcesses::AwaitStopped(const ActorId& id, int64_t incarnation, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto old = children_.find(id);
  if (old != children_.end()) {
    Child& c = old->second;
    // An older start the head has moved on from (its kill may still be on the way).
    const bool superseded = incarnation > 0 && c.incarnation > 0 && c.incarnation < incarnation;
    // Running as the current start (no stop asked, not fenced): Launch says so.
    if (!superseded && !c.kill_requested && c.fenced.empty()) return;
    if (superseded && c.fenced.empty()) c.kill_requested = true;
    c.process.Signal(SIGKILL).IgnoreError();
  }
  auto gone = [this, &id]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return !children_.contains(id) && !reporting_.contains(id);
  };
  mu_.AwaitWithTimeout(absl::Condition(&gone), timeout);
}

void ActorProcesses::Refuse(const ActorId& id, int64_t incarnation) {
  const absl::Time now = absl::Now();
  if (refused_.size() >= 1024) {
    absl::erase_if(refused_, [&](const auto& r) { return now - r.second.at > kRefusalsKept; });
    // A burst of kills: the older half goes (their starts are long settled, most likely).
    if (refused_.size() >= kMaxRefusals) {
      std::vector<absl::Time> times;
      for (const auto& [actor, r] : refused_) times.push_back(r.at);
      std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
      const absl::Time median = times[times.size() / 2];
      absl::erase_if(refused_, [&](const auto& r) { return r.second.at < median; });
    }
  }
  Refusal& r = refused_[id];
  r.incarnation = std::max(r.incarnation, incarnation);
  r.at = now;
}

absl::Status ActorProcesses::Kill(const ActorId& id, absl::Duration grace, int64_t incarnation) {
  absl::MutexLock lock(&mu_);
  // That start, or an older one, may yet arrive (a request still on its way, or before its
  // launch): refused (Launch).
  if (incarnation > 0) Refuse(id, incarnation);
  auto it = children_.find(id);
  if (it == children_.end())
    return absl::NotFoundError(absl::StrCat("actor ", id.ToString(), " does not run on this node"));
  if (incarnation > 0 && it->second.incarnation > incarnation)
    return absl::NotFoundError(absl::StrCat("actor ", id.ToString(), " runs its start ",
                                            it->second.incarnation, " here, newer than start ", incarnation,
                                            " to stop"));
  it->second.kill_requested = true;
  it->second.kill_deadline = absl::Now() + grace;
  return it->second.process.Signal(SIGTERM);
}

int ActorProcesses::Fence(const std::string& reason) {
  absl::MutexLock lock(&mu_);
  int killed = 0;
  for (auto& [id, child] : children_) {
    if (!child.fenced.empty() || !child.process.running()) continue;
    // The reason first, so that the log's last lines (the exit report) say it.
    if (FILE* log = std::fopen(LogPath(id).c_str(), "a")) {
      std::fprintf(log, "skyrl-worker: fencing this actor (SIGKILL): %s\n", reason.c_str());
      std::fclose(log);
    }
    child.fenced = reason;
    child.process.Signal(SIGKILL).IgnoreError();
    ++killed;
  }
  return killed;
}

bool ActorProcesses::Runs(const ActorId& id, int64_t incarnation) const {
  absl::MutexLock lock(&mu_);
  auto it = children_.find(id);
  return it != children_.end() && it->second.incarnation <= incarnation;
}

std::vector<ActorId> ActorProcesses::Running() const {
  absl::MutexLock lock(&mu_);
  std::vector<ActorId> out;
  for (const auto& [id, child] : children_) out.push_back(id);
  std::sort(out.begin(), out.end());
  return out;
}

int64_t ActorProcesses::forked() const {
  absl::MutexLock lock(&mu_);
  return forked_;
}

int64_t ActorProcesses::fork_fallbacks() const {
  absl::MutexLock lock(&mu_);
  return fork_fallbacks_;
}

void ActorProcesses::ReapOrphans() {
  if (!subreaper_ || forks_in_flight_ > 0) return;
  while (true) {
    siginfo_t info{};
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) return;
    const pid_t pid = info.si_pid;
    if (pid == fork_server_pid_) return;  // its owner reaps it
    for (const auto& [id, child] : children_)
      if (child.process.pid() == pid) return;  // the loop above reaps it, with its report
    ::waitpid(pid, nullptr, WNOHANG);
  }
}

std::vector<std::pair<ActorId, pid_t>> ActorProcesses::RunningPids() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<ActorId, pid_t>> out;
  for (const auto& [id, child] : children_) out.emplace_back(id, child.process.pid());
  std::sort(out.begin(), out.end());
  return out;
}

int ActorProcesses::GpusInUse() const {
  absl::MutexLock lock(&mu_);
  std::set<int> used;
  for (const auto& [id, child] : children_) used.insert(child.gpu_ids.begin(), child.gpu_ids.end());
  return static_cast<int>(used.size());
}

void ActorProcesses::ReapLoop() {
  while (true) {
    std::vector<ActorExit> exits;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      absl::Time now = absl::Now();
      for (auto it = children_.begin(); it != children_.end();) {
        Child& child = it->second;
        std::optional<ExitInfo> exit = child.process.TryWait();
        if (!exit) {
          if (child.kill_requested && now >= child.kill_deadline) {
            child.process.Signal(SIGKILL).IgnoreError();
            child.kill_deadline = absl::InfiniteFuture();
          }
          ++it;
          continue;
        }
        ActorExit report{it->first, *exit,        child.kill_requested, LogPath(it->first),
                         {},        child.fenced, child.incarnation};
        if (report.fenced.empty() && !options_.lease_path.empty() && !exit->signaled &&
            exit->exit_code == kLeaseRanOutExitCode)
          report.fenced =
              "it stopped itself: this worker did not renew its lease in time (it could not reach "
              "the head, or was frozen or stalled), and the head restarts it elsewhere";
        exits.push_back(std::move(report));
        ++reporting_[it->first];
        children_.erase(it++);
      }
      ReapOrphans();
    }
    // Outside the lock: reading logs and the callback may take time, and may call Launch.
    for (ActorExit& e : exits) {
      e.last_lines = TailLines(e.log_path, options_.tail_lines);
      spdlog::info("actor {} exited: {}", e.actor_id.ToString(), e.exit.Describe());
      if (options_.on_exit) options_.on_exit(e);
    }
    if (!exits.empty()) {
      absl::MutexLock lock(&mu_);
      for (const ActorExit& e : exits)
        if (auto r = reporting_.find(e.actor_id); r != reporting_.end() && --r->second == 0)
          reporting_.erase(r);
    }
    absl::SleepFor(options_.poll_period);
  }
}

}  // namespace skyrl::worker
