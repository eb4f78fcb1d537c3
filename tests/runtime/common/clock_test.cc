#include "runtime/common/clock.h"

#include <gtest/gtest.h>

#include "runtime/common/logging.h"

namespace skyrl {
namespace {

TEST(FakeClockTest, MovesOnlyWhenTold) {
  FakeClock clock;
  absl::Time t0 = clock.Now();
  EXPECT_EQ(clock.Now(), t0);
  clock.Advance(absl::Seconds(5));
  EXPECT_EQ(clock.Now() - t0, absl::Seconds(5));
}

TEST(RealClockTest, IsCloseToTheSystemClock) {
  EXPECT_LT(absl::AbsDuration(RealClock::Get().Now() - absl::Now()), absl::Seconds(1));
}

TEST(LoggingTest, RejectsAnUnknownLevelNamingTheFlag) {
  absl::Status s = InitLogging("test-bad", "loud");
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("--log-level"), std::string::npos);
  EXPECT_TRUE(InitLogging("test-ok", "warn").ok());
}

}  // namespace
}  // namespace skyrl
