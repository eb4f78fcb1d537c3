// A lock for critical sections of a few dozen instructions on hot paths (a call's telemetry
// record), where absl::Mutex's uncontended lock and unlock (~40 ns with Debian's abseil) would
// cost more than the work. Spins briefly, then yields the core to whoever holds it. Never hold
// it across a call that can block or allocate much: copy out, then work outside.
#pragma once

#include <atomic>
#include <thread>

#include "absl/base/thread_annotations.h"

namespace skyrl {

class ABSL_LOCKABLE SpinLock {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    int spins = 0;  // stops counting at the limit: a long wait must not overflow it
    while (held_.exchange(true, std::memory_order_acquire)) {
      while (held_.load(std::memory_order_relaxed)) {
        if (spins < kSpinsBeforeYield) {
          ++spins;
        } else {
          std::this_thread::yield();
        }
      }
    }
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() { held_.store(false, std::memory_order_release); }

 private:
  static constexpr int kSpinsBeforeYield = 64;
  std::atomic<bool> held_{false};
};

class ABSL_SCOPED_LOCKABLE SpinLockHolder {
 public:
  explicit SpinLockHolder(SpinLock* lock) ABSL_EXCLUSIVE_LOCK_FUNCTION(lock) : lock_(lock) { lock_->Lock(); }
  ~SpinLockHolder() ABSL_UNLOCK_FUNCTION() { lock_->Unlock(); }
  SpinLockHolder(const SpinLockHolder&) = delete;
  SpinLockHolder& operator=(const SpinLockHolder&) = delete;

 private:
  SpinLock* const lock_;
};

}  // namespace skyrl
