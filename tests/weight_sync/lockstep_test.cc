// Lockstep (weight_sync/tcp/lockstep.h): members carrying the same bytes stay within a window
// of the slowest, a laggard is left behind after max_wait, and nobody waits for a member that
// left.
#include "weight_sync/tcp/lockstep.h"

#include <atomic>
#include <thread>

#include "gtest/gtest.h"

namespace skyrl::weight_sync::tcp_internal {
namespace {

// Each of `n` members sends `total` bytes in `step`s; member 0 sleeps between steps. Returns
// the largest lead any member had over member 0 when it was allowed to send.
int64_t LargestLead(int n, int64_t window, int64_t step, int64_t total, absl::Duration slow_step) {
  Lockstep ls(window, absl::Seconds(30));
  std::vector<int> members;
  for (int i = 0; i < n; ++i) members.push_back(ls.Join());
  std::atomic<int64_t> slow_at{0}, lead{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      for (int64_t off = 0; off < total; off += step) {
        ls.Wait(members[i], off);
        if (i == 0) {
          absl::SleepFor(slow_step);
          slow_at = off + step;
        } else {
          int64_t l = off - slow_at.load();
          int64_t seen = lead.load();
          while (l > seen && !lead.compare_exchange_weak(seen, l)) {
          }
        }
        ls.Advance(members[i], off + step);
      }
      ls.Leave(members[i]);
    });
  for (auto& t : threads) t.join();
  return lead.load();
}

TEST(LockstepTest, FastMembersWaitForTheSlowestWithinTheWindow) {
  const int64_t lead = LargestLead(3, /*window=*/4, /*step=*/1, /*total=*/40, absl::Milliseconds(2));
  EXPECT_LE(lead, 4) << "a member ran more than the window ahead of the slowest";
  EXPECT_GE(lead, 1) << "the fast members never got ahead at all";
}

TEST(LockstepTest, WithoutTheGroupTheFastMembersRunAhead) {
  // The same run with a window as large as the stream: the contrast that shows the bound above
  // comes from the window.
  EXPECT_GT(LargestLead(3, /*window=*/1000, /*step=*/1, /*total=*/40, absl::Milliseconds(2)), 4);
}

TEST(LockstepTest, ALaggardIsLeftBehindAfterMaxWait) {
  Lockstep ls(/*window=*/2, /*max_wait=*/absl::Milliseconds(50));
  const int stuck = ls.Join(), fast = ls.Join();
  ls.Wait(stuck, 0);  // starts, then never advances (a stalled receiver)
  const absl::Time t0 = absl::Now();
  for (int64_t off = 0; off < 10; ++off) {
    ls.Wait(fast, off);
    ls.Advance(fast, off + 1);
  }
  // Left behind once, not once per step.
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
  ls.Leave(stuck);
  ls.Leave(fast);
}

TEST(LockstepTest, NobodyWaitsForAMemberThatLeft) {
  Lockstep ls(/*window=*/1, /*max_wait=*/absl::Seconds(30));
  const int a = ls.Join(), b = ls.Join();
  ls.Leave(a);  // e.g. its connection failed before it sent anything
  const absl::Time t0 = absl::Now();
  for (int64_t off = 0; off < 100; ++off) {
    ls.Wait(b, off);
    ls.Advance(b, off + 1);
  }
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
}

TEST(LockstepTest, AMemberCannotJoinOnceSendingStarted) {
  Lockstep ls(/*window=*/1, /*max_wait=*/absl::Seconds(1));
  const int a = ls.Join();
  EXPECT_EQ(a, 0);
  ls.Wait(a, 0);
  EXPECT_EQ(ls.Join(), -1);
}

}  // namespace
}  // namespace skyrl::weight_sync::tcp_internal
