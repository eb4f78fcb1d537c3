#include "runtime/daemons/daemons.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "runtime/common/log_tail.h"
#include "runtime/common/subprocess.h"

namespace skyrl::daemons {
namespace {

namespace fs = std::filesystem;

std::string StateDir() {
  const char* home = std::getenv("HOME");
  return absl::StrCat(home && *home ? home : "/tmp", "/.skyrl");
}

bool IsSkyrlProcess(int pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/cmdline"));
  std::string argv0;
  std::getline(in, argv0, '\0');
  return argv0.find("skyrl-") != std::string::npos;
}

bool Alive(int pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

}  // namespace

absl::StatusOr<StartedDaemon> StartDaemon(const std::string& program, const std::string& name,
                                          const std::vector<std::string>& args,
                                          const std::function<bool(int)>& ready) {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  fs::path exe = self.parent_path() / program;
  if (ec || !fs::exists(exe))
    return absl::NotFoundError(absl::StrCat("cannot find ", program, " beside ", self.string()));
  std::string dir = StateDir();
  fs::create_directories(dir + "/run", ec);
  fs::create_directories(dir + "/logs", ec);
  ::chmod(dir.c_str(), 0700);
  std::string pid_file = absl::StrCat(dir, "/run/", name, ".pid");
  {
    int old = 0;
    std::ifstream(pid_file) >> old;
    if (old > 0 && Alive(old) && IsSkyrlProcess(old))
      return absl::AlreadyExistsError(
          absl::StrCat(name, " already runs here (pid ", old, "); stop it first with `skyrl stop`"));
  }

  SpawnOptions o;
  o.argv = {exe.string()};
  o.argv.insert(o.argv.end(), args.begin(), args.end());
  o.new_session = true;
  StartedDaemon d;
  d.log_path = absl::StrCat(dir, "/logs/", name, ".log");
  o.log_path = d.log_path;
  absl::StatusOr<Subprocess> p = Subprocess::Start(o);
  if (!p.ok()) return p.status();
  d.pid = p->pid();
  absl::Time deadline = absl::Now() + absl::Seconds(15);
  while (true) {
    if (auto exit = p->TryWait()) {
      return absl::FailedPreconditionError(absl::StrCat(program, " exited at start (", exit->Describe(),
                                                        "); last lines of ", d.log_path, ":\n  ",
                                                        absl::StrJoin(TailLines(d.log_path, 10), "\n  ")));
    }
    if (ready(d.pid)) break;
    if (absl::Now() > deadline) {
      p->Stop(absl::Seconds(2));
      return absl::DeadlineExceededError(
          absl::StrCat(program, " did not become ready within 15 s; last lines of ", d.log_path, ":\n  ",
                       absl::StrJoin(TailLines(d.log_path, 10), "\n  ")));
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  std::ofstream(pid_file) << d.pid << "\n";
  p->Release();
  return d;
}

std::vector<std::string> StopDaemons(absl::Duration grace) {
  std::vector<std::string> report;
  std::string run = StateDir() + "/run";
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(run, ec))
    if (entry.path().extension() == ".pid") files.push_back(entry.path());
  // Workers first, so they can unregister from a head that still runs.
  std::sort(files.begin(), files.end(), [](const fs::path& a, const fs::path& b) {
    bool ha = a.stem() == "head", hb = b.stem() == "head";
    return ha != hb ? hb : a < b;
  });
  for (const fs::path& f : files) {
    int pid = 0;
    std::ifstream(f) >> pid;
    std::string name = f.stem().string();
    if (pid <= 0 || !Alive(pid) || !IsSkyrlProcess(pid)) {
      report.push_back(absl::StrCat(name, ": not running (stale pid file removed)"));
      fs::remove(f, ec);
      continue;
    }
    ::kill(pid, SIGTERM);
    absl::Time deadline = absl::Now() + grace;
    while (Alive(pid) && IsSkyrlProcess(pid) && absl::Now() < deadline)
      absl::SleepFor(absl::Milliseconds(20));
    bool forced = false;
    if (Alive(pid) && IsSkyrlProcess(pid)) {
      ::kill(pid, SIGKILL);
      forced = true;
    }
    report.push_back(absl::StrCat(name, ": stopped pid ", pid, forced ? " (SIGKILL)" : ""));
    fs::remove(f, ec);
  }
  if (!fs::exists(run + "/head.pid", ec)) fs::remove(run + "/head.address", ec);
  if (report.empty()) report.push_back("no skyrl daemons recorded in " + run);
  return report;
}

void RecordStartedHead(const std::string& address) {
  const std::string path = StateDir() + "/run/head.address";
  std::ofstream(path + ".tmp", std::ios::trunc) << address << "\n";
  std::error_code ec;
  fs::rename(path + ".tmp", path, ec);
}

std::string StartedHeadAddress() {
  const std::string run = StateDir() + "/run";
  int pid = 0;
  std::ifstream(run + "/head.pid") >> pid;
  if (pid <= 0 || !Alive(pid) || !IsSkyrlProcess(pid)) return "";
  std::string address;
  std::ifstream(run + "/head.address") >> address;
  return address;
}

}  // namespace skyrl::daemons
