// ActorManager: batches, asynchronous creation, and names through restarts, deaths and
// recovery.
#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <filesystem>
#include <map>
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

TEST(ActorManagerTest, BatchSettlesEachItemOnItsOwn) {
  store::MemoryStore store;
  FakeClock clock;
  testing::FakeWorkers workers;
  auto head = OpenTestHead(store, clock, workers);
  AddGpuNode(*head, 3000, 4);
  std::vector<absl::StatusOr<v1::ActorInfo>> r =
      CreateBatch(head->actors(), {Spec("echo", 1, "a"),  // fits
                                   Spec("", 1),           // invalid: no class
                                   Spec("echo", 16),      // can never fit this cluster
                                   Spec("echo", 1, "a"),  // name taken by the first item
                                   Spec("broken", 1),     // placed, but its constructor fails
                                   Spec("echo", 2)});     // fits beside the first
  ASSERT_EQ(r.size(), 6u);
  ASSERT_TRUE(r[0].ok()) << r[0].status();
  EXPECT_EQ(r[0]->state(), v1::ACTOR_ALIVE);
  EXPECT_TRUE(absl::IsInvalidArgument(r[1].status())) << r[1].status();
  EXPECT_NE(r[1].status().message().find("spec.class_name"), absl::string_view::npos) << r[1].status();
  EXPECT_TRUE(absl::IsResourceExhausted(r[2].status())) << r[2].status();
  EXPECT_NE(r[2].status().message().find("GPU"), absl::string_view::npos) << r[2].status();
  EXPECT_TRUE(absl::IsAlreadyExists(r[3].status())) << r[3].status();
  EXPECT_NE(r[3].status().message().find(r[0]->actor_id()), absl::string_view::npos) << r[3].status();
  ASSERT_TRUE(r[4].ok()) << r[4].status();
  EXPECT_EQ(r[4]->state(), v1::ACTOR_DEAD);
  EXPECT_NE(r[4]->death_reason().find("no config"), absl::string_view::npos) << r[4]->death_reason();
  ASSERT_TRUE(r[5].ok()) << r[5].status();
  EXPECT_EQ(r[5]->state(), v1::ACTOR_ALIVE);
  // Failed items left nothing behind: the table holds the two ALIVE actors and the DEAD one,
  // and the broken actor gave its GPU back (4 GPUs: 1 + 2 taken, so a third GPU=1 fits).
  EXPECT_EQ(head->actors().List().size(), 3u);
  absl::StatusOr<v1::ActorInfo> more = head->actors().Create(Spec("echo", 1));
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_EQ(more->state(), v1::ACTOR_ALIVE);
  absl::Status s = Check(*head);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(ActorManagerTest, StartsThatKeepFailingAreRetriedLessAndLessOften) {
  store::MemoryStore store;
  FakeClock clock;
  testing::FakeWorkers workers;
  auto head = OpenTestHead(store, clock, workers);
  AddGpuNode(*head, 3000, 1);
  v1::ActorSpec spec = Spec("refused", 1);
  spec.set_max_restarts(-1);
  absl::StatusOr<v1::ActorInfo> a = head->actors().Create(spec);
  ASSERT_TRUE(a.ok()) << a.status();
  // Retried at once, then after 50, 100, 200 ms... of the head's clock, where retrying at
  // once made thousands of tries a second. Each retry waits in the demand queue.
  auto retry_after = [&](size_t tries) -> absl::Duration {
    for (absl::Time end = absl::Now() + absl::Seconds(10); absl::Now() < end;
         absl::SleepFor(absl::Milliseconds(1)))
      if (workers.Started().size() == tries && head->demand().stats().delayed == 1) break;
    EXPECT_EQ(workers.Started().size(), tries);
    return head->demand().stats().next_due - clock.Now();
  };
  EXPECT_EQ(retry_after(2), absl::Milliseconds(50));
  clock.Advance(absl::Milliseconds(50));
  head->demand().Kick();
  EXPECT_EQ(retry_after(3), absl::Milliseconds(100));
  clock.Advance(absl::Milliseconds(100));
  head->demand().Kick();
  EXPECT_EQ(retry_after(4), absl::Milliseconds(200));
  EXPECT_NE(head->actors().Get(*ActorId::Parse(a->actor_id()))->death_reason().find("cannot start it"),
            std::string::npos);
}

// A node the scheduler still holds while the node table no longer holds it alive (its death
// is being announced): placement passes over it instead of failing the actor.
TEST(ActorManagerTest, ANodeWhoseDeathIsBeingAnnouncedIsPassedOver) {
  store::MemoryStore store;
  FakeClock clock;
  testing::FakeWorkers workers;
  auto head = OpenTestHead(store, clock, workers);
  AddGpuNode(*head, 3000, 4);
  // In the scheduler only, and a tighter fit for one GPU than the node above.
  ASSERT_TRUE(head->resources()
                  .With([](scheduler::Cluster& c) {
                    return c.AddNode(scheduler::NodeSpec{
                        "node-000000000000000000000000", *ResourceSet::Parse("CPU=64,GPU=1"), {}, {0}});
                  })
                  .ok());
  absl::StatusOr<v1::ActorInfo> a = head->actors().Create(Spec("echo", 1));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->state(), v1::ACTOR_ALIVE) << a->death_reason();
  EXPECT_NE(a->node_id(), "node-000000000000000000000000");
  // With nowhere else to go, a creation that may wait does.
  absl::StatusOr<v1::ActorInfo> three = head->actors().Create(Spec("echo", 3));
  ASSERT_TRUE(three.ok() && three->state() == v1::ACTOR_ALIVE) << three.status();  // the real node is full
  absl::Notification done;
  absl::StatusOr<v1::ActorInfo> waiting;
  head->actors().CreateAsync(
      Spec("echo", 1),
      [&](absl::StatusOr<v1::ActorInfo> r) {
        waiting = std::move(r);
        done.Notify();
      },
      /*return_pending=*/true);
  done.WaitForNotification();
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  EXPECT_EQ(waiting->state(), v1::ACTOR_PENDING) << waiting->death_reason();
  EXPECT_TRUE(waiting->node_id().empty());
}

