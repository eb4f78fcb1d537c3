#include "runtime/worker/actor_logs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/rpc/status.h"

namespace skyrl::worker {

absl::StatusOr<LogFollower> LogFollower::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat("no log at ", path));
  return LogFollower(fd);
}

LogFollower::~LogFollower() {
  if (fd_ >= 0) ::close(fd_);
}

int64_t LogFollower::Size() const {
  struct stat st;
  return ::fstat(fd_, &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}

std::string LogFollower::ReadAt(int64_t offset, size_t n) const {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    const ssize_t r =
        ::pread(fd_, out.data() + got, n - got, static_cast<off_t>(offset) + static_cast<off_t>(got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  out.resize(got);
  return out;
}

void LogFollower::SeekToLastLines(int lines) {
  offset_ = 0;
  if (lines <= 0) return;
  // Backwards in blocks, counting newlines; a final line without one counts as a line too.
  const int64_t size = Size();
  constexpr int64_t kBlock = 64 << 10;
  int64_t pos = size;
  int seen = 0;
  bool skip_last = true;  // the newline ending the file closes the last line, it starts none
  while (pos > 0) {
    const int64_t start = std::max<int64_t>(0, pos - kBlock);
    const std::string block = ReadAt(start, static_cast<size_t>(pos - start));
    for (int64_t i = static_cast<int64_t>(block.size()) - 1; i >= 0; --i) {
      if (block[static_cast<size_t>(i)] != '\n') continue;
      if (skip_last && start + i == size - 1) continue;
      if (++seen == lines) {
        offset_ = start + i + 1;
        return;
      }
    }
    skip_last = false;
    pos = start;
  }
}

std::string LogFollower::ReadMore(size_t max_bytes) {
  const int64_t size = Size();
  if (size < offset_) offset_ = 0;  // truncated or replaced: a new log
  if (size == offset_) return "";
  std::string out = ReadAt(
      offset_, static_cast<size_t>(std::min<int64_t>(size - offset_, static_cast<int64_t>(max_bytes))));
  offset_ += static_cast<int64_t>(out.size());
  return out;
}

ActorLogServiceImpl::ActorLogServiceImpl(ActorLogServiceOptions options, const rpc::TokenAuth& auth)
    : options_(std::move(options)), auth_(auth) {}

grpc::Status ActorLogServiceImpl::ActorLog(grpc::ServerContext* ctx, const v1::ActorLogRequest* req,
                                           grpc::ServerWriter<v1::ActorLogChunk>* writer) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return s;
  // Only a well-formed id names a file: nothing from outside reaches the path but its hex.
  absl::StatusOr<ActorId> id = ActorId::Parse(req->actor_id());
  if (!id.ok())
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("actor_id: ", id.status().message()));
  if (req->tail_lines() < 0 || req->tail_lines() > options_.max_tail_lines)
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("tail_lines: ", req->tail_lines(), " is not 0..", options_.max_tail_lines));
  absl::StatusOr<LogFollower> log =
      LogFollower::Open(absl::StrCat(options_.log_dir, "/", id->ToString(), ".log"));
  if (!log.ok())
    return grpc::Status(
        grpc::StatusCode::NOT_FOUND,
        absl::StrCat("no log of actor ", id->ToString(), " on this worker (", options_.log_dir, ")"));
  log->SeekToLastLines(req->tail_lines());
  v1::ActorLogChunk chunk;
  for (;;) {
    std::string data = log->ReadMore();
    if (!data.empty()) {
      chunk.set_data(std::move(data));
      if (!writer->Write(chunk)) return grpc::Status::OK;  // the reader went away
      continue;
    }
    if (!req->follow() || ctx->IsCancelled()) return grpc::Status::OK;
    if (!options_.running(*id)) {
      // It ended: what it wrote last is in the file now.
      for (data = log->ReadMore(); !data.empty(); data = log->ReadMore()) {
        chunk.set_data(std::move(data));
        if (!writer->Write(chunk)) break;
      }
      return grpc::Status::OK;
    }
    absl::SleepFor(options_.poll);
  }
}

grpc::Status ActorLogServiceImpl::ActorCalls(grpc::ServerContext* ctx, const v1::ActorCallsRequest* req,
                                             v1::ActorCallsReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return s;
  if (options_.telemetry == nullptr)
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "this worker keeps no call records");
  absl::StatusOr<ActorId> id = ActorId::Parse(req->actor_id());
  if (!id.ok())
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("actor_id: ", id.status().message()));
  absl::StatusOr<v1::ActorTelemetryReply> t = absl::NotFoundError("");
  if (options_.running(*id)) {
    t = options_.telemetry->Live(*id, /*with_records=*/true);
    reply->set_live(t.ok());
  }
  // Not running, or it stopped between the check and the call: what it left.
  if (!t.ok() && !reply->live()) {
    absl::StatusOr<v1::ActorTelemetryReply> left = options_.telemetry->Left(*id);
    if (left.ok() || t.status().message().empty()) t = std::move(left);
  }
  if (!t.ok()) return rpc::ToGrpc(t.status());
  *reply->mutable_telemetry() = std::move(*t);
  return grpc::Status::OK;
}

}  // namespace skyrl::worker
