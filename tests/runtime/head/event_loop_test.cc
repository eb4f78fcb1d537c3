// head::EventLoop: tasks run one at a time in the order posted, Run answers from the loop
// (inline on it, or on the caller's thread while the loop is idle), and Drain waits for
// holds (work outside the loop) and what they post.
#include "runtime/head/event_loop.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace skyrl::head {
namespace {

TEST(EventLoopTest, TasksFromManyThreadsRunOneAtATimeInTheOrderEachThreadPostedThem) {
  EventLoop loop;
  constexpr int kThreads = 4, kPerThread = 2000;
  std::vector<std::vector<int>> seen(kThreads);  // touched only on the loop
  std::atomic<int> inside{0}, overlaps{0};
  std::vector<std::thread> posters;
  for (int t = 0; t < kThreads; ++t)
    posters.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i)
        loop.Post([&, t, i] {
          if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
          seen[t].push_back(i);
          inside.fetch_sub(1);
        });
    });
  for (auto& p : posters) p.join();
  loop.Drain();
  EXPECT_EQ(overlaps.load(), 0) << "two tasks ran at once";
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(seen[t].size(), size_t{kPerThread});
    for (int i = 0; i < kPerThread; ++i) ASSERT_EQ(seen[t][i], i) << "thread " << t << " out of order";
  }
  EXPECT_EQ(loop.stats().tasks, uint64_t{kThreads * kPerThread});
}

TEST(EventLoopTest, RunAnswersFromTheLoopAndRunsInlineWhenCalledOnIt) {
  EventLoop loop;
  EXPECT_FALSE(loop.OnLoop());
  EXPECT_TRUE(loop.Run([&] { return loop.OnLoop(); }));
  // A task that calls a blocking method of a manager on the same loop does not wait for
  // itself.
  int depth = loop.Run([&] { return loop.Run([&] { return loop.OnLoop() ? 2 : -1; }); });
  EXPECT_EQ(depth, 2);
  loop.Run([] {});  // void
  // Run comes after what was posted before it.
  std::vector<int> order;
  loop.Post([&] { order.push_back(1); });
  loop.Run([&] { order.push_back(2); });
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST(EventLoopTest, RunWithTheLoopIdleRunsOnTheCallersThreadAndOtherwiseQueuesBehind) {
  EventLoop loop;
  loop.Drain();
  const std::thread::id me = std::this_thread::get_id();
  EXPECT_EQ(loop.Run([] { return std::this_thread::get_id(); }), me) << "idle: run here, no hand-off";
  EXPECT_EQ(loop.stats().inline_runs, 1u);
  // Busy (a task runs): Run queues behind it and the loop thread answers.
  absl::Notification started, release;
  loop.Post([&] {
    started.Notify();
    release.WaitForNotification();
  });
  started.WaitForNotification();
  std::thread answerer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    release.Notify();
  });
  EXPECT_NE(loop.Run([] { return std::this_thread::get_id(); }), me);
  answerer.join();
  // While a caller runs inline, the loop thread starts nothing: a task posted meanwhile
  // runs after it.
  std::vector<int> order;
  absl::Notification inside;
  std::thread poster([&] {
    inside.WaitForNotification();
    loop.Post([&] { order.push_back(2); });
  });
  loop.Drain();
  loop.Run([&] {
    inside.Notify();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    order.push_back(1);
  });
  poster.join();
  loop.Drain();
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST(EventLoopTest, ManyThreadsMixingRunDispatchAndPostNeverOverlap) {
  EventLoop loop;
  constexpr int kThreads = 4, kPerThread = 3000;
  std::atomic<int> inside{0}, overlaps{0};
  int count = 0;  // touched only on the loop
  auto body = [&] {
    if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
    ++count;
    inside.fetch_sub(1);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        switch ((t + i) % 3) {
          case 0:
            loop.Run(body);
            break;
          case 1:
            loop.Dispatch(body);
            break;
          default:
            loop.Post(body);
        }
      }
    });
  for (auto& t : threads) t.join();
  loop.Drain();
  EXPECT_EQ(overlaps.load(), 0) << "two holders of the loop at once";
  EXPECT_EQ(count, kThreads * kPerThread);
  EXPECT_EQ(loop.stats().tasks, uint64_t{kThreads * kPerThread});
}

TEST(EventLoopTest, DispatchOnTheLoopRunsAfterTheCurrentTask) {
  EventLoop loop;
  std::vector<int> order;
  loop.Run([&] {
    loop.Dispatch([&] { order.push_back(2); });
    order.push_back(1);
  });
  loop.Drain();
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  // Off the loop with the loop idle: done when Dispatch returns.
  loop.Dispatch([&] { order.push_back(3); });
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST(EventLoopTest, DrainWaitsForHoldsAndForWhatTheirCompletionsPost) {
  EventLoop loop;
  std::atomic<bool> answered{false};
  auto hold = std::make_shared<EventLoop::Hold>(loop.Acquire());
  EXPECT_EQ(loop.stats().holds, 1);
  // An RPC in flight on another thread, answering after a while through the loop.
  std::thread rpc([&, hold]() mutable {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    loop.Post([&, hold] { answered = true; });
    hold.reset();
  });
  hold.reset();
  loop.Drain();
  EXPECT_TRUE(answered.load()) << "Drain returned before the completion ran";
  EXPECT_EQ(loop.stats().holds, 0);
  rpc.join();

  // Moving a hold moves the work it stands for; releasing twice counts once.
  EventLoop::Hold a = loop.Acquire();
  EventLoop::Hold b = std::move(a);
  a.Release();
  EXPECT_EQ(loop.stats().holds, 1);
  b.Release();
  b.Release();
  EXPECT_EQ(loop.stats().holds, 0);
}

TEST(EventLoopTest, TasksPostedAfterShutdownAreDroppedUnrun) {
  auto loop = std::make_unique<EventLoop>();
  std::atomic<int> ran{0};
  loop->Post([&] { ++ran; });
  loop->Shutdown();
  EXPECT_EQ(ran.load(), 1) << "Shutdown drains first";
  auto flag = std::make_shared<int>(0);
  loop->Post([&ran, flag] { ++ran; });
  EXPECT_EQ(flag.use_count(), 1) << "a dropped task is destroyed at once";
  EXPECT_EQ(ran.load(), 1);
  loop->Shutdown();  // idempotent
}

TEST(EventLoopDeathTest, StateOfTheLoopTouchedOffItAborts) {
  EventLoop loop;
  EXPECT_DEATH(loop.AssertOnLoop(), "off the loop");
  loop.Run([&] { loop.AssertOnLoop(); });  // on it: fine
}

}  // namespace
}  // namespace skyrl::head
