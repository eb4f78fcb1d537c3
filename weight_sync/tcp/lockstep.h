// Keeps a sender's connections that carry the same bytes (a broadcast: several receivers of
// identical streams) within a small window of each other, so that each source page is copied
// for every receiver on this host (by the receiver reading its socket, or by the sender's own
// thread writing directly into the receiver's buffer) while it is still in the cache from the
// previous copy, instead of each copy reading the whole shard from memory. Measured on the same-host path
// (docs/performance.md, "weight_sync"): a 2 MiB window takes 1 GiB to 3 receivers from 6.1-7.0 to 8.5-9.6
// GB/s in a raw loop; 4 MiB and more lose the effect.
//
// Best effort, never a dependency: a member that keeps another waiting longer than `max_wait`
// (in one Wait) is dropped from the group (its receiver stalls or is slow; the others go on at their
// own pace), and a member that ends (done or failed) leaves. Members join before sending: one
// that comes after the group started sending stays out (it would start a shard behind).
//
// Thread-safe; each member is driven by one thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace skyrl::weight_sync::tcp_internal {

class Lockstep {
 public:
  Lockstep(int64_t window, absl::Duration max_wait) : window_(window), max_wait_(max_wait) {}

  // A member index, or -1 when the group has started sending (then do not call the others).
  int Join() {
    absl::MutexLock lock(&mu_);
    if (started_) return -1;
    progress_.push_back(0);
    return static_cast<int>(progress_.size()) - 1;
  }

  // Before member `me` sends the bytes from stream offset `offset` on: waits until `offset` is
  // within the window of the slowest member still in the group (or drops that member after
  // max_wait without progress from it).
  void Wait(int me, int64_t offset) {
    absl::MutexLock lock(&mu_);
    started_ = true;
    // One deadline per call: whoever is slowest when it passes has kept `me` waiting too long.
    absl::Time deadline = absl::Now() + max_wait_;
    for (;;) {
      if (progress_[me] == kLeft) return;  // dropped as a laggard earlier: run free
      auto close_enough = [this, offset] { return offset < Slowest() + window_; };
      if (mu_.AwaitWithDeadline(absl::Condition(&close_enough), deadline)) return;
      const int64_t slowest = Slowest();
      for (size_t i = 0; i < progress_.size(); ++i)  // never `me`, which is ahead of it
        if (progress_[i] == slowest && static_cast<int>(i) != me) progress_[i] = kLeft;
      deadline = absl::Now() + max_wait_;
    }
  }

  // Member `me` has sent everything before `offset`.
  void Advance(int me, int64_t offset) {
    absl::MutexLock lock(&mu_);
    if (progress_[me] != kLeft) progress_[me] = offset;
  }

  // Member `me` is done (or failed): nobody waits for it any more.
  void Leave(int me) {
    absl::MutexLock lock(&mu_);
    progress_[me] = kLeft;
  }

  int64_t window() const { return window_; }

 private:
  static constexpr int64_t kLeft = std::numeric_limits<int64_t>::max() / 2;

  int64_t Slowest() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    int64_t lowest = kLeft;
    for (int64_t p : progress_) lowest = std::min(lowest, p);
    return lowest;
  }

  const int64_t window_;
  const absl::Duration max_wait_;
  absl::Mutex mu_;
  std::vector<int64_t> progress_ ABSL_GUARDED_BY(mu_);  // per member: bytes sent, or kLeft
  bool started_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace skyrl::weight_sync::tcp_internal
