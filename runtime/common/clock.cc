#include "runtime/common/clock.h"

#include "runtime/common/lease.h"

namespace skyrl {

MonotonicClock& MonotonicClock::Get() {
  static MonotonicClock* clock = new MonotonicClock();
  return *clock;
}

// The leases' own clock: HeadLink times their renewals on this one.
absl::Time MonotonicClock::Now() const { return absl::UnixEpoch() + absl::Nanoseconds(MonotonicNowNs()); }

RealClock& RealClock::Get() {
  static RealClock* clock = new RealClock();
  return *clock;
}

}  // namespace skyrl
