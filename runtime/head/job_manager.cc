#include "runtime/head/job_manager.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "runtime/common/ids.h"
#include "runtime/common/job_metrics_keys.h"
#include "runtime/head/kv_service.h"
#include "runtime/common/logging.h"
#include "runtime/common/subprocess.h"

namespace skyrl::head {
namespace fs = std::filesystem;
namespace {

constexpr int kMaxArgs = 256;
constexpr size_t kMaxArgBytes = 64 * 1024;
constexpr size_t kMaxEnv = 256;

// True when `pid` is a process started for `job_id` (its environment says so): a pid from
// the store may have been reused by an unrelated process since.
bool IsDriverOf(int pid, const std::string& job_id) {
  if (pid <= 0) return false;
  std::ifstream in(absl::StrCat("/proc/", pid, "/environ"), std::ios::binary);
  std::stringstream env;
  env << in.rdbuf();
  std::string want = absl::StrCat("SKYRL_JOB_ID=", job_id);
  std::string all = env.str();
  for (size_t start = 0; start < all.size();) {
    size_t end = all.find('\0', start);
    if (end == std::string::npos) end = all.size();
    if (all.compare(start, end - start, want) == 0) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace

bool JobManager::Ended(v1::JobState s) {
  return s == v1::JOB_SUCCEEDED || s == v1::JOB_FAILED || s == v1::JOB_STOPPED;
}

absl::Status ValidateJobSpec(v1::JobSpec& spec) {
  if (spec.submission_id().empty()) spec.set_submission_id(JobId::Random().ToString());
  if (absl::Status s = ValidateName("spec.submission_id", spec.submission_id()); !s.ok()) return s;
  if (spec.submission_id() == "audit.log")
    return absl::InvalidArgumentError("spec.submission_id: \"audit.log\" is reserved (the head's audit log)");
  if (spec.entrypoint_size() == 0)
    return absl::InvalidArgumentError("spec.entrypoint: give the command to run after --");
  if (spec.entrypoint_size() > kMaxArgs)
    return absl::InvalidArgumentError(absl::StrCat("spec.entrypoint: at most ", kMaxArgs, " arguments"));
  for (int i = 0; i < spec.entrypoint_size(); ++i) {
    const std::string& a = spec.entrypoint(i);
    if (a.size() > kMaxArgBytes || a.find('\0') != std::string::npos)
      return absl::InvalidArgumentError(
          absl::StrCat("spec.entrypoint[", i, "]: longer than 64 KiB or holds NUL"));
  }
  if (spec.entrypoint(0).empty()) return absl::InvalidArgumentError("spec.entrypoint[0]: empty command");
  if (spec.env_size() > int(kMaxEnv))
    return absl::InvalidArgumentError(absl::StrCat("spec.env: at most ", kMaxEnv, " variables"));
  for (const auto& [k, v] : spec.env()) {
    if (!IsEnvVarName(k))
      return absl::InvalidArgumentError(
          absl::StrCat("spec.env: \"", k.substr(0, 64), "\" is not a variable name"));
    if (k == "SKYRL_TOKEN" || k == "SKYRL_ADDRESS" || k == "SKYRL_JOB_ID")
      return absl::InvalidArgumentError(absl::StrCat("spec.env: ", k, " is set by the head"));
    if (v.size() > kMaxArgBytes || v.find('\0') != std::string::npos)
      return absl::InvalidArgumentError(absl::StrCat("spec.env[", k, "]: longer than 64 KiB or holds NUL"));
  }
  if (spec.submitter().size() > 256)
    return absl::InvalidArgumentError("spec.submitter: longer than 256 characters");
  return absl::OkStatus();
}

JobManager::JobManager(store::Store& store, ActorManager& actors, PlacementGroupManager& groups,
                       const Clock& clock, JobManagerOptions options)
    : store_(store),
      actors_(actors),
      groups_(groups),
      clock_(clock),
      options_(std::move(options)),
      wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      reaper_([this] { Reap(); }),
      cleaner_([this] { Clean(); }) {
  if (wake_fd_ < 0)
    spdlog::warn("jobs: no eventfd (errno {}): the reaper looks for ended drivers every 100 ms", errno);
}

JobManager::~JobManager() {
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
    for (const auto& [id, w] : watched_) kill(-w.process.pid(), SIGTERM);
    // Drivers get a few seconds to leave; the reaper records them.
    auto none_running = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return watched_.empty(); };
    mu_.AwaitWithTimeout(absl::Condition(&none_running), absl::Seconds(3));
    for (const auto& [id, w] : watched_) kill(-w.process.pid(), SIGKILL);  // not reaped yet
    stop_reaper_ = true;
  }
  Wake();
  reaper_.join();
  {
    absl::MutexLock lock(&mu_);
    stop_cleaner_ = true;
  }
  cleaner_.join();
  if (wake_fd_ >= 0) close(wake_fd_);
}

void JobManager::Wake() {
  if (wake_fd_ < 0) return;
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));  // a full counter wakes it too
}

