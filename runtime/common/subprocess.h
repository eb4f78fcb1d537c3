// A child process started with posix_spawn: what the worker uses to run actors, and what
// tests and benchmarks use to start real redis-server, skyrl-head and skyrl-worker processes.
//
// Lifecycle: Start -> running -> exited (Wait/TryWait reaped it). The destructor kills a
// child that is still running (SIGKILL) and reaps it, so a failed test never leaks one.
// Not synchronized: one owner thread.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace skyrl {

struct SpawnOptions {
  std::vector<std::string> argv;               // argv[0] is looked up on PATH when it has no '/'
  std::map<std::string, std::string> env_set;  // added to (or replacing in) the parent's environment
  std::vector<std::string> env_unset;
  std::string log_path;           // stdout+stderr go here (appended) when not empty
  std::string working_dir;        // empty: the parent's
  bool new_process_group = true;  // so a signal to the group reaches grandchildren
  bool new_session = false;       // setsid: a daemon that outlives its terminal
  int pass_fd = -1;               // when >= 0: this descriptor becomes the child's fd 3
};

// How a child ended.
struct ExitInfo {
  int exit_code = -1;  // valid when !signaled
  int signal = 0;      // valid when signaled
  bool signaled = false;
  bool ok() const { return !signaled && exit_code == 0; }
  // "exit code 3" or "killed by signal 9 (SIGKILL)".
  std::string Describe() const;
};

// The environment a child started with `options` gets: this process's, with env_unset
// removed and env_set added, as sorted "NAME=value" strings.
std::vector<std::string> ChildEnvironment(const SpawnOptions& options);

class Subprocess {
 public:
  static absl::StatusOr<Subprocess> Start(const SpawnOptions& options);
  // A child of this process that something else started (a process forked by the worker's
  // fork server and re-parented here, runtime/worker/fork_server.h): owned, signalled and
  // reaped as if Start had made it. `own_group`: it leads a process group of its own.
  static Subprocess Adopt(pid_t pid, bool own_group) { return Subprocess(pid, own_group); }

  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&& other) noexcept;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  ~Subprocess();

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && !exit_.has_value(); }

  // Sends `sig` to the child (to its process group when it has one of its own).
  absl::Status Signal(int sig);
  // Blocks until the child exits.
  ExitInfo Wait();
  // Reaps the child if it has exited; nullopt while it runs.
  std::optional<ExitInfo> TryWait();
  // Waits up to `timeout` (polling); nullopt if still running.
  std::optional<ExitInfo> WaitFor(absl::Duration timeout);
  // SIGTERM, then SIGKILL after `grace`.
  ExitInfo Stop(absl::Duration grace = absl::Seconds(5));
  // Gives up ownership: the child keeps running after this object is gone (daemons started
  // by `skyrl start`). Returns its pid.
  pid_t Release();

 private:
  Subprocess(pid_t pid, bool own_group) : pid_(pid), own_group_(own_group) {}
  static ExitInfo Decode(int wstatus);

  pid_t pid_ = -1;
  bool own_group_ = false;
  std::optional<ExitInfo> exit_;
};

// Describes a signal number: "9 (SIGKILL)".
std::string SignalName(int sig);

// Asks the kernel for a free TCP port on 127.0.0.1. Another process may take it before the
// caller binds it; callers that start servers retry on "address in use".
absl::StatusOr<int> PickFreePort();

}  // namespace skyrl
