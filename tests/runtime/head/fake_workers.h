// The head's workers, faked for tests of the head's managers and services (one fake for all
// of them). A start answers at once, or is parked until Release when `hold` is set; a class
// named "broken" fails as a constructor error would, one named "refused" as a worker that
// cannot start it (UNAVAILABLE); kills succeed and are recorded.
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
  absl::Status KillActor(const std::string&, const std::string& id) override {
    absl::MutexLock lock(&mu_);
    killed_.push_back(id);
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
  std::vector<std::string> Killed() {
    absl::MutexLock lock(&mu_);
    return killed_;
  }

  std::atomic<bool> hold{false};  // park asynchronous starts until Release
  // Where every actor serves, when set (before any create); else "<worker address>/<actor id>".
  std::string actor_address;

 private:
  absl::StatusOr<v1::StartActorReply> Reply(const std::string& address, const v1::StartActorRequest& req) {
    {
      absl::MutexLock lock(&mu_);
      started_.push_back(req);
    }
    if (req.class_name() == "broken")
      return absl::FailedPreconditionError("constructor of broken failed: no config");
    if (req.class_name() == "refused") return absl::UnavailableError("the worker cannot start it");
    v1::StartActorReply r;
    r.set_address(actor_address.empty() ? absl::StrCat(address, "/", req.actor_id()) : actor_address);
    return r;
  }
  absl::Mutex mu_;
  std::deque<std::function<void()>> parked_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> killed_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::StartActorRequest> started_ ABSL_GUARDED_BY(mu_);
};

}  // namespace skyrl::testing