TEST(ActorManagerTest, ALateExitOfAnOlderStartLeavesTheNewOneAlone) {
  store::MemoryStore store;
  FakeClock clock;
  testing::FakeWorkers workers;
  auto head = OpenTestHead(store, clock, workers);
  AddGpuNode(*head, 3000, 1);  // one node: the restart lands where the old process ran
  v1::ActorSpec spec = Spec("echo", 1);
  spec.set_max_restarts(-1);
  absl::StatusOr<v1::ActorInfo> a = head->actors().Create(spec);
  ASSERT_TRUE(a.ok() && a->state() == v1::ACTOR_ALIVE) << a.status();
  EXPECT_EQ(a->incarnation(), 1);
  const NodeId node = *NodeId::Parse(a->node_id());
  v1::ActorExitInfo crash;
  crash.set_actor_id(a->actor_id());
  crash.set_incarnation(1);
  crash.set_description("exit code 1");
  head->actors().OnActorExit(node, crash);
  absl::StatusOr<v1::ActorInfo> second = AwaitActorState(head->actors(), a->actor_id(), v1::ACTOR_ALIVE);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->incarnation(), 2);
  ASSERT_EQ(workers.Started().size(), 2u);
  EXPECT_EQ(workers.Started()[1].incarnation(), 2) << "the worker is told which start it is";
  // The first start's exit again, late, once as a stop that was asked for: neither is the end
  // of the second, which would have made it DEAD ("killed by the user") or restarted it.
  head->actors().OnActorExit(node, crash);
  crash.set_killed_by_request(true);
  head->actors().OnActorExit(node, crash);
  absl::StatusOr<v1::ActorInfo> now = head->actors().Get(*ActorId::Parse(a->actor_id()));
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_EQ(now->state(), v1::ACTOR_ALIVE);
  EXPECT_EQ(now->incarnation(), 2);
  EXPECT_EQ(workers.Started().size(), 2u);
  // Its own exit is.
  crash.set_incarnation(2);
  crash.set_killed_by_request(false);
  head->actors().OnActorExit(node, crash);
  absl::StatusOr<v1::ActorInfo> third = AwaitActorState(head->actors(), a->actor_id(), v1::ACTOR_ALIVE);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(third->incarnation(), 3);
  // A kill names the start it stops, so that it cannot stop a newer one.
  ASSERT_TRUE(head->actors().Kill(*ActorId::Parse(a->actor_id())).ok());
  ASSERT_FALSE(workers.Kills().empty());
  EXPECT_EQ(workers.Kills().back().incarnation(), 3);
}

absl::Status Restart(ActorManager& actors, const std::string& id) {
  absl::Status out;
  absl::Notification done;
  actors.RestartAsync(*ActorId::Parse(id), [&](absl::Status s) {
    out = std::move(s);
    done.Notify();
  });
  done.WaitForNotification();
  return out;
}

