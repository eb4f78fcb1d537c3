#include "runtime/worker/exit_reporter.h"

#include <optional>

#include "runtime/common/logging.h"

namespace skyrl::worker {

void ExitReporter::Add(const v1::ActorExitInfo& exit) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(exit);
}

size_t ExitReporter::pending() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

absl::Duration ExitReporter::Step() {
  std::optional<v1::ActorExitInfo> next;
  {
    absl::MutexLock lock(&mu_);
    if (!queue_.empty()) next = queue_.front();
  }
  std::string node = node_id_();
  if (!next || node.empty()) return absl::Milliseconds(10);
  v1::ReportActorExitRequest req;
  req.set_node_id(node);
  *req.mutable_exit() = *next;
  absl::Status s = send_(req);
  if (!s.ok() && !absl::IsInvalidArgument(s)) {
    spdlog::warn("cannot report the exit of {} to the head: {}", next->actor_id(), s.message());
    return absl::Milliseconds(200);
  }
  if (!s.ok()) spdlog::warn("the head refused the exit report of {}: {}", next->actor_id(), s.message());
  absl::MutexLock lock(&mu_);
  queue_.pop_front();  // only this thread pops, so the front is still `next`
  return queue_.empty() ? absl::Milliseconds(10) : absl::ZeroDuration();
}

void ExitReporter::Start() {
  thread_ = std::thread([this] {
    for (;;) {
      absl::Duration wait = Step();
      absl::MutexLock lock(&mu_);
      // Wakes early for Stop.
      auto wake = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_; };
      mu_.AwaitWithTimeout(absl::Condition(&wake), wait);
      if (stopping_) return;
    }
  });
}

void ExitReporter::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

}  // namespace skyrl::worker
