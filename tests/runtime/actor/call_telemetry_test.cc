// CallTelemetry (runtime/actor/call_telemetry.h): counts, latency buckets, the ring of recent
// calls, the bound on method names, and the switch that turns it off.
#include "runtime/actor/call_telemetry.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace skyrl {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

// Index of the bucket that holds `seconds`.
size_t BucketOf(double seconds) {
  const auto& b = CallTelemetry::LatencyBounds();
  return std::lower_bound(b.begin(), b.end(), seconds) - b.begin();
}

TEST(CallTelemetryTest, CountsEachMethodByCodeWithItsLatencyBuckets) {
  CallTelemetry t;
  const int train = t.Slot("train");
  const int gen = t.Slot("generate");
  EXPECT_EQ(t.Slot("train"), train) << "one slot per name";
  t.Record(train, kT0, kT0 + absl::Milliseconds(1), kT0 + absl::Milliseconds(300), 0);
  t.Record(train, kT0, kT0, kT0 + absl::Seconds(2), 0);
  t.Record(train, kT0, absl::InfinitePast(), kT0 + absl::Microseconds(50), 4);  // timed out, never ran
  t.Record(gen, kT0, kT0, kT0 + absl::Milliseconds(20), 0);

  v1::ActorTelemetryReply r = t.Snapshot(/*with_records=*/false);
  EXPECT_TRUE(r.enabled());
  EXPECT_EQ(r.records_size(), 0) << "records only when asked";
  ASSERT_EQ(r.methods_size(), 2);
  const v1::MethodCallStats& m = r.methods(0);
  EXPECT_EQ(m.method(), "train");
  EXPECT_EQ(m.calls_by_code().at(0), 2u);
  EXPECT_EQ(m.calls_by_code().at(4), 1u);
  ASSERT_EQ(m.latency_counts_size(), r.latency_bounds_s_size() + 1);
  EXPECT_EQ(m.latency_counts(static_cast<int>(BucketOf(0.3))), 1u);
  EXPECT_EQ(m.latency_counts(static_cast<int>(BucketOf(2.0))), 1u);
  EXPECT_EQ(m.latency_counts(static_cast<int>(BucketOf(0.00005))), 1u);
  EXPECT_NEAR(m.latency_sum_s(), 0.3 + 2.0 + 0.00005, 1e-9);
  EXPECT_EQ(r.methods(1).method(), "generate");
}

TEST(CallTelemetryTest, TheRingKeepsTheMostRecentCallsOldestFirst) {
  CallTelemetry t(/*ring=*/3);
  const int s = t.Slot("step");
  for (int i = 0; i < 5; ++i) {
    const absl::Time at = kT0 + absl::Seconds(i);
    t.Record(s, at, at + absl::Milliseconds(1), at + absl::Milliseconds(2), 0);
  }
  v1::ActorTelemetryReply r = t.Snapshot(true);
  ASSERT_EQ(r.records_size(), 3);
  EXPECT_EQ(r.records_dropped(), 2u);
  for (int i = 0; i < 3; ++i) {
    const v1::CallRecord& c = r.records(i);
    const int64_t at = absl::ToUnixMicros(kT0 + absl::Seconds(i + 2));
    EXPECT_EQ(c.method(), "step");
    EXPECT_EQ(c.arrived_unix_us(), at);
    EXPECT_EQ(c.start_unix_us(), at + 1000);
    EXPECT_EQ(c.end_unix_us(), at + 2000);
  }
  EXPECT_EQ(r.methods(0).calls_by_code().at(0), 5u) << "counts cover every call, kept or not";
}

TEST(CallTelemetryTest, ACallThatNeverRanHasNoStart) {
  CallTelemetry t;
  t.Record(t.Slot("late"), kT0, absl::InfinitePast(), kT0 + absl::Seconds(1), 4);
  v1::ActorTelemetryReply r = t.Snapshot(true);
  ASSERT_EQ(r.records_size(), 1);
  EXPECT_EQ(r.records(0).start_unix_us(), 0);
  EXPECT_EQ(r.records(0).code(), 4);
}