TEST(ActorManagerTest, ARestartKillStopsTheProcessAndRestartsWhileRestartsLast) {
  store::MemoryStore store;
  FakeClock clock;
  testing::FakeWorkers workers;
  auto head = OpenTestHead(store, clock, workers);
  AddGpuNode(*head, 3000, 1);
  v1::ActorSpec spec = Spec("echo", 1);
  spec.set_max_restarts(1);
  absl::StatusOr<v1::ActorInfo> a = head->actors().Create(spec);
  ASSERT_TRUE(a.ok() && a->state() == v1::ACTOR_ALIVE) << a.status();
  // Ray's kill(no_restart=False): the first start is stopped (by its incarnation), a second
  // one takes its place, and the restart is counted.
  ASSERT_TRUE(Restart(head->actors(), a->actor_id()).ok());
  absl::StatusOr<v1::ActorInfo> second = AwaitActorState(head->actors(), a->actor_id(), v1::ACTOR_ALIVE);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->incarnation(), 2);
  EXPECT_EQ(second->restarts(), 1);
  ASSERT_FALSE(workers.Kills().empty());
  EXPECT_EQ(workers.Kills().back().incarnation(), 1);
  ASSERT_EQ(workers.Started().size(), 2u);
  // No restart left: the process is killed and the actor is DEAD, saying why.
  ASSERT_TRUE(Restart(head->actors(), a->actor_id()).ok());
  absl::StatusOr<v1::ActorInfo> dead = AwaitActorState(head->actors(), a->actor_id(), v1::ACTOR_DEAD);
  ASSERT_TRUE(dead.ok()) << dead.status();
  EXPECT_NE(dead->death_reason().find("no_restart=False"), std::string::npos) << dead->death_reason();
  EXPECT_NE(dead->death_reason().find("no restarts left"), std::string::npos) << dead->death_reason();
  for (int i = 0; i < 1000 && workers.Kills().back().incarnation() != 2; ++i)
    absl::SleepFor(absl::Milliseconds(5));  // sent after the state changed
  EXPECT_EQ(workers.Kills().back().incarnation(), 2);
  EXPECT_EQ(workers.Started().size(), 2u);
  // A DEAD actor is left as it is; an unknown one is NotFound.
  EXPECT_TRUE(Restart(head->actors(), a->actor_id()).ok());
  EXPECT_EQ(workers.Started().size(), 2u);
  EXPECT_TRUE(absl::IsNotFound(Restart(head->actors(), ActorId::Random().ToString())));
  absl::Status s = Check(*head);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(ActorManagerTest, AnActorBlockedWaitingLendsItsCpuUntilUnblocked) {
  store::MemoryStore store;
  FakeClock clock;
  testing::FakeWorkers workers;
  auto head = OpenTestHead(store, clock, workers);
  AddGpuNode(*head, 3000, 1);  // 64 CPUs
  v1::ActorSpec all_cpus = Spec("echo", 0);
  (*all_cpus.mutable_resources())["CPU"] = 64;
  absl::StatusOr<v1::ActorInfo> parent = head->actors().Create(all_cpus);
  ASSERT_TRUE(parent.ok() && parent->state() == v1::ACTOR_ALIVE) << parent.status();
  v1::ActorSpec one_cpu = Spec("echo", 0);
  (*one_cpu.mutable_resources())["CPU"] = 1;
  EXPECT_TRUE(absl::IsResourceExhausted(head->actors().Create(one_cpu).status()));
  const ActorId id = *ActorId::Parse(parent->actor_id());
  // Blocked: its CPUs go to others (a child), and the head's books still add up.
  ASSERT_TRUE(head->actors().SetBlocked(id, true).ok());
  absl::StatusOr<v1::ActorInfo> child = head->actors().Create(one_cpu);
  ASSERT_TRUE(child.ok() && child->state() == v1::ACTOR_ALIVE) << child.status();
  absl::Status s = Check(*head);
  EXPECT_TRUE(s.ok()) << s;
  // Unblocked while the child runs: not held yet; once the child is gone, held again.
  absl::StatusOr<bool> holds = head->actors().SetBlocked(id, false);
  ASSERT_TRUE(holds.ok()) << holds.status();
  EXPECT_FALSE(*holds);
  ASSERT_TRUE(head->actors().Kill(*ActorId::Parse(child->actor_id())).ok());
  holds = head->actors().SetBlocked(id, false);
  ASSERT_TRUE(holds.ok()) << holds.status();
  EXPECT_TRUE(*holds);
  EXPECT_TRUE(absl::IsResourceExhausted(head->actors().Create(one_cpu).status()));
  EXPECT_TRUE(absl::IsNotFound(head->actors().SetBlocked(ActorId::Random(), true).status()));
  s = Check(*head);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(ActorManagerTest, FallbackLabelSelectorsPlaceWhereThePrimaryHasNoRoom) {
  store::MemoryStore store;
  FakeClock clock;
  testing::FakeWorkers workers;
  auto head = OpenTestHead(store, clock, workers);
  std::map<std::string, NodeId> zone;
  for (const std::string z : {"a", "b"}) {
    v1::NodeInfo info;
    info.set_address(absl::StrCat("127.0.0.1:", z == "a" ? 3000 : 3001));
    (*info.mutable_resources_total())["CPU"] = 64;
    (*info.mutable_resources_total())["GPU"] = 1;
    info.add_gpu_ids(0);
    (*info.mutable_labels())["zone"] = z;
    absl::StatusOr<NodeId> id = head->nodes().Register(info);
    ASSERT_TRUE(id.ok()) << id.status();
    zone.emplace(z, *id);
  }
  v1::ActorSpec spec = Spec("echo", 1);
  (*spec.mutable_label_selector())["zone"] = "a";
  (*spec.add_fallback_label_selectors()->mutable_labels())["zone"] = "c";  // no such node
  (*spec.add_fallback_label_selectors()->mutable_labels())["zone"] = "b";
  // The primary while it has room, then the first fallback that has room.
  absl::StatusOr<v1::ActorInfo> first = head->actors().Create(spec);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->node_id(), zone.at("a").ToString());
  absl::StatusOr<v1::ActorInfo> second = head->actors().Create(spec);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->node_id(), zone.at("b").ToString());
  EXPECT_EQ(second->state(), v1::ACTOR_ALIVE);
  // No room under any selector: refused as for the primary alone.
  absl::StatusOr<v1::ActorInfo> third = head->actors().Create(spec);
  EXPECT_TRUE(absl::IsResourceExhausted(third.status())) << third.status();
  // A primary no node can ever match falls back too.
  ASSERT_TRUE(head->actors().Kill(*ActorId::Parse(second->actor_id())).ok());
  (*spec.mutable_label_selector())["zone"] = "z";
  absl::StatusOr<v1::ActorInfo> fourth = head->actors().Create(spec);
  ASSERT_TRUE(fourth.ok()) << fourth.status();
  EXPECT_EQ(fourth->node_id(), zone.at("b").ToString());
  // Bad fallbacks are refused naming the field, and nothing is created.
  const size_t before = head->actors().List().size();
  v1::ActorSpec bad = spec;
  (*bad.mutable_fallback_label_selectors(1)->mutable_labels())["zone"] = "";
  absl::StatusOr<v1::ActorInfo> refused = head->actors().Create(bad);
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_NE(refused.status().message().find("spec.fallback_label_selectors[1]"), absl::string_view::npos)
      << refused.status();
  bad = spec;
  for (int i = 0; i < 16; ++i) (*bad.add_fallback_label_selectors()->mutable_labels())["zone"] = "b";
  refused = head->actors().Create(bad);
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_NE(refused.status().message().find("at most 16"), absl::string_view::npos) << refused.status();
  EXPECT_EQ(head->actors().List().size(), before);
  absl::Status s = Check(*head);
  EXPECT_TRUE(s.ok()) << s;
}

