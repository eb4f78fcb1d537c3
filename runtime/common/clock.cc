#include "runtime/common/clock.h"

#include <time.h>

namespace skyrl {

MonotonicClock& MonotonicClock::Get() {
  static MonotonicClock* clock = new MonotonicClock();
  return *clock;
}

absl::Time MonotonicClock::Now() const {
  timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return absl::UnixEpoch() + absl::Seconds(ts.tv_sec) + absl::Nanoseconds(ts.tv_nsec);
}

RealClock& RealClock::Get() {
  static RealClock* clock = new RealClock();
  return *clock;
}

}  // namespace skyrl
