// The head's workers, faked for tests of the head's managers and services (one fake for all
// of them). A start answers at once, or is parked until Release when `hold` is set; a class
// named "broken" fails as a constructor error would, one named "refused" as a worker that
// cannot start it (UNAVAILABLE); the next `lose_starts` starts time out (DEADLINE_EXCEEDED:
// the outcome unknown). Kills are recorded, and succeed unless `unreachable` is set.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "runtime/head/worker_client.h"

namespace skyrl::testing {

class FakeWorkers final : public head::WorkerClient {
 public:
  absl::StatusOr<v1::StartActorReply> StartActor(const std::string& address,
                                                 const v1::StartActorRequest& req) override {
    return Reply(address, req);
  }
  absl::Status KillActor(const std::string&, const v1::KillActorRequest& req) override {
    absl::MutexLock lock(&mu_);
    kills_.push_back(req);
    if (unreachable.load()) return absl::UnavailableError("the worker cannot be reached");
    killed_.push_back(req.actor_id());
    return absl::OkStatus();
  }
  void StartActorAsync(const std::string& address, const v1::StartActorRequest& req,
                       StartDone done) override {
    if (!hold.load()) return done(Reply(address, req));
    absl::MutexLock lock(&mu_);
    parked_.push_back([this, address, req, done = std::move(done)] { done(Reply(address, req)); });
  }
  // Completes the parked starts, oldest first.
  void Release() {
    std::deque<std::function<void()>> run;
    {
      absl::MutexLock lock(&mu_);
      run.swap(parked_);
    }
    for (auto& f : run) f();
  }
  size_t Parked() {
    absl::MutexLock lock(&mu_);
    return parked_.size();
  }
  // Every start request answered so far, in order.
  std::vector<v1::StartActorRequest> Started() {
    absl::MutexLock lock(&mu_);
    return started_;
  }
  // The actors killed (the kills that succeeded), in order.
  std::vector<std::string> Killed() {
    absl::MutexLock lock(&mu_);
    return killed_;
  }
  // Every kill asked, in order, whether it succeeded or not.
  std::vector<v1::KillActorRequest> Kills() {
    absl::MutexLock lock(&mu_);
    return kills_;
  }

  std::atomic<bool> hold{false};  // park asynchronous starts until Release
  std::atomic<int> lose_starts{0};
  std::atomic<bool> unreachable{false};
  // Where every actor serves, when set (before any create); else "<worker address>/<actor id>".
  std::string actor_address;

 private:
  absl::StatusOr<v1::StartActorReply> Reply(const std::string& address, const v1::StartActorRequest& req) {
    {
      absl::MutexLock lock(&mu_);
      started_.push_back(req);
    }
    if (req.spec().class_name() == "broken")
      return absl::FailedPreconditionError("constructor of broken failed: no config");
    if (req.spec().class_name() == "refused") return absl::UnavailableError("the worker cannot start it");
    if (lose_starts.load() > 0 && lose_starts.fetch_sub(1) > 0)
      return absl::DeadlineExceededError("the worker did not answer in time");
    v1::StartActorReply r;
    r.set_address(actor_address.empty() ? absl::StrCat(address, "/", req.actor_id()) : actor_address);
    return r;
  }
  absl::Mutex mu_;
  std::deque<std::function<void()>> parked_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> killed_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::KillActorRequest> kills_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::StartActorRequest> started_ ABSL_GUARDED_BY(mu_);
};

}  // namespace skyrl::testing