// Two one-GPU nodes, and an actor (restarts without limit) whose first start times out on
// a worker that cannot be reached for the stop.
absl::StatusOr<v1::ActorInfo> CreateWithAnUnknownStart(Head& head, testing::FakeWorkers& workers) {
  AddGpuNode(head, 3000, 1);
  AddGpuNode(head, 3001, 1);
  workers.lose_starts = 1;
  workers.unreachable = true;
  v1::ActorSpec spec = Spec("echo", 1);
  spec.set_max_restarts(-1);
  return head.actors().Create(spec);
}

TEST(ActorManagerTest, AStartWithAnUnknownOutcomeIsStoppedBeforeTheActorStartsAgain) {
  store::MemoryStore store;
  FakeClock clock;
  testing::FakeWorkers workers;
  auto head = OpenTestHead(store, clock, workers);
  // The start times out, and the worker cannot be reached: the process may run there (a
  // worker cut off mid-start that keeps its actors), so nothing starts anywhere else yet.
  absl::StatusOr<v1::ActorInfo> a = CreateWithAnUnknownStart(*head, workers);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->state(), v1::ACTOR_RESTARTING);
  v1::ActorSpec spec = a->spec();
  const ActorId id = *ActorId::Parse(a->actor_id());
  // The kill is retried on the head's clock (200 ms after the first failure, doubling): no
  // thread waits, nothing polls.
  for (absl::Time deadline = absl::Now() + absl::Seconds(10);
       workers.Kills().size() < 3 && absl::Now() < deadline;) {
    clock.Advance(absl::Milliseconds(500));
    head->demand().Kick();
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(workers.Started().size(), 1u) << "started again while the first start may run";
  EXPECT_GE(workers.Kills().size(), 3u) << "the stop is retried";
  for (const v1::KillActorRequest& k : workers.Kills()) EXPECT_EQ(k.incarnation(), 1);
  absl::StatusOr<v1::ActorInfo> waiting = head->actors().Get(id);
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  EXPECT_EQ(waiting->state(), v1::ACTOR_RESTARTING);
  EXPECT_NE(waiting->pending_reason().find(workers.Started()[0].node_id()), std::string::npos)
      << "it says what it waits for: " << waiting->pending_reason();
  // The worker answers again: the first start is stopped (at the next try), and only then
  // the second made.
  workers.unreachable = false;
  clock.Advance(absl::Seconds(2));
  head->demand().Kick();
  absl::StatusOr<v1::ActorInfo> alive = AwaitActorState(head->actors(), a->actor_id(), v1::ACTOR_ALIVE);
  ASSERT_TRUE(alive.ok()) << alive.status();
  EXPECT_EQ(workers.Killed(), std::vector<std::string>{a->actor_id()});
  EXPECT_EQ(alive->incarnation(), 2);

  // The same when the worker never answers again: its node's confirmed death (here: it
  // unregistered) means its actors are stopped, and the actor starts on another node.
  workers.lose_starts = 1;
  workers.unreachable = true;
  absl::StatusOr<v1::ActorInfo> b = head->actors().Create(spec);
  ASSERT_TRUE(b.ok() && b->state() == v1::ACTOR_RESTARTING) << b.status();
  const std::string lost_on = workers.Started().back().node_id();
  AddGpuNode(*head, 3002, 1);  // room for it elsewhere
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(workers.Started().size(), 3u) << "started again while the first start may run";
  ASSERT_TRUE(head->nodes().Unregister(*NodeId::Parse(lost_on), "leaving").ok());
  absl::StatusOr<v1::ActorInfo> b_alive = AwaitActorState(head->actors(), b->actor_id(), v1::ACTOR_ALIVE);
  ASSERT_TRUE(b_alive.ok()) << b_alive.status();
  EXPECT_NE(b_alive->node_id(), lost_on);
  EXPECT_EQ(b_alive->incarnation(), 2);
  EXPECT_EQ(workers.Started().size(), 4u);
  absl::Status s = Check(*head);
  EXPECT_TRUE(s.ok()) << s;
}

