// Time, injected. Components that wait, time out or expire read time only through a Clock
// passed to their constructor, so tests move time by hand instead of sleeping.
#pragma once

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace skyrl {

// Safe for concurrent use.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

// The wall clock. Process-wide singleton; never destroyed.
class RealClock final : public Clock {
 public:
  static RealClock& Get();
  absl::Time Now() const override { return absl::Now(); }
};

// CLOCK_BOOTTIME (monotonic, and counting time the machine was suspended), as an absl::Time
// counted from boot: durations between its readings do not jump when the wall clock is set.
// For deadlines and elapsed time only, never shown as a date. Process-wide singleton; never
// destroyed.
class MonotonicClock final : public Clock {
 public:
  static MonotonicClock& Get();
  absl::Time Now() const override;
};

// A clock that moves only when the test says so. Safe for concurrent use.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000)) : now_(start) {}
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }
  void Set(absl::Time t) {
    absl::MutexLock lock(&mu_);
    now_ = t;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace skyrl