void JobManager::Reap() {
  std::vector<pollfd> fds;
  while (true) {
    fds.clear();
    if (wake_fd_ >= 0) fds.push_back(pollfd{wake_fd_, POLLIN, 0});
    bool polled = wake_fd_ < 0;
    {
      absl::MutexLock lock(&mu_);
      if (stop_reaper_ && watched_.empty()) return;
      for (const auto& [id, w] : watched_) {
        if (w.pidfd >= 0) {
          fds.push_back(pollfd{w.pidfd, POLLIN, 0});
        } else {
          polled = true;
        }
      }
    }
    if (poll(fds.data(), fds.size(), polled ? 100 : -1) < 0 && errno != EINTR) {
      spdlog::warn("jobs: the reaper's poll failed (errno {}); looking again in 100 ms", errno);
      absl::SleepFor(absl::Milliseconds(100));
    }
    if (wake_fd_ >= 0) {
      uint64_t count = 0;
      [[maybe_unused]] ssize_t n = read(wake_fd_, &count, sizeof(count));  // EAGAIN when not woken
    }
    {
      absl::MutexLock lock(&mu_);
      for (auto it = watched_.begin(); it != watched_.end();) {
        std::optional<ExitInfo> exit = it->second.process.TryWait();
        if (!exit) {
          ++it;
          continue;
        }
        RecordEnd(it->first, *exit);
        if (it->second.pidfd >= 0) close(it->second.pidfd);
        cleaning_.insert(it->first);
        to_clean_.push_back(it->first);
        it = watched_.erase(it);
      }
    }
  }
}

void JobManager::Clean() {
  auto has_work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !to_clean_.empty() || stop_cleaner_; };
  absl::MutexLock lock(&mu_);
  while (true) {
    mu_.Await(absl::Condition(&has_work));
    if (to_clean_.empty()) return;  // stopping, and nothing left
    const std::string id = std::move(to_clean_.front());
    to_clean_.pop_front();
    mu_.Unlock();
    CleanUp(id);
    mu_.Lock();
    cleaning_.erase(id);
  }
}

void JobManager::RecordEnd(const std::string& id, const ExitInfo& exit) {
  v1::JobInfo& j = jobs_[id];
  j.set_pid(0);
  j.set_ended_unix_ms(absl::ToUnixMillis(clock_.Now()));
  j.set_exit_code(exit.signaled ? 0 : exit.exit_code);
  j.set_signal(exit.signaled ? exit.signal : 0);
  if (stop_requested_[id]) {
    j.set_state(v1::JOB_STOPPED);
    j.set_message(absl::StrCat("stopped by the user (", exit.Describe(), ")"));
  } else if (shutting_down_) {
    j.set_state(v1::JOB_FAILED);
    j.set_message(absl::StrCat("stopped with the head (", exit.Describe(), ")"));
  } else {
    j.set_state(exit.ok() ? v1::JOB_SUCCEEDED : v1::JOB_FAILED);
    j.set_message(exit.Describe());
  }
  Persist(j);
  spdlog::info("job {} {}: {}", id, v1::JobState_Name(j.state()), j.message());
}

absl::Status JobManager::Persist(const v1::JobInfo& info) {
  absl::Status s = store_.Put(kJobsTable, info.job_id(), info.SerializeAsString());
  if (!s.ok())
    spdlog::error("job {}: the store did not take its {} record: {}", info.job_id(),
                  v1::JobState_Name(info.state()), s.message());
  return s;
}

absl::Status JobManager::Recover() {
  absl::StatusOr<std::vector<store::Entry>> entries = store_.Scan(kJobsTable, "");
  if (!entries.ok()) return entries.status();
  std::vector<std::string> lost;
  {
    absl::MutexLock lock(&mu_);
    for (const store::Entry& e : *entries) {
      v1::JobInfo info;
      if (!info.ParseFromString(e.value)) {
        spdlog::error("jobs table: skipping unreadable entry {}", store::Where(kJobsTable, e.key));
        continue;
      }
      if (!Ended(info.state())) {
        bool alive = IsDriverOf(info.pid(), info.job_id());
        if (alive) kill(-info.pid(), SIGKILL);
        info.set_state(v1::JOB_FAILED);
        info.set_message(alive ? "driver lost: the head that ran it stopped; its leftover driver was killed"
                               : "driver lost: it died with the head that ran it");
        info.set_ended_unix_ms(absl::ToUnixMillis(clock_.Now()));
        info.set_pid(0);
        Persist(info);
        lost.push_back(info.job_id());
      }
      jobs_[info.job_id()] = std::move(info);
    }
  }
  for (const std::string& id : lost) CleanUp(id);
  spdlog::info("recovered {} jobs from the store ({} lost with the previous head)", entries->size(),
               lost.size());
  return absl::OkStatus();
}