// Threads of this process now.
size_t ThreadCount() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

// Restarts that wait for a stop park no thread of their own, however many there are.
TEST(ActorManagerTest, ManyRestartsWaitingForAStopTakeNoThreadEach) {
  store::MemoryStore store;
  FakeClock clock;
  testing::FakeWorkers workers;
  auto head = OpenTestHead(store, clock, workers);
  AddGpuNode(*head, 3000, 0);
  AddGpuNode(*head, 3001, 0);
  const size_t before = ThreadCount();
  constexpr int kActors = 64;
  workers.lose_starts = kActors;
  workers.unreachable = true;
  for (int i = 0; i < kActors; ++i) {
    v1::ActorSpec spec = Spec("echo", 0);
    spec.set_max_restarts(-1);
    absl::StatusOr<v1::ActorInfo> a = head->actors().Create(spec);
    ASSERT_TRUE(a.ok() && a->state() == v1::ACTOR_RESTARTING) << a.status();
  }
  for (int i = 0; i < 3; ++i) {
    clock.Advance(absl::Seconds(1));
    head->demand().Kick();
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_LE(ThreadCount(), before + 2) << kActors << " restarts wait for their stops";
  EXPECT_EQ(workers.Started().size(), size_t{kActors}) << "none started again yet";
  // Their worker answers again: every stop is made, and every actor starts again.
  workers.unreachable = false;
  clock.Advance(absl::Seconds(2));
  head->demand().Kick();
  for (absl::Time deadline = absl::Now() + absl::Seconds(10);
       workers.Started().size() < 2 * kActors && absl::Now() < deadline;)
    absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(workers.Started().size(), size_t{2 * kActors});
  EXPECT_EQ(workers.Killed().size(), size_t{kActors});
}

// A one-way partition: the head cannot reach the worker, whose heartbeats still reach the
// head. The heartbeat reply asks for the stop, and the worker's report of it ends the wait.
// A heartbeat of `node` reporting `stopped`; the stops its reply asks, in `asked`.
// (As NodeService does: the node table takes the heartbeat, the actors' mailbox its stops.)
absl::Status HeartbeatReporting(head::Head& head, const NodeId& node, std::vector<head::ActorStart> stopped,
                                std::vector<head::ActorStart>* asked) {
  absl::StatusOr<head::HeartbeatOut> out = head.nodes().Heartbeat({.node = node});
  if (!out.ok()) return out.status();
  *asked = head.actors().stops().Exchange(node, stopped);
  return absl::OkStatus();
}

TEST(ActorManagerTest, AnUnknownStartIsStoppedThroughTheHeartbeatsOfAWorkerTheHeadCannotReach) {
  store::MemoryStore store;
  FakeClock clock;
  testing::FakeWorkers workers;
  auto head = OpenTestHead(store, clock, workers);
  absl::StatusOr<v1::ActorInfo> a = CreateWithAnUnknownStart(*head, workers);
  ASSERT_TRUE(a.ok() && a->state() == v1::ACTOR_RESTARTING) << a.status();
  const NodeId lost_on = *NodeId::Parse(workers.Started()[0].node_id());
  std::vector<head::ActorStart> asked;
  for (absl::Time deadline = absl::Now() + absl::Seconds(10); asked.empty() && absl::Now() < deadline;) {
    ASSERT_TRUE(HeartbeatReporting(*head, lost_on, {}, &asked).ok());
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(asked.size(), 1u) << "the heartbeat reply asks for the stop";
  EXPECT_EQ(asked[0].actor_id, a->actor_id());
  EXPECT_EQ(asked[0].incarnation, 1);
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(workers.Started().size(), 1u) << "started again before the worker said it stopped the first";
  ASSERT_TRUE(HeartbeatReporting(*head, lost_on, asked, &asked).ok());
  EXPECT_TRUE(asked.empty()) << "reported: no longer asked";
  absl::StatusOr<v1::ActorInfo> alive = AwaitActorState(head->actors(), a->actor_id(), v1::ACTOR_ALIVE);
  ASSERT_TRUE(alive.ok()) << alive.status();
  EXPECT_EQ(alive->incarnation(), 2);
  EXPECT_TRUE(workers.Killed().empty()) << "no kill reached the worker";

  // A kill by the user that cannot reach the worker is asked in its heartbeats too.
  const NodeId now_on = *NodeId::Parse(alive->node_id());
  ASSERT_TRUE(head->actors().Kill(*ActorId::Parse(a->actor_id())).ok());
  ASSERT_TRUE(HeartbeatReporting(*head, now_on, {}, &asked).ok());
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0].actor_id, a->actor_id());
  EXPECT_EQ(asked[0].incarnation, 2);
  ASSERT_TRUE(HeartbeatReporting(*head, now_on, asked, &asked).ok());
  EXPECT_TRUE(asked.empty()) << "reported: no longer asked";
  // A stop nobody waits for ends with its node, whose worker stopped its actors leaving.
  head->actors().stops().Request(now_on, {a->actor_id(), 7}, /*awaited=*/false);
  ASSERT_TRUE(head->nodes().Unregister(now_on, "leaving").ok());
  EXPECT_TRUE(head->actors().stops().Exchange(now_on, {}).empty());
  absl::Status s = Check(*head);
  EXPECT_TRUE(s.ok()) << s;
}

