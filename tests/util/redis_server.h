// A real redis-server on a free loopback port, for tests and benchmarks. It keeps its data
// (append-only file, fsync on every write) in its own folder, so Kill + Restart brings the
// same data back on the same port.
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "runtime/common/subprocess.h"

namespace skyrl::testing {

class RedisServer {
 public:
  // Starts redis-server; fails if it is not installed or does not answer within 10 s.
  // `fsync_always`: fsync the append-only file on every write (tests of durability); off,
  // Redis's default of once a second (benchmarks).
  static absl::StatusOr<std::unique_ptr<RedisServer>> Start(const std::string& password = "",
                                                            bool fsync_always = true);
  ~RedisServer();

  int port() const { return port_; }
  std::string url() const;
  const std::string& dir() const { return dir_; }
  // Kills the server with `sig` (SIGKILL: no chance to save anything beyond the AOF).
  void Kill(int sig);
  // Starts it again on the same port and folder and waits until it answers.
  absl::Status Restart();

 private:
  RedisServer() = default;
  absl::Status Launch();

  std::string dir_, password_;
  bool fsync_always_ = true;
  int port_ = 0;
  std::optional<Subprocess> process_;
};

}  // namespace skyrl::testing
