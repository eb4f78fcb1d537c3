#include "runtime/common/clock.h"

namespace skyrl {

RealClock& RealClock::Get() {
  static RealClock* clock = new RealClock();
  return *clock;
}

}  // namespace skyrl