void JobManager::Audit(const v1::JobInfo& info) {
  nlohmann::json j;
  j["time_unix_ms"] = info.submitted_unix_ms();
  j["job_id"] = info.job_id();
  j["submitter"] = info.spec().submitter();
  j["peer"] = info.peer();
  j["entrypoint"] =
      std::vector<std::string>(info.spec().entrypoint().begin(), info.spec().entrypoint().end());
  std::vector<std::string> env_names;
  for (const auto& [k, v] : info.spec().env()) env_names.push_back(k);
  std::sort(env_names.begin(), env_names.end());
  j["env_names"] = env_names;
  j["working_dir_bytes"] = info.working_dir_bytes();
  std::string line = j.dump();
  std::ofstream(fs::path(options_.jobs_dir) / "audit.log", std::ios::app) << line << "\n";
  spdlog::info("audit: job submitted: {}", line);
}

absl::StatusOr<v1::JobInfo> JobManager::Submit(v1::JobSpec spec, const std::string& archive,
                                               const std::string& peer) {
  if (absl::Status s = ValidateJobSpec(spec); !s.ok()) return s;
  if (!spec.has_working_dir() && !archive.empty())
    return absl::InvalidArgumentError("spec.has_working_dir: an archive was sent without it");
  std::string id = spec.submission_id();
  v1::JobInfo info;
  info.set_job_id(id);
  *info.mutable_spec() = spec;
  info.set_state(v1::JOB_PENDING);
  info.set_submitted_unix_ms(absl::ToUnixMillis(clock_.Now()));
  info.set_peer(peer);
  info.set_working_dir_bytes(int64_t(archive.size()));
  fs::path dir = fs::path(options_.jobs_dir) / id;
  info.set_log_path((dir / "driver.log").string());
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return absl::UnavailableError("the head is shutting down");
    if (jobs_.contains(id))
      return absl::AlreadyExistsError(absl::StrCat("a job with submission id ", id, " exists"));
    if (absl::Status s = Persist(info); !s.ok()) return s;
    jobs_[id] = info;
  }
  Audit(info);

  // Unpack and start outside the lock; the id is reserved.
  auto fail = [&](const std::string& why) -> absl::StatusOr<v1::JobInfo> {
    absl::MutexLock lock(&mu_);
    v1::JobInfo& j = jobs_[id];
    j.set_state(v1::JOB_FAILED);
    j.set_message(why);
    j.set_ended_unix_ms(absl::ToUnixMillis(clock_.Now()));
    Persist(j);
    return j;
  };
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail(absl::StrCat("cannot create ", dir.string(), ": ", ec.message()));
  fs::path cwd = dir;
  if (spec.has_working_dir()) {
    cwd = dir / "working_dir";
    if (absl::Status s = archive::UnpackTarGz(archive, cwd.string(), options_.limits); !s.ok()) {
      // A refused archive is the caller's error: say so and keep nothing.
      {
        absl::MutexLock lock(&mu_);
        jobs_.erase(id);
        if (absl::StatusOr<bool> d = store_.Delete(kJobsTable, id); !d.ok())
          spdlog::error("job {}: refused, but the store kept its record: {}", id, d.status().message());
      }
      fs::remove_all(dir, ec);
      return s;
    }
  }
  SpawnOptions o;
  o.argv = {spec.entrypoint().begin(), spec.entrypoint().end()};
  o.env_set = {spec.env().begin(), spec.env().end()};
  o.env_set["SKYRL_ADDRESS"] = options_.head_address;
  o.env_set["SKYRL_TOKEN"] = options_.token;
  o.env_set["SKYRL_JOB_ID"] = id;
  if (!options_.python_path.empty()) {
    auto user = o.env_set.find("PYTHONPATH");
    const char* inherited = std::getenv("PYTHONPATH");
    std::string rest = user != o.env_set.end() ? user->second : (inherited ? inherited : "");
    o.env_set["PYTHONPATH"] =
        rest.empty() ? options_.python_path : absl::StrCat(options_.python_path, ":", rest);
  }
  // The SDK gives the driver's actors and tasks this folder as their default working_dir.
  if (spec.has_working_dir()) o.env_set["SKYRL_WORKING_DIR"] = cwd.string();
  o.log_path = info.log_path();
  o.working_dir = cwd.string();
  o.new_process_group = true;
  absl::StatusOr<Subprocess> p = Subprocess::Start(o);
  if (!p.ok()) return fail(absl::StrCat("the driver could not start: ", p.status().message()));
  absl::MutexLock lock(&mu_);
  v1::JobInfo& j = jobs_[id];
  j.set_state(v1::JOB_RUNNING);
  j.set_pid(p->pid());
  j.set_started_unix_ms(absl::ToUnixMillis(clock_.Now()));
  Persist(j);
  spdlog::info("job {} RUNNING: pid {}, log {}", id, p->pid(), j.log_path());
  // The reaper waits for it from here on (a pidfd, close-on-exec: readable once it exits).
  int pidfd = -1;
