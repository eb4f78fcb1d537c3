// Bounded retention of DEAD actors and REMOVED groups (--keep-terminal): the flag, the cap in
// memory and in the store across restarts, and eviction while a start is in flight.
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

TEST(RetentionTest, KeepTerminalFlagIsValidatedNamingTheFlag) {
  for (int64_t bad : {int64_t(-1), kMaxKeepTerminal + 1}) {
    absl::StatusOr<RetentionOptions> r = RetentionFromFlag(bad);
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << bad << ": " << r.status();
    EXPECT_NE(r.status().message().find("--keep-terminal"), absl::string_view::npos) << r.status();
    EXPECT_NE(r.status().message().find(absl::StrCat(bad)), absl::string_view::npos) << r.status();
  }
  for (int64_t good : {int64_t(0), int64_t(3), kMaxKeepTerminal}) {
    absl::StatusOr<RetentionOptions> r = RetentionFromFlag(good);
    ASSERT_TRUE(r.ok()) << good << ": " << r.status();
    EXPECT_EQ(r->keep_terminal, size_t(good));
  }
  EXPECT_EQ(RetentionOptions().keep_terminal, 10000u) << "the documented default";
}

std::vector<std::string> IdsIn(const std::vector<v1::ActorInfo>& actors, v1::ActorState state) {
  std::vector<std::string> out;
  for (const auto& a : actors)
    if (a.state() == state) out.push_back(a.actor_id());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> IdsIn(const std::vector<v1::PlacementGroupInfo>& groups,
                               v1::PlacementGroupState state) {
  std::vector<std::string> out;
  for (const auto& g : groups)
    if (g.state() == state) out.push_back(g.placement_group_id());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> Sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// The last `n` of `v`, sorted.
std::vector<std::string> Last(const std::vector<std::string>& v, size_t n) {
  return Sorted(std::vector<std::string>(v.end() - std::ptrdiff_t(std::min(n, v.size())), v.end()));
}

v1::PlacementGroupSpec CpuGroup() {
  v1::PlacementGroupSpec spec;
  (*spec.add_bundles()->mutable_resources())["CPU"] = 1;
  return spec;
}

v1::ActorSpec CpuActor(int max_restarts = 0) {
  v1::ActorSpec spec;
  spec.set_class_name("echo");
  (*spec.mutable_resources())["CPU"] = 1;
  spec.set_max_restarts(max_restarts);
  return spec;
}

TEST(RetentionTest, KeepsTheMostRecentTerminalRecordsInMemoryAndStoreAcrossRestarts) {
  store::MemoryStore store;
  FakeClock clock;
  testing::FakeWorkers workers;
  const RetentionOptions keep3{3};
  auto head = OpenTestHead(store, clock, workers, keep3);
  v1::NodeInfo big;
  big.set_address("127.0.0.1:4000");
  (*big.mutable_resources_total())["CPU"] = 64;
  ASSERT_TRUE(head->nodes().Register(big).ok());
  // A node with the only "special" unit: its actor becomes RESTARTING, waiting for room, when
  // the node goes, and must survive every eviction.
  v1::NodeInfo special;
  special.set_address("127.0.0.1:4001");
  (*special.mutable_resources_total())["special"] = 1;
  ASSERT_TRUE(head->nodes().Register(special).ok());

  // Live records that must stay: two groups, two ALIVE actors, one RESTARTING actor.
  std::vector<std::string> live_groups, live_actors;
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<v1::PlacementGroupInfo> g = head->groups().Create(CpuGroup());
    ASSERT_TRUE(g.ok() && g->state() == v1::PG_CREATED) << g.status();
    live_groups.push_back(g->placement_group_id());
    absl::StatusOr<v1::ActorInfo> a = head->actors().Create(CpuActor());
    ASSERT_TRUE(a.ok() && a->state() == v1::ACTOR_ALIVE) << a.status();
    live_actors.push_back(a->actor_id());
  }
  v1::ActorSpec needs_special = CpuActor(/*max_restarts=*/-1);
  needs_special.mutable_resources()->clear();
  (*needs_special.mutable_resources())["special"] = 1;
  absl::StatusOr<v1::ActorInfo> survivor = head->actors().Create(needs_special);
  ASSERT_TRUE(survivor.ok() && survivor->state() == v1::ACTOR_ALIVE) << survivor.status();
  ASSERT_TRUE(head->nodes().Unregister(*NodeId::Parse(survivor->node_id()), "test: node gone").ok());
  absl::StatusOr<v1::ActorInfo> restarting = head->actors().Get(*ActorId::Parse(survivor->actor_id()));
  ASSERT_TRUE(restarting.ok()) << restarting.status();
  ASSERT_EQ(restarting->state(), v1::ACTOR_RESTARTING);

  // Ten groups removed and ten actors killed (by the user, or by an exit with no restarts
  // left), a second apart: the three most recent of each remain.
  std::vector<std::string> removed, dead;
  for (int i = 0; i < 10; ++i) {
    absl::StatusOr<v1::PlacementGroupInfo> g = head->groups().Create(CpuGroup());
    ASSERT_TRUE(g.ok()) << g.status();
    ASSERT_TRUE(head->groups().Remove(*PlacementGroupId::Parse(g->placement_group_id())).ok());
    removed.push_back(g->placement_group_id());
    clock.Advance(absl::Seconds(1));
    absl::StatusOr<v1::ActorInfo> a = head->actors().Create(CpuActor());
    ASSERT_TRUE(a.ok() && a->state() == v1::ACTOR_ALIVE) << a.status();
    if (i % 2) {
      ASSERT_TRUE(head->actors().Kill(*ActorId::Parse(a->actor_id())).ok());
    } else {
      v1::ActorExitInfo exit;
      exit.set_actor_id(a->actor_id());
      exit.set_exit_code(1);
      exit.set_description("exit code 1");
      head->actors().OnActorExit(*NodeId::Parse(a->node_id()), exit);
    }
    dead.push_back(a->actor_id());
    clock.Advance(absl::Seconds(1));
  }
  auto expect_tables = [&](Head& h, const std::vector<std::string>& want_removed,
                           const std::vector<std::string>& want_dead, const std::string& when) {
    SCOPED_TRACE(when);
    std::vector<v1::PlacementGroupInfo> groups = h.groups().List();
    std::vector<v1::ActorInfo> actors = h.actors().List();
    EXPECT_EQ(IdsIn(groups, v1::PG_REMOVED), want_removed);
    EXPECT_EQ(IdsIn(groups, v1::PG_CREATED), Sorted(live_groups));
    EXPECT_EQ(IdsIn(actors, v1::ACTOR_DEAD), want_dead);
    EXPECT_EQ(IdsIn(actors, v1::ACTOR_ALIVE), Sorted(live_actors));
    EXPECT_EQ(IdsIn(actors, v1::ACTOR_RESTARTING), std::vector<std::string>{survivor->actor_id()});
    absl::Status s = CheckRetention(h, store, 3);
    EXPECT_TRUE(s.ok()) << s;
    s = Check(h);
    EXPECT_TRUE(s.ok()) << s;
  };
  expect_tables(*head, Last(removed, 3), Last(dead, 3), "after ten of each");
  for (const v1::ActorInfo& a : head->actors().List()) {
    if (a.state() == v1::ACTOR_DEAD) EXPECT_GT(a.died_unix_ms(), 0) << a.actor_id();
  }
  for (const v1::PlacementGroupInfo& g : head->groups().List()) {
    if (g.state() == v1::PG_REMOVED)
      EXPECT_GE(g.removed_unix_ms(), g.created_unix_ms()) << g.placement_group_id();
  }

  // What callers see: an evicted record is NotFound; a kept one still answers as before.
  ActorId evicted_actor = *ActorId::Parse(dead.front());
  PlacementGroupId evicted_group = *PlacementGroupId::Parse(removed.front());
  EXPECT_TRUE(absl::IsNotFound(head->actors().Get(evicted_actor).status()));
  EXPECT_TRUE(absl::IsNotFound(head->actors().Kill(evicted_actor)));
  EXPECT_TRUE(absl::IsNotFound(head->groups().Get(evicted_group).status()));
  EXPECT_TRUE(absl::IsNotFound(head->groups().Remove(evicted_group)));
  EXPECT_TRUE(absl::IsNotFound(WaitFor(head->groups(), evicted_group, absl::ZeroDuration()).status()));
  absl::StatusOr<v1::ActorInfo> kept = head->actors().Get(*ActorId::Parse(dead.back()));
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->state(), v1::ACTOR_DEAD);
  EXPECT_TRUE(head->actors().Kill(*ActorId::Parse(dead.back())).ok())
      << "killing a kept DEAD actor is a no-op";
  EXPECT_TRUE(absl::IsFailedPrecondition(
      WaitFor(head->groups(), *PlacementGroupId::Parse(removed.back()), absl::ZeroDuration()).status()));

  // A head restart keeps the cap and the order: one more of each evicts the oldest kept.
  head.reset();
  head = OpenTestHead(store, clock, workers, keep3);
  expect_tables(*head, Last(removed, 3), Last(dead, 3), "after a restart");
  {
    absl::StatusOr<v1::PlacementGroupInfo> g = head->groups().Create(CpuGroup());
    ASSERT_TRUE(g.ok()) << g.status();
    ASSERT_TRUE(head->groups().Remove(*PlacementGroupId::Parse(g->placement_group_id())).ok());
    removed.push_back(g->placement_group_id());
    absl::StatusOr<v1::ActorInfo> a = head->actors().Create(CpuActor());
    ASSERT_TRUE(a.ok() && a->state() == v1::ACTOR_ALIVE) << a.status();
    ASSERT_TRUE(head->actors().Kill(*ActorId::Parse(a->actor_id())).ok());
    dead.push_back(a->actor_id());
    clock.Advance(absl::Seconds(1));
  }
  expect_tables(*head, Last(removed, 3), Last(dead, 3), "one more of each after the restart");

  // Records written before the death/removal times existed: a DEAD actor without
  // died_unix_ms is the oldest; a REMOVED group without removed_unix_ms counts from its
  // creation (here the newest of all).
  head.reset();
  v1::ActorInfo old_actor;
  old_actor.set_actor_id(ActorId::Random().ToString());
  *old_actor.mutable_spec() = CpuActor();
  old_actor.set_state(v1::ACTOR_DEAD);
  ASSERT_TRUE(store.Put(kActorsTable, old_actor.actor_id(), old_actor.SerializeAsString()).ok());
  v1::PlacementGroupInfo old_group;
  old_group.set_placement_group_id(PlacementGroupId::Random().ToString());
  *old_group.mutable_spec() = CpuGroup();
  old_group.set_state(v1::PG_REMOVED);
  old_group.set_created_unix_ms(absl::ToUnixMillis(clock.Now()) + 1000);
  ASSERT_TRUE(
      store.Put(kPlacementGroupsTable, old_group.placement_group_id(), old_group.SerializeAsString()).ok());
  head = OpenTestHead(store, clock, workers, keep3);
  removed.push_back(old_group.placement_group_id());
  expect_tables(*head, Last(removed, 3), Last(dead, 3), "old records");

  // A head started with a smaller cap trims the store at once.
  head.reset();
  head = OpenTestHead(store, clock, workers, RetentionOptions{1});
  expect_tables(*head, Last(removed, 1), Last(dead, 1), "restarted with --keep-terminal 1");
  EXPECT_EQ(StoredKeys(store, kActorsTable).size(), 2u + 1u + 1u);      // ALIVE, RESTARTING, DEAD
  EXPECT_EQ(StoredKeys(store, kPlacementGroupsTable).size(), 2u + 1u);  // CREATED, REMOVED
}