TEST(CallTelemetryTest, MethodNamesPastTheLimitShareOneSlot) {
  CallTelemetry t;
  for (size_t i = 0; i < CallTelemetry::kMaxMethods + 50; ++i) {
    const int s = t.Slot("m" + std::to_string(i));
    ASSERT_GE(s, 0);
    ASSERT_LT(s, static_cast<int>(CallTelemetry::kMaxMethods));
    t.Record(s, kT0, kT0, kT0, 0);
  }
  v1::ActorTelemetryReply r = t.Snapshot(false);
  ASSERT_EQ(r.methods_size(), static_cast<int>(CallTelemetry::kMaxMethods));
  const v1::MethodCallStats& other = r.methods(r.methods_size() - 1);
  EXPECT_EQ(other.method(), CallTelemetry::kOtherMethod);
  EXPECT_EQ(other.calls_by_code().at(0), 51u);
  EXPECT_EQ(t.Slot("m0"), 0) << "names seen before the limit keep their slots";
}

TEST(CallTelemetryTest, DisabledKeepsNothing) {
  CallTelemetry t(CallTelemetry::kDefaultRing, /*enabled=*/false);
  EXPECT_EQ(t.Slot("x"), -1);
  t.Record(-1, kT0, kT0, kT0, 0);
  v1::ActorTelemetryReply r = t.Snapshot(true);
  EXPECT_FALSE(r.enabled());
  EXPECT_EQ(r.methods_size(), 0);
  EXPECT_EQ(r.records_size(), 0);
}

TEST(CallTelemetryTest, ConcurrentRecordsAndSnapshotsLoseNothing) {
  CallTelemetry t(/*ring=*/64);
  constexpr int kThreads = 4, kEach = 20000;
  std::atomic<bool> done{false};
  std::thread reader([&] {  // scrapes while the calls are recorded
    while (!done.load()) {
      v1::ActorTelemetryReply r = t.Snapshot(true);
      ASSERT_LE(r.records_size(), 64);
      for (const v1::CallRecord& c : r.records()) ASSERT_TRUE(c.method() == "a" || c.method() == "b");
    }
  });
  std::vector<std::thread> writers;
  for (int i = 0; i < kThreads; ++i)
    writers.emplace_back([&t, i] {
      for (int n = 0; n < kEach; ++n)
        t.Record(n % 2 ? "a" : "b", kT0, kT0, kT0 + absl::Microseconds(i * 100 + 50), i % 2 ? 0 : 5);
    });
  for (std::thread& w : writers) w.join();
  done = true;
  reader.join();
  const v1::ActorTelemetryReply r = t.Snapshot(true);
  uint64_t ok = 0, not_found = 0;
  for (const v1::MethodCallStats& m : r.methods()) {
    ok += m.calls_by_code().count(0) ? m.calls_by_code().at(0) : 0;
    not_found += m.calls_by_code().count(5) ? m.calls_by_code().at(5) : 0;
  }
  EXPECT_EQ(ok, uint64_t(kThreads / 2 * kEach));
  EXPECT_EQ(not_found, uint64_t(kThreads / 2 * kEach));
  EXPECT_EQ(r.records_size(), 64);
  EXPECT_EQ(r.records_dropped(), uint64_t(kThreads * kEach - 64));
}

TEST(CallTelemetryTest, TheEnvironmentTurnsItOff) {
  unsetenv("SKYRL_CALL_TELEMETRY");
  EXPECT_TRUE(CallTelemetry::EnabledByEnvironment());
  for (const char* off : {"0", "off", "FALSE"}) {
    setenv("SKYRL_CALL_TELEMETRY", off, 1);
    EXPECT_FALSE(CallTelemetry::EnabledByEnvironment()) << off;
  }
  setenv("SKYRL_CALL_TELEMETRY", "1", 1);
  EXPECT_TRUE(CallTelemetry::EnabledByEnvironment());
  unsetenv("SKYRL_CALL_TELEMETRY");
}

}  // namespace
}  // namespace skyrl
