// PlacementGroupManager: names through a restart, and WaitAsync.
#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "runtime/store/memory/memory_store.h"
#include "tests/runtime/head/head_fixture.h"

namespace skyrl::head {
namespace {

TEST(PlacementGroupManagerTest, GroupNamesAreUniqueAmongLiveGroupsAndSurviveARestart) {
  store::MemoryStore store;
  FakeClock clock;
  testing::FakeWorkers workers;
  auto head = OpenTestHead(store, clock, workers);
  AddGpuNode(*head, 3003, 4);
  v1::PlacementGroupSpec named;
  named.set_name("trainer");
  named.set_namespace_("rl");
  (*named.add_bundles()->mutable_resources())["GPU"] = 1;
  absl::StatusOr<v1::PlacementGroupInfo> first = head->groups().Create(named);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<v1::PlacementGroupInfo> again = head->groups().Create(named);
  EXPECT_TRUE(absl::IsAlreadyExists(again.status())) << again.status();
  EXPECT_NE(again.status().message().find(first->placement_group_id()), absl::string_view::npos)
      << again.status();
  v1::PlacementGroupSpec other_ns = named;
  other_ns.set_namespace_("eval");
  EXPECT_TRUE(head->groups().Create(other_ns).ok()) << "the same name in another namespace is another group";
  // After a head restart the index is rebuilt from the store.
  head.reset();
  head = OpenTestHead(store, clock, workers);
  EXPECT_TRUE(absl::IsAlreadyExists(head->groups().Create(named).status()));
  // Removing the group frees its name.
  ASSERT_TRUE(head->groups().Remove(*PlacementGroupId::Parse(first->placement_group_id())).ok());
  absl::StatusOr<v1::PlacementGroupInfo> reused = head->groups().Create(named);
  ASSERT_TRUE(reused.ok()) << reused.status();
  EXPECT_NE(reused->placement_group_id(), first->placement_group_id());
}

TEST(PlacementGroupManagerTest, WaitAsyncIsSettledByChangeTimeoutOrStop) {
  store::MemoryStore store;
  FakeClock clock;
  testing::FakeWorkers workers;
  auto head = OpenTestHead(store, clock, workers);
  AddGpuNode(*head, 3002, 2);
  v1::PlacementGroupSpec two;
  (*two.add_bundles()->mutable_resources())["GPU"] = 2;
  absl::StatusOr<v1::PlacementGroupInfo> holder = head->groups().Create(two);
  ASSERT_TRUE(holder.ok() && holder->state() == v1::PG_CREATED) << holder.status();
  absl::StatusOr<v1::PlacementGroupInfo> waiter = head->groups().Create(two);
  ASSERT_TRUE(waiter.ok() && waiter->state() == v1::PG_PENDING) << waiter.status();
  PlacementGroupId wid = *PlacementGroupId::Parse(waiter->placement_group_id());

  // Already placed: answered inline.
  std::optional<absl::StatusOr<v1::PlacementGroupInfo>> now;
  head->groups().WaitAsync(*PlacementGroupId::Parse(holder->placement_group_id()), absl::Seconds(5),
                           [&](absl::StatusOr<v1::PlacementGroupInfo> g) { now = std::move(g); });
  ASSERT_TRUE(now.has_value() && now->ok());
  // Pending: a short wait times out with the reason, from the wait thread.
  absl::Notification timed_out;
  absl::Status timeout_status;
  head->groups().WaitAsync(wid, absl::Milliseconds(50), [&](absl::StatusOr<v1::PlacementGroupInfo> g) {
    timeout_status = g.status();
    timed_out.Notify();
  });
  ASSERT_TRUE(timed_out.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_TRUE(absl::IsDeadlineExceeded(timeout_status)) << timeout_status;
  EXPECT_NE(timeout_status.message().find("PENDING"), absl::string_view::npos) << timeout_status;
  // A long wait is settled by the change: removing the holder frees the GPUs.
  absl::Notification placed;
  absl::StatusOr<v1::PlacementGroupInfo> placed_group;
  head->groups().WaitAsync(wid, absl::Seconds(30), [&](absl::StatusOr<v1::PlacementGroupInfo> g) {
    placed_group = std::move(g);
    placed.Notify();
  });
  EXPECT_FALSE(placed.HasBeenNotified());
  ASSERT_TRUE(head->groups().Remove(*PlacementGroupId::Parse(holder->placement_group_id())).ok());
  ASSERT_TRUE(placed.WaitForNotificationWithTimeout(absl::Seconds(5)));
  ASSERT_TRUE(placed_group.ok()) << placed_group.status();
  EXPECT_EQ(placed_group->state(), v1::PG_CREATED);
  // A removed group's wait fails saying so; after StopWaits every wait is Unavailable.
  absl::StatusOr<v1::PlacementGroupInfo> third = head->groups().Create(two);
  ASSERT_TRUE(third.ok() && third->state() == v1::PG_PENDING);
  absl::Notification stopped;
  absl::Status stop_status;
  head->groups().WaitAsync(*PlacementGroupId::Parse(third->placement_group_id()), absl::Seconds(600),
                           [&](absl::StatusOr<v1::PlacementGroupInfo> g) {
                             stop_status = g.status();
                             stopped.Notify();
                           });
  head->groups().StopWaits();
  ASSERT_TRUE(stopped.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_TRUE(absl::IsUnavailable(stop_status)) << stop_status;
  std::optional<absl::StatusOr<v1::PlacementGroupInfo>> late;
  head->groups().WaitAsync(wid, absl::Seconds(5),
                           [&](absl::StatusOr<v1::PlacementGroupInfo> g) { late = std::move(g); });
  ASSERT_TRUE(late.has_value());
  EXPECT_TRUE(absl::IsUnavailable(late->status())) << late->status();
}

}  // namespace
}  // namespace skyrl::head
