// The worker's fork server for Python actors: one prestarted interpreter that has imported the
// package (and numpy) once, and forks a process per actor from that state, so a Python actor
// (and a task executor) starts in milliseconds rather than the ~250 ms of CPU a fresh
// interpreter spends importing. python/skyrl_runtime/_forkserver.py is the other side.
//
//   worker --socketpair--> server (skyrl-actor-host-python --fork-server 3)
//   Fork(options): server forks a child; the child forks the actor and exits at once, so the
//   actor is re-parented to the worker (a child subreaper, SetChildSubreaper) and the worker
//   waits for it, signals its group and reads its exit exactly as for a spawned process
//   (Subprocess::Adopt). The actor applies, after the fork: its process group, log file (stdout
//   and stderr, appended), /dev/null stdin, working directory, environment (the worker's with
//   the actor's, as a spawned child gets) and sys.path; nothing of one actor reaches another
//   (each is forked from the server's pristine state; the server runs no actor code).
//
// Requests are served one at a time (a mutex); the server stops when the worker closes its end
// or goes away. Fork fails (a Status) when the server died or did not answer in time: the
// caller spawns the actor the ordinary way, and the next Fork starts a new server.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/common/subprocess.h"

namespace skyrl::worker {

struct ForkServerOptions {
  // The server's command; the worker appends "--fork-server 3" (its end of the socket is fd 3).
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // added to the server's environment
  std::string log_path;                    // the server's own stdout and stderr
  // How long a fork may take, the first one included (the server's imports).
  absl::Duration reply_timeout = absl::Seconds(20);
};

class ForkServer {
 public:
  // Starts the server and returns at once (its imports go on in the background; the first
  // Fork waits for them).
  static absl::StatusOr<std::unique_ptr<ForkServer>> Start(ForkServerOptions options);
  // Closes the socket (the server exits), then kills and reaps the server if it lingers.
  ~ForkServer();

  // Forks a process running `options.argv` (the argv the actor host would have been spawned
  // with) in `options.env_set`'s environment, `options.working_dir`, with stdout and stderr
  // appended to `options.log_path`, in a process group of its own. Returns its pid, a child of
  // this process (re-parented here: SetChildSubreaper must have been called). Unavailable
  // when the server is gone or answered nothing in time (it is not asked again); Internal
  // when it could not fork.
  absl::StatusOr<pid_t> Fork(const SpawnOptions& options);
  // Whether Fork may be asked (the server has not failed).
  bool usable() const;
  pid_t pid() const { return pid_; }

 private:
  ForkServer(Subprocess process, int fd, absl::Duration reply_timeout);
  absl::StatusOr<std::string> Exchange(const std::string& request) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  Subprocess process_ ABSL_GUARDED_BY(mu_);
  const pid_t pid_;
  int fd_ ABSL_GUARDED_BY(mu_);
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  const absl::Duration reply_timeout_;
};

// Makes this process the reaper of its descendants' orphans (PR_SET_CHILD_SUBREAPER), so that
// processes the fork server makes become its children.
absl::Status SetChildSubreaper();

// Whether an actor with `env` (its env_vars and the worker's own settings) can be forked from
// a server started in the worker's environment: not when it sets what an interpreter or a
// library the server has loaded reads only at its start (PYTHON* other than PYTHONPATH,
// LD_*, MALLOC_*, and BLAS/OpenMP thread counts). Those actors are spawned afresh.
bool ForkServerSuits(const std::map<std::string, std::string>& env);

}  // namespace skyrl::worker
