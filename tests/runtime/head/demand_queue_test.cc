// DemandQueue: order within a shape, one attempt per shape per pass, shapes that do not
// block each other, back-off by the injected clock, and owners detached while they run.
#include "runtime/head/demand_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

namespace skyrl::head {
namespace {

using Outcome = DemandQueue::Outcome;

// Waits (up to 10 s: a hang fails, nothing is timed) until `done` holds.
bool Eventually(const std::function<bool()>& done) {
  for (absl::Time end = absl::Now() + absl::Seconds(10); absl::Now() < end;
       absl::SleepFor(absl::Milliseconds(1)))
    if (done()) return true;
  return done();
}

// A resource of `room` units; each entry takes one and records its name.
struct Room {
  absl::Mutex mu;
  int room ABSL_GUARDED_BY(mu) = 0;
  std::vector<std::string> placed ABSL_GUARDED_BY(mu);

  DemandQueue::Attempt Take(std::string name) {
    return [this, name] {
      absl::MutexLock lock(&mu);
      if (room == 0) return Outcome::kWaiting;
      --room;
      placed.push_back(name);
      return Outcome::kPlaced;
    };
  }
  void Add(int n) {
    absl::MutexLock lock(&mu);
    room += n;
  }
  std::vector<std::string> Placed() {
    absl::MutexLock lock(&mu);
    return placed;
  }
};

TEST(DemandQueueTest, PlacesOneShapeInPushOrderAsRoomComes) {
  FakeClock clock;
  DemandQueue q(clock);
  Room room;
  for (int i = 0; i < 6; ++i) q.Push(&room, "gpu", room.Take(std::to_string(i)));
  ASSERT_TRUE(Eventually([&] { return q.stats().attempts >= 1; }));
  EXPECT_TRUE(room.Placed().empty());
  EXPECT_EQ(q.stats().waiting, 6u);
  room.Add(4);
  q.Kick();
  ASSERT_TRUE(Eventually([&] { return room.Placed().size() == 4; }));
  room.Add(2);
  q.Kick();
  ASSERT_TRUE(Eventually([&] { return room.Placed().size() == 6; }));
  EXPECT_EQ(room.Placed(), (std::vector<std::string>{"0", "1", "2", "3", "4", "5"}));
  ASSERT_TRUE(Eventually([&] { return q.stats().waiting == 0; }));
}

TEST(DemandQueueTest, AShapeWithoutRoomCostsOneAttemptPerPass) {
  FakeClock clock;
  DemandQueue q(clock);
  Room room;
  for (int i = 0; i < 1000; ++i) q.Push(&room, "gpu", room.Take(std::to_string(i)));
  ASSERT_TRUE(Eventually([&] { return q.stats().attempts >= 1; }));
  // Every later pass tries the oldest only.
  for (int k = 0; k < 5; ++k) {
    const uint64_t passes = q.stats().passes;
    q.Kick();
    ASSERT_TRUE(Eventually([&] { return q.stats().passes > passes; }));
  }
  ASSERT_TRUE(Eventually([&] { return q.stats().attempts == q.stats().passes; }));
  EXPECT_EQ(q.stats().waiting, 1000u);
  EXPECT_TRUE(room.Placed().empty());
}

TEST(DemandQueueTest, AShapeWithoutRoomDoesNotHoldUpAnother) {
  FakeClock clock;
  DemandQueue q(clock);
  Room gpus, cpus;
  cpus.Add(2);
  q.Push(&gpus, "gpu", gpus.Take("g0"));
  q.Push(&cpus, "cpu", cpus.Take("c0"));
  q.Push(&gpus, "gpu", gpus.Take("g1"));
  q.Push(&cpus, "cpu", cpus.Take("c1"));
  ASSERT_TRUE(Eventually([&] { return cpus.Placed().size() == 2; }));
  EXPECT_EQ(cpus.Placed(), (std::vector<std::string>{"c0", "c1"}));
  EXPECT_TRUE(gpus.Placed().empty());
  EXPECT_EQ(q.stats().waiting, 2u);
}

TEST(DemandQueueTest, GoneEntriesAreDroppedAndTheNextOfTheirShapeIsTried) {
  FakeClock clock;
  DemandQueue q(clock);
  Room room;
  room.Add(1);
  std::atomic<int> gone_tries{0};
  q.Push(&room, "gpu", [&] {
    ++gone_tries;
    return Outcome::kGone;
  });
  q.Push(&room, "gpu", room.Take("after"));
  ASSERT_TRUE(Eventually([&] { return room.Placed().size() == 1; }));
  q.Kick();
  ASSERT_TRUE(Eventually([&] { return q.stats().waiting == 0; }));
  EXPECT_EQ(gone_tries.load(), 1);
}

TEST(DemandQueueTest, DelayedEntriesWaitForTheClock) {
  FakeClock clock;
  DemandQueue q(clock);
  Room room;
  room.Add(10);
  q.Push(&room, "gpu", room.Take("late"), absl::Seconds(2));
  q.Push(&room, "gpu", room.Take("now"));
  ASSERT_TRUE(Eventually([&] { return room.Placed().size() == 1; }));
  q.Kick();
  clock.Advance(absl::Seconds(1));
  q.Kick();
  ASSERT_TRUE(Eventually([&] { return q.stats().attempts >= 1; }));
  EXPECT_EQ(room.Placed(), std::vector<std::string>{"now"});
  EXPECT_EQ(q.stats().waiting, 1u);
  clock.Advance(absl::Seconds(1));
  q.Kick();
  ASSERT_TRUE(Eventually([&] { return room.Placed().size() == 2; }));
  EXPECT_EQ(room.Placed(), (std::vector<std::string>{"now", "late"}));
}

TEST(DemandQueueTest, DelayedEntriesRunOnTheRealClockWithoutAKick) {
  DemandQueue q(RealClock::Get());
  Room room;
  room.Add(1);
  q.Push(&room, "gpu", room.Take("late"), absl::Milliseconds(20));
  ASSERT_TRUE(Eventually([&] { return room.Placed().size() == 1; }));
}

TEST(DemandQueueTest, AttemptsMayPushAndKick) {
  FakeClock clock;
  DemandQueue q(clock);
  Room room;
  room.Add(3);
  std::atomic<int> chain{0};
  std::function<Outcome()> step = [&]() -> Outcome {
    if (++chain < 3) q.Push(&room, "chain", step);
    q.Kick();
    return Outcome::kPlaced;
  };
  q.Push(&room, "chain", step);
  ASSERT_TRUE(Eventually([&] { return chain.load() == 3 && q.stats().waiting == 0; }));
}

TEST(DemandQueueTest, DetachDropsAnOwnersEntriesAndWaitsForItsAttempt) {
  FakeClock clock;
  DemandQueue q(clock);
  Room other;
  int owner = 0;
  absl::Notification running, release;
  std::atomic<bool> finished{false};
  q.Push(&owner, "slow", [&] {
    running.Notify();
    release.WaitForNotification();
    finished = true;
    return Outcome::kWaiting;
  });
  q.Push(&owner, "x", other.Take("mine"));
  q.Push(&other, "x", other.Take("theirs"));
  running.WaitForNotification();
  std::thread detach([&] { q.Detach(&owner); });
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_FALSE(finished.load());
  release.Notify();
  detach.join();
  EXPECT_TRUE(finished.load()) << "Detach returned while its owner's attempt ran";
  q.Push(&owner, "x", other.Take("after detach"));
  other.Add(5);
  q.Kick();
  ASSERT_TRUE(Eventually([&] { return other.Placed().size() == 1; }));
  q.Kick();
  ASSERT_TRUE(Eventually([&] { return q.stats().waiting == 0; }));
  EXPECT_EQ(other.Placed(), std::vector<std::string>{"theirs"});
}

TEST(DemandQueueTest, APausedQueueTriesNothingUntilResumed) {
  FakeClock clock;
  DemandQueue q(clock, /*paused=*/true);
  Room room;
  room.Add(1);
  q.Push(&room, "gpu", room.Take("held"));
  q.Kick();
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(q.stats().attempts, 0u);
  q.Resume();
  ASSERT_TRUE(Eventually([&] { return room.Placed().size() == 1; }));
}

TEST(DemandQueueTest, StopEndsWithEntriesLeft) {
  FakeClock clock;
  DemandQueue q(clock);
  Room room;
  q.Push(&room, "gpu", room.Take("never"));
  q.Stop();
  q.Push(&room, "gpu", room.Take("after stop"));
  EXPECT_EQ(q.stats().waiting, 0u);
}

// Given the head's event loop, attempts run on it, a long pass in slices: tasks posted
// meanwhile run between slices instead of after the whole pass.
TEST(DemandQueueTest, OnTheLoopAPassRunsInSlicesThatLetOtherTasksIn) {
  EventLoop loop;
  RealClock& clock = RealClock::Get();
  DemandQueue q(clock, /*paused=*/true, &loop);
  constexpr int kEntries = 4 * static_cast<int>(DemandQueue::kSlice);
  std::atomic<int> off_loop{0}, tried{0};
  std::atomic<int> tried_when_posted_ran{-1};
  for (int i = 0; i < kEntries; ++i)
    q.Push(&loop, "shape-" + std::to_string(i), [&] {
      if (!loop.OnLoop()) off_loop.fetch_add(1);
      // Halfway through the pass's first slice, another task asks for the loop.
      if (tried.fetch_add(1) == 10) loop.Post([&] { tried_when_posted_ran = tried.load(); });
      return Outcome::kWaiting;  // every shape fails: one attempt each, one pass
    });
  q.Resume();
  ASSERT_TRUE(Eventually([&] { return tried.load() == kEntries && !q.stats().busy; }));
  EXPECT_EQ(off_loop.load(), 0) << "attempts ran off the loop";
  EXPECT_EQ(q.stats().passes, 1u);
  // The posted task ran right after the first slice, not after the last.
  ASSERT_TRUE(Eventually([&] { return tried_when_posted_ran.load() >= 0; }));
  EXPECT_EQ(tried_when_posted_ran.load(), static_cast<int>(DemandQueue::kSlice));
  q.Stop();
}

}  // namespace
}  // namespace skyrl::head