TEST(RetentionTest, KeepNoneForgetsEachAtOnceEvenWhileItsStartIsInFlight) {
  store::MemoryStore store;
  FakeClock clock;
  testing::FakeWorkers workers;
  workers.hold = true;
  auto head = OpenTestHead(store, clock, workers, RetentionOptions{0});
  AddGpuNode(*head, 4100, 2);
  // Killed while its start is in flight: evicted at once, so the late start finds no actor,
  // answers NotFound, and the process it started is killed.
  std::optional<absl::StatusOr<v1::ActorInfo>> created;
  head->actors().CreateAsync(Spec("echo", 1),
                             [&](absl::StatusOr<v1::ActorInfo> a) { created = std::move(a); });
  std::vector<v1::ActorInfo> listed = head->actors().List();
  ASSERT_EQ(listed.size(), 1u);
  ActorId id = *ActorId::Parse(listed[0].actor_id());
  ASSERT_TRUE(head->actors().Kill(id).ok());
  EXPECT_TRUE(head->actors().List().empty());
  EXPECT_TRUE(absl::IsNotFound(head->actors().Get(id).status()));
  workers.Release();
  Settle(*head);
  ASSERT_TRUE(created.has_value());
  EXPECT_TRUE(absl::IsNotFound(created->status())) << created->status();
  std::vector<std::string> killed = workers.Killed();
  EXPECT_EQ(std::count(killed.begin(), killed.end(), id.ToString()), 2)
      << "the kill, and the late start's process";
  // A constructor error: the creator still gets the DEAD actor with the reason, then it is gone.
  workers.hold = false;
  absl::StatusOr<v1::ActorInfo> broken = head->actors().Create(Spec("broken", 1));
  ASSERT_TRUE(broken.ok()) << broken.status();
  EXPECT_EQ(broken->state(), v1::ACTOR_DEAD);
  EXPECT_NE(broken->death_reason().find("no config"), absl::string_view::npos) << broken->death_reason();
  EXPECT_TRUE(absl::IsNotFound(head->actors().Get(*ActorId::Parse(broken->actor_id())).status()));
  // Removing a group with an actor in it: both forgotten, the GPUs free again.
  v1::PlacementGroupSpec two;
  (*two.add_bundles()->mutable_resources())["GPU"] = 2;
  absl::StatusOr<v1::PlacementGroupInfo> g = head->groups().Create(two);
  ASSERT_TRUE(g.ok() && g->state() == v1::PG_CREATED) << g.status();
  v1::ActorSpec in_group = Spec("echo", 1);
  in_group.set_placement_group_id(g->placement_group_id());
  absl::StatusOr<v1::ActorInfo> member = head->actors().Create(in_group);
  ASSERT_TRUE(member.ok() && member->state() == v1::ACTOR_ALIVE) << member.status();
  ASSERT_TRUE(head->groups().Remove(*PlacementGroupId::Parse(g->placement_group_id())).ok());
  EXPECT_TRUE(head->groups().List().empty());
  EXPECT_TRUE(head->actors().List().empty());
  EXPECT_TRUE(StoredKeys(store, kActorsTable).empty());
  EXPECT_TRUE(StoredKeys(store, kPlacementGroupsTable).empty());
  absl::StatusOr<v1::PlacementGroupInfo> again = head->groups().Create(two);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->state(), v1::PG_CREATED);
  absl::Status s = Check(*head);
  EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace skyrl::head