// Ray's default actor: placed where 1 CPU is free, holding none while it runs.
TEST(ActorManagerTest, PlacementResourcesMustBeFreeButAreNotHeld) {
  store::MemoryStore store;
  FakeClock clock;
  testing::FakeWorkers workers;
  auto head = OpenTestHead(store, clock, workers);
  AddGpuNode(*head, 3000, 0);  // 64 CPUs
  v1::ActorSpec helper;
  helper.set_class_name("echo");
  (*helper.mutable_resources())["CPU"] = 0;
  (*helper.mutable_placement_resources())["CPU"] = 1;
  for (int i = 0; i < 100; ++i) {  // more than the node's CPUs: none is held
    absl::StatusOr<v1::ActorInfo> a = head->actors().Create(helper);
    ASSERT_TRUE(a.ok()) << i << ": " << a.status();
    ASSERT_EQ(a->state(), v1::ACTOR_ALIVE) << i;
  }
  v1::ActorSpec all_cpus;
  all_cpus.set_class_name("echo");
  (*all_cpus.mutable_resources())["CPU"] = 64;
  absl::StatusOr<v1::ActorInfo> big = head->actors().Create(all_cpus);
  ASSERT_TRUE(big.ok()) << big.status();
  // No CPU free now: a helper has nowhere to be placed.
  absl::StatusOr<v1::ActorInfo> none = head->actors().Create(helper);
  EXPECT_TRUE(absl::IsResourceExhausted(none.status())) << none.status();
  v1::ActorSpec bad = helper;
  (*bad.mutable_placement_resources())["CPU"] = -1;
  absl::StatusOr<v1::ActorInfo> refused = head->actors().Create(bad);
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_NE(refused.status().message().find("spec.placement_resources"), absl::string_view::npos)
      << refused.status();
}

// max_pending_calls is kept in the spec for every client (0: no limit); a negative one is
// refused naming it, and nothing is recorded.
TEST(ActorManagerTest, TheSpecKeepsMaxPendingCallsAndRefusesANegativeOne) {
  store::MemoryStore store;
  FakeClock clock;
  testing::FakeWorkers workers;
  auto head = OpenTestHead(store, clock, workers);
  AddGpuNode(*head, 3000, 1);
  v1::ActorSpec spec = Spec("echo", 0);
  spec.set_max_pending_calls(3);
  absl::StatusOr<v1::ActorInfo> a = head->actors().Create(spec);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(head->actors().Get(*ActorId::Parse(a->actor_id()))->spec().max_pending_calls(), 3);
  EXPECT_EQ(workers.Started().back().spec().max_pending_calls(), 3);
  spec.set_max_pending_calls(-1);
  absl::StatusOr<v1::ActorInfo> refused = head->actors().Create(spec);
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_NE(refused.status().message().find("spec.max_pending_calls"), absl::string_view::npos)
      << refused.status();
  EXPECT_EQ(head->actors().List().size(), 1u);
}

TEST(ActorManagerTest, AStartNamesTheOwningJobAndTheNodeButNotForDetachedActors) {
  store::MemoryStore store;
  FakeClock clock;
  testing::FakeWorkers workers;
  auto head = OpenTestHead(store, clock, workers);
  AddGpuNode(*head, 3000, 4);
  const std::string job = JobId::Random().ToString();
  v1::ActorSpec owned = Spec("echo", 1);
  owned.set_job_id(job);
  v1::ActorSpec detached = owned;
  detached.set_detached(true);
  absl::StatusOr<v1::ActorInfo> a = head->actors().Create(owned);
  absl::StatusOr<v1::ActorInfo> b = head->actors().Create(detached);
  absl::StatusOr<v1::ActorInfo> c = head->actors().Create(Spec("echo", 1));  // outside any job
  ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << a.status() << b.status() << c.status();
  std::vector<v1::StartActorRequest> started = workers.Started();
  ASSERT_EQ(started.size(), 3u);
  EXPECT_EQ(started[0].actor_id(), a->actor_id());
  // The spec goes whole; the worker gives a detached actor no job (WorkerServiceTest).
  EXPECT_EQ(started[0].spec().job_id(), job);  // what it creates belongs to the job as well
  EXPECT_FALSE(started[0].spec().detached());
  EXPECT_EQ(started[1].spec().job_id(), job);
  EXPECT_TRUE(started[1].spec().detached());  // it outlives the job, and so do its own
  EXPECT_EQ(started[2].spec().job_id(), "");
  for (size_t i = 0; i < started.size(); ++i) EXPECT_EQ(started[i].node_id(), a->node_id()) << i;
}

