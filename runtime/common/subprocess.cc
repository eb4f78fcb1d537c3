#include "runtime/common/subprocess.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

extern char** environ;

namespace skyrl {

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? absl::StrCat(sig, " (SIG", abbrev, ")") : absl::StrCat(sig);
}

std::string ExitInfo::Describe() const {
  return signaled ? absl::StrCat("killed by signal ", SignalName(signal))
                  : absl::StrCat("exit code ", exit_code);
}

std::vector<std::string> ChildEnvironment(const SpawnOptions& options) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    absl::string_view kv(*e);
    size_t eq = kv.find('=');
    if (eq == absl::string_view::npos) continue;
    env[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
  }
  for (const auto& name : options.env_unset) env.erase(name);
  for (const auto& [k, v] : options.env_set) env[k] = v;
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

absl::StatusOr<Subprocess> Subprocess::Start(const SpawnOptions& options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("spawn: argv is empty");

  std::vector<std::string> env_strings = ChildEnvironment(options);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  std::vector<std::string> args = options.argv;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (!options.log_path.empty()) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, options.log_path.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  }
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  // Nothing else of the parent's leaks into the child: not the head's Redis connection, not
  // a listening socket that would keep a port busy after the parent dies.
  int first_closed = 3;
  if (options.pass_fd >= 0) {
    posix_spawn_file_actions_adddup2(&actions, options.pass_fd, 3);
    first_closed = 4;
  }
  posix_spawn_file_actions_addclosefrom_np(&actions, first_closed);
  if (!options.working_dir.empty())
    posix_spawn_file_actions_addchdir_np(&actions, options.working_dir.c_str());

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  if (options.new_session) {
    flags |= POSIX_SPAWN_SETSID;
  } else if (options.new_process_group) {
    flags |= POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setpgroup(&attr, 0);
  }
  posix_spawnattr_setflags(&attr, flags);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);

  pid_t pid = -1;
  bool search_path = options.argv[0].find('/') == std::string::npos;
  int rc = search_path ? posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), envp.data())
                       : posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return absl::InternalError(absl::StrCat("spawn ", options.argv[0], ": ", strerror(rc)));
  return Subprocess(pid, options.new_process_group || options.new_session);
}

Subprocess::Subprocess(Subprocess&& other) noexcept
    : pid_(other.pid_), own_group_(other.own_group_), exit_(other.exit_) {
  other.pid_ = -1;
}

Subprocess& Subprocess::operator=(Subprocess&& other) noexcept {
  if (this != &other) {
    if (running()) Stop(absl::ZeroDuration());
    pid_ = other.pid_;
    own_group_ = other.own_group_;
    exit_ = other.exit_;
    other.pid_ = -1;
  }
  return *this;
}

Subprocess::~Subprocess() {
  if (running()) {
    Signal(SIGKILL).IgnoreError();
    Wait();
  }
}

absl::Status Subprocess::Signal(int sig) {
  if (!running()) return absl::FailedPreconditionError("process is not running");
  int rc = own_group_ ? ::kill(-pid_, sig) : ::kill(pid_, sig);
  if (rc != 0 && own_group_ && errno == ESRCH) rc = ::kill(pid_, sig);
  if (rc != 0) return absl::InternalError(absl::StrCat("kill ", pid_, ": ", strerror(errno)));
  return absl::OkStatus();
}

ExitInfo Subprocess::Decode(int wstatus) {
  ExitInfo info;
  if (WIFSIGNALED(wstatus)) {
    info.signaled = true;
    info.signal = WTERMSIG(wstatus);
  } else {
    info.exit_code = WEXITSTATUS(wstatus);
  }
  return info;
}

ExitInfo Subprocess::Wait() {
  if (exit_) return *exit_;
  int wstatus = 0;
  while (::waitpid(pid_, &wstatus, 0) < 0 && errno == EINTR) {
  }
  exit_ = Decode(wstatus);
  return *exit_;
}

std::optional<ExitInfo> Subprocess::TryWait() {
  if (exit_) return exit_;
  int wstatus = 0;
  pid_t r = ::waitpid(pid_, &wstatus, WNOHANG);
  if (r == pid_) exit_ = Decode(wstatus);
  return exit_;
}

std::optional<ExitInfo> Subprocess::WaitFor(absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (true) {
    if (auto e = TryWait()) return e;
    if (absl::Now() >= deadline) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(5));
  }
}

ExitInfo Subprocess::Stop(absl::Duration grace) {
  if (!running()) return exit_.value_or(ExitInfo{});
  Signal(SIGTERM).IgnoreError();
  if (auto e = WaitFor(grace)) return *e;
  Signal(SIGKILL).IgnoreError();
  return Wait();
}

pid_t Subprocess::Release() {
  pid_t pid = pid_;
  pid_ = -1;
  return pid;
}

absl::StatusOr<int> PickFreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    ::close(fd);
    return absl::InternalError(absl::StrCat("bind 127.0.0.1:0: ", strerror(err)));
  }
  ::close(fd);
  return int(ntohs(addr.sin_port));
}

}  // namespace skyrl