#ifdef SYS_pidfd_open
  pidfd = static_cast<int>(syscall(SYS_pidfd_open, p->pid(), 0));
#endif
  watched_.emplace(id, Watched{std::move(*p), pidfd});
  Wake();
  return j;
}

void JobManager::CleanUp(const std::string& job_id) {
  std::string reason = absl::StrCat("its job ", job_id, " ended");
  actors_.KillJob(job_id, reason);
  groups_.RemoveJobGroups(job_id);
}

absl::StatusOr<v1::JobInfo> JobManager::Get(const std::string& job_id) const {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", job_id));
  return it->second;
}

std::vector<v1::JobInfo> JobManager::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::JobInfo> out;
  for (const auto& [id, j] : jobs_) out.push_back(j);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.submitted_unix_ms() != b.submitted_unix_ms() ? a.submitted_unix_ms() < b.submitted_unix_ms()
                                                          : a.job_id() < b.job_id();
  });
  return out;
}

absl::StatusOr<v1::JobInfo> JobManager::Stop(const std::string& job_id, absl::Duration grace) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", job_id));
  // The job may end, and even be deleted, while this waits: look it up again each time.
  auto ended = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto j = jobs_.find(job_id);
    return j == jobs_.end() || Ended(j->second.state());
  };
  auto cleaned = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ended() && !cleaning_.contains(job_id); };
  if (!Ended(it->second.state())) {
    const int pid = it->second.pid();
    if (pid <= 0)
      return absl::FailedPreconditionError(absl::StrCat("job ", job_id, " has no driver process yet"));
    stop_requested_[job_id] = true;
    kill(-pid, SIGTERM);
    mu_.AwaitWithTimeout(absl::Condition(&ended), grace);
    if (!ended()) {
      // Not recorded ended, so not reaped: the group is still the driver's.
      kill(-pid, SIGKILL);
      mu_.AwaitWithTimeout(absl::Condition(&ended), absl::Seconds(10));
    }
  }
  // Its actors and groups go too before this answers (the workers' kills have deadlines).
  mu_.AwaitWithTimeout(absl::Condition(&cleaned), absl::Seconds(60));
  auto j = jobs_.find(job_id);
  if (j == jobs_.end())
    return absl::NotFoundError(absl::StrCat("job ", job_id, " was deleted while it stopped"));
  return j->second;
}

absl::Status JobManager::Delete(const std::string& job_id) {
  {
    absl::MutexLock lock(&mu_);
    // Its end is recorded: wait for the rest.
    auto cleaned = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !cleaning_.contains(job_id); };
    mu_.Await(absl::Condition(&cleaned));
    auto it = jobs_.find(job_id);
    if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("no job ", job_id));
    if (!Ended(it->second.state()))
      return absl::FailedPreconditionError(
          absl::StrCat("job ", job_id, " is ", v1::JobState_Name(it->second.state()), ": stop it first"));
    if (absl::StatusOr<bool> s = store_.Delete(kJobsTable, job_id); !s.ok()) return s.status();
    jobs_.erase(it);
    stop_requested_.erase(job_id);
  }
  std::error_code ec;
  fs::remove_all(fs::path(options_.jobs_dir) / job_id, ec);
  // The job's step metrics (job_metrics_keys.h) go with it; what cannot be read now stays.
  if (absl::StatusOr<std::vector<store::Entry>> metrics = store_.Scan(kKvTable, JobMetricsPrefix(job_id));
      metrics.ok())
    for (const store::Entry& e : *metrics)
      if (absl::StatusOr<bool> d = store_.Delete(kKvTable, e.key); !d.ok())
        spdlog::warn("job {}: its metric {} stays in the store: {}", job_id, e.key, d.status().message());
  return absl::OkStatus();
}

}  // namespace skyrl::head
