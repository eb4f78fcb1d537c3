// Actor logs as a stream (logs.proto): a worker's ActorLogService over its log folder, and the
// reader under it; and the call records of its actors (ActorCalls). `skyrl logs` reaches it through the head
// (head/actor_log_service.h).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/common/ids.h"
#include "runtime/rpc/auth.h"
#include "runtime/worker/host_telemetry.h"
#include "skyrl/logs.grpc.pb.h"

namespace skyrl::worker {

// Reads a log file that another process appends to: from the last N lines, then whatever was
// written since the previous read. A file that shrank (an actor restarted here starts its log
// anew) is read again from its beginning. Not thread-safe.
class LogFollower {
 public:
  // NotFound when there is no file at `path`.
  static absl::StatusOr<LogFollower> Open(const std::string& path);
  LogFollower(LogFollower&& other) noexcept : fd_(std::exchange(other.fd_, -1)), offset_(other.offset_) {}
  LogFollower& operator=(LogFollower&&) = delete;
  ~LogFollower();

  // Positions the next read at the start of the last `lines` lines (0: the beginning).
  void SeekToLastLines(int lines);
  // Up to `max_bytes` written since the last read; "" when there is nothing new.
  std::string ReadMore(size_t max_bytes = 64 << 10);
  int64_t offset() const { return offset_; }

 private:
  explicit LogFollower(int fd) : fd_(fd) {}
  int64_t Size() const;
  // pread, not stdio: a buffer would keep bytes the writer has since replaced.
  std::string ReadAt(int64_t offset, size_t n) const;

  int fd_;
  int64_t offset_ = 0;
};

struct ActorLogServiceOptions {
  std::string log_dir;                            // actor logs: <log_dir>/<actor id>.log
  std::function<bool(const ActorId&)> running;    // whether its process runs here now
  absl::Duration poll = absl::Milliseconds(100);  // how often a follow looks for more
  int max_tail_lines = 100000;
  const HostTelemetry* telemetry = nullptr;  // for ActorCalls (null: UNIMPLEMENTED)
};

class ActorLogServiceImpl final : public v1::ActorLogService::Service {
 public:
  ActorLogServiceImpl(ActorLogServiceOptions options, const rpc::TokenAuth& auth);
  grpc::Status ActorLog(grpc::ServerContext* ctx, const v1::ActorLogRequest* req,
                        grpc::ServerWriter<v1::ActorLogChunk>* writer) override;
  grpc::Status ActorCalls(grpc::ServerContext* ctx, const v1::ActorCallsRequest* req,
                          v1::ActorCallsReply* reply) override;

 private:
  const ActorLogServiceOptions options_;
  const rpc::TokenAuth& auth_;
};

}  // namespace skyrl::worker