TEST(ActorManagerTest, CreateWaitsForTheWorkerWithoutHoldingTheCaller) {
  store::MemoryStore store;
  FakeClock clock;
  testing::FakeWorkers workers;
  workers.hold = true;
  auto head = OpenTestHead(store, clock, workers);
  AddGpuNode(*head, 3001, 2);
  std::optional<absl::StatusOr<v1::ActorInfo>> first, second;
  head->actors().CreateAsync(Spec("echo", 1), [&](absl::StatusOr<v1::ActorInfo> a) { first = std::move(a); });
  head->actors().CreateAsync(Spec("echo", 1),
                             [&](absl::StatusOr<v1::ActorInfo> a) { second = std::move(a); });
  Settle(*head);
  // Both PENDING with their GPUs booked, waiting for the worker.
  EXPECT_FALSE(first.has_value());
  EXPECT_FALSE(second.has_value());
  EXPECT_EQ(workers.Parked(), 2u);
  std::vector<v1::ActorInfo> listed = head->actors().List();
  ASSERT_EQ(listed.size(), 2u);
  for (const auto& a : listed) EXPECT_EQ(a.state(), v1::ACTOR_PENDING);
  // A third does not fit while the two hold the node's GPUs.
  std::optional<absl::StatusOr<v1::ActorInfo>> third;
  head->actors().CreateAsync(Spec("echo", 1), [&](absl::StatusOr<v1::ActorInfo> a) { third = std::move(a); });
  Settle(*head);
  ASSERT_TRUE(third.has_value());
  EXPECT_TRUE(absl::IsResourceExhausted(third->status())) << third->status();
  // One is killed while its start is in flight: its late start is answered DEAD and the
  // process it started is killed.
  ASSERT_TRUE(head->actors().Kill(*ActorId::Parse(listed[0].actor_id())).ok());
  workers.Release();
  Settle(*head);
  ASSERT_TRUE(first.has_value() && second.has_value());
  std::map<std::string, v1::ActorState> states;
  for (auto* r : {&*first, &*second}) {
    ASSERT_TRUE(r->ok()) << r->status();
    states[(*r)->actor_id()] = (*r)->state();
  }
  EXPECT_EQ(states[listed[0].actor_id()], v1::ACTOR_DEAD);
  EXPECT_EQ(states[listed[1].actor_id()], v1::ACTOR_ALIVE);
  std::vector<std::string> killed = workers.Killed();
  EXPECT_EQ(std::count(killed.begin(), killed.end(), listed[0].actor_id()), 2)
      << "the kill itself, and the stale start's process";
  absl::Status s = Check(*head);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(ActorManagerTest, ActorNamesAreUniqueAmongLiveActorsThroughRestartsDeathsAndRecovery) {
  store::MemoryStore store;
  FakeClock clock;
  testing::FakeWorkers workers;
  // Keep no DEAD actor: each death is also an eviction, which must leave the index right.
  auto head = OpenTestHead(store, clock, workers, RetentionOptions{0});
  AddGpuNode(*head, 3006, 4);
  v1::ActorSpec engine = Spec("echo", 1, "engine");
  engine.set_namespace_("rl");
  engine.set_max_restarts(1);
  absl::StatusOr<v1::ActorInfo> first = head->actors().Create(engine);
  ASSERT_TRUE(first.ok() && first->state() == v1::ACTOR_ALIVE) << first.status();
  absl::StatusOr<v1::ActorInfo> again = head->actors().Create(engine);
  EXPECT_TRUE(absl::IsAlreadyExists(again.status())) << again.status();
  EXPECT_NE(again.status().message().find(first->actor_id()), absl::string_view::npos) << again.status();
  v1::ActorSpec other_ns = engine;
  other_ns.set_namespace_("eval");
  EXPECT_TRUE(head->actors().Create(other_ns).ok()) << "the same name in another namespace is another actor";

  // A crash with a restart left: the actor keeps its name while RESTARTING and once ALIVE again.
  v1::ActorExitInfo crash;
  crash.set_actor_id(first->actor_id());
  crash.set_description("exit code 1");
  head->actors().OnActorExit(*NodeId::Parse(first->node_id()), crash);
  EXPECT_TRUE(absl::IsAlreadyExists(head->actors().Create(engine).status()));
  absl::StatusOr<v1::ActorInfo> restarted =
      AwaitActorState(head->actors(), first->actor_id(), v1::ACTOR_ALIVE);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  EXPECT_EQ(restarted->restarts(), 1);
  EXPECT_TRUE(absl::IsAlreadyExists(head->actors().Create(engine).status()));

  // After a head restart the index is rebuilt from the store: the recovered actor holds it.
  head.reset();
  head = OpenTestHead(store, clock, workers, RetentionOptions{0});
  absl::StatusOr<v1::ActorInfo> recovered = head->actors().GetByName("rl", "engine");
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_EQ(recovered->actor_id(), first->actor_id());
  again = head->actors().Create(engine);
  EXPECT_TRUE(absl::IsAlreadyExists(again.status())) << again.status();
  EXPECT_NE(again.status().message().find(first->actor_id()), absl::string_view::npos) << again.status();

  // Out of restarts: DEAD (and evicted at once), and the name is free.
  crash.set_actor_id(recovered->actor_id());
  head->actors().OnActorExit(*NodeId::Parse(recovered->node_id()), crash);
  EXPECT_TRUE(absl::IsNotFound(head->actors().Get(*ActorId::Parse(first->actor_id())).status()));
  absl::StatusOr<v1::ActorInfo> second = head->actors().Create(engine);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NE(second->actor_id(), first->actor_id());
  // The eviction of the old actor did not take the new one's entry: the name is still held.
  EXPECT_TRUE(absl::IsAlreadyExists(head->actors().Create(engine).status()));
  absl::StatusOr<v1::ActorInfo> by_name = head->actors().GetByName("rl", "engine");
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  EXPECT_EQ(by_name->actor_id(), second->actor_id());

  // Killed by the user: the name is free.
  ASSERT_TRUE(head->actors().Kill(*ActorId::Parse(second->actor_id())).ok());
  absl::StatusOr<v1::ActorInfo> third = head->actors().Create(engine);
  ASSERT_TRUE(third.ok()) << third.status();

  // Killed with its placement group: the name is free.
  v1::PlacementGroupSpec group;
  (*group.add_bundles()->mutable_resources())["GPU"] = 1;
  absl::StatusOr<v1::PlacementGroupInfo> g = head->groups().Create(group);
  ASSERT_TRUE(g.ok() && g->state() == v1::PG_CREATED) << g.status();
  v1::ActorSpec member = Spec("echo", 1, "member");
  member.set_placement_group_id(g->placement_group_id());
  ASSERT_TRUE(head->actors().Create(member).ok());
  EXPECT_TRUE(absl::IsAlreadyExists(head->actors().Create(member).status()));
  ASSERT_TRUE(head->groups().Remove(*PlacementGroupId::Parse(g->placement_group_id())).ok());
  EXPECT_TRUE(absl::IsNotFound(head->actors().GetByName("", "member").status()));
  member.clear_placement_group_id();
  EXPECT_TRUE(head->actors().Create(member).ok());
  absl::Status s = Check(*head);
  EXPECT_TRUE(s.ok()) << s;
}

// With DEAD actors kept (the default retention), a reused name resolves to its live holder,
// also after a head restart, and once every holder is dead to the one that died last.
TEST(ActorManagerTest, AReusedNameResolvesToTheLiveActorThenToTheLastDead) {
  store::MemoryStore store;
  FakeClock clock;
  testing::FakeWorkers workers;
  auto head = OpenTestHead(store, clock, workers, RetentionOptions{});
  AddGpuNode(*head, 3007, 4);
  v1::ActorSpec spec = Spec("echo", 1, "judge");
  absl::StatusOr<v1::ActorInfo> old = head->actors().Create(spec);
  ASSERT_TRUE(old.ok()) << old.status();
  ASSERT_TRUE(head->actors().Kill(*ActorId::Parse(old->actor_id())).ok());
  clock.Advance(absl::Seconds(5));
  absl::StatusOr<v1::ActorInfo> now = head->actors().Create(spec);
  ASSERT_TRUE(now.ok()) << "the dead one's name is free: " << now.status();
  ASSERT_TRUE(head->actors().Get(*ActorId::Parse(old->actor_id())).ok()) << "the DEAD one is kept";
  absl::StatusOr<v1::ActorInfo> by_name = head->actors().GetByName("", "judge");
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  EXPECT_EQ(by_name->actor_id(), now->actor_id());

  head.reset();  // recovery sees one DEAD and one live record of the name
  head = OpenTestHead(store, clock, workers, RetentionOptions{});
  by_name = head->actors().GetByName("", "judge");
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  EXPECT_EQ(by_name->actor_id(), now->actor_id());
  EXPECT_TRUE(absl::IsAlreadyExists(head->actors().Create(spec).status()));

  clock.Advance(absl::Seconds(5));
  ASSERT_TRUE(head->actors().Kill(*ActorId::Parse(now->actor_id())).ok());
  by_name = head->actors().GetByName("", "judge");
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  EXPECT_EQ(by_name->actor_id(), now->actor_id()) << "two DEAD holders: the one that died last";
  EXPECT_EQ(by_name->state(), v1::ACTOR_DEAD);
}

}  // namespace
}  // namespace skyrl::head
