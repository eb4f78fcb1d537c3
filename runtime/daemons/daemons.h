// `skyrl start` and `skyrl stop`: run skyrl-head and skyrl-worker as background daemons on
// this machine, in the spirit of `ray start`, with pid files in ~/.skyrl/run and logs in
// ~/.skyrl/logs.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace skyrl::daemons {

struct StartedDaemon {
  int pid = 0;
  std::string log_path;
};

// Starts `program` (a sibling of the running skyrl binary) with `args` as a daemon named
// `name`, and waits until `ready(pid)` holds or the daemon exits (the error then carries the
// last lines of its log).
absl::StatusOr<StartedDaemon> StartDaemon(const std::string& program, const std::string& name,
                                          const std::vector<std::string>& args,
                                          const std::function<bool(int pid)>& ready);

// Stops every daemon recorded under ~/.skyrl/run: workers first, then the head; SIGTERM, then
// SIGKILL after `grace`. Returns one line per daemon. A stale pid file (process gone, or the
// pid reused by another program) is removed without signalling anything.
std::vector<std::string> StopDaemons(absl::Duration grace);

// The head `skyrl start --head` runs on this machine: its address, recorded in
// ~/.skyrl/run/head.address beside its pid file, is where `skyrl` and skyrl_runtime.init()
// look when given no address. RecordStartedHead writes it; StartedHeadAddress returns "" when
// no recorded head runs; StopDaemons removes it with the head's pid file.
void RecordStartedHead(const std::string& address);
std::string StartedHeadAddress();

}  // namespace skyrl::daemons
