// The head's scheduling as a whole (NodeManager, ResourceTracker, ActorManager,
// PlacementGroupManager, the node listener) over one store, with workers replaced by a fake
// that starts every actor at once. Seeded random sequences of node joins and deaths, group
// creation and removal, actor creation, kills and crashes, and head restarts (everything
// rebuilt from the store in the head's recovery order) are checked after every step: the
// tables never book a device twice or beyond a node, and the scheduler's accounting equals
// the tables.
#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <random>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "runtime/head/actor_directory_service.h"
#include "runtime/head/placement_group_service.h"
#include "runtime/head/actor_manager.h"
#include "runtime/head/node_events.h"
#include "runtime/head/node_manager.h"
#include "runtime/head/placement_group_manager.h"
#include "runtime/head/resource_tracker.h"
#include "runtime/head/retention.h"
#include "runtime/store/memory/memory_store.h"
#include "runtime/rpc/auth.h"
#include "scheduler/invariants.h"
#include "tests/util/loopback_server.h"

namespace skyrl::head {
namespace {

class InstantWorkers final : public WorkerClient {
 public:
  absl::StatusOr<v1::StartActorReply> StartActor(const std::string& address, const v1::StartActorRequest& req) override {
    v1::StartActorReply r;
    r.set_address(absl::StrCat(address, "/", req.actor_id()));
    return r;
  }
  absl::Status KillActor(const std::string&, const std::string&) override { return absl::OkStatus(); }
};

// One head incarnation over a store that outlives it.
struct Head {
  Head(store::Store& store, const Clock& clock, WorkerClient& workers, RetentionOptions retention = {})
      : nodes(store, clock, {absl::Seconds(1), 5}),
        actors(store, nodes, tracker, workers, clock, retention),
        groups(store, tracker, actors, clock, retention),
        listener(tracker, actors, groups) {
    EXPECT_TRUE(nodes.Recover().ok());
    AddAliveNodes(nodes, tracker);
    EXPECT_TRUE(groups.Recover().ok());
    EXPECT_TRUE(actors.Recover().ok());
    nodes.SetListener(&listener);
  }
  NodeManager nodes;
  ResourceTracker tracker;
  ActorManager actors;
  PlacementGroupManager groups;
  SchedulingNodeListener listener;
};

absl::Status Check(Head& h) {
  std::vector<scheduler::NodeSpec> specs;
  for (const v1::NodeInfo& n : h.nodes.List())
    if (n.state() == v1::NODE_ALIVE) specs.push_back(ToNodeSpec(n));
  std::vector<scheduler::Allocation> recorded;
  for (const v1::ActorInfo& a : h.actors.List()) {
    if (a.state() != v1::ACTOR_PENDING && a.state() != v1::ACTOR_ALIVE) continue;
    bool grouped = !a.spec().placement_group_id().empty();
    recorded.push_back({a.actor_id(), a.node_id(), ToResources(a.spec().resources()),
                        {a.gpu_ids().begin(), a.gpu_ids().end()}, a.spec().placement_group_id(),
                        grouped ? a.bundle_index() : -1});
  }
  for (const v1::PlacementGroupInfo& g : h.groups.List()) {
    if (g.state() != v1::PG_CREATED && g.state() != v1::PG_RESCHEDULING) continue;
    for (int i = 0; i < g.bundles_size(); ++i)
      if (!g.bundles(i).node_id().empty())
        recorded.push_back({absl::StrCat(g.placement_group_id(), "#", i), g.bundles(i).node_id(),
                            ToResources(g.spec().bundles(i).resources()),
                            {g.bundles(i).gpu_ids().begin(), g.bundles(i).gpu_ids().end()}, g.placement_group_id(), i});
  }
  return h.tracker.With([&](const scheduler::Cluster& c) { return scheduler::CheckInvariants(specs, recorded, &c); });
}

// Keys of a store table, sorted.
std::vector<std::string> StoredKeys(store::Store& store, absl::string_view table) {
  std::vector<std::string> keys;
  absl::StatusOr<std::vector<store::Entry>> entries = store.Scan(table, "");
  EXPECT_TRUE(entries.ok()) << entries.status();
  if (entries.ok())
    for (const store::Entry& e : *entries) keys.push_back(e.key);
  std::sort(keys.begin(), keys.end());
  return keys;
}

// The retention bound: at most `keep` DEAD actors and `keep` REMOVED groups, and the store
// holds exactly the records the head does (an eviction leaves nothing behind in either).
absl::Status CheckRetention(Head& h, store::Store& store, size_t keep) {
  std::vector<std::string> actor_ids, group_ids;
  size_t dead = 0, removed = 0;
  for (const v1::ActorInfo& a : h.actors.List()) {
    actor_ids.push_back(a.actor_id());
    dead += a.state() == v1::ACTOR_DEAD;
  }
  for (const v1::PlacementGroupInfo& g : h.groups.List()) {
    group_ids.push_back(g.placement_group_id());
    removed += g.state() == v1::PG_REMOVED;
  }
  std::sort(actor_ids.begin(), actor_ids.end());
  std::sort(group_ids.begin(), group_ids.end());
  if (dead > keep) return absl::InternalError(absl::StrCat(dead, " DEAD actors kept, cap ", keep));
  if (removed > keep) return absl::InternalError(absl::StrCat(removed, " REMOVED groups kept, cap ", keep));
  if (StoredKeys(store, kActorsTable) != actor_ids)
    return absl::InternalError("the store's actor table differs from the head's");
  if (StoredKeys(store, kPlacementGroupsTable) != group_ids)
    return absl::InternalError("the store's placement group table differs from the head's");
  return absl::OkStatus();
}

std::map<std::string, double> Request(std::mt19937& rng) {
  static const std::vector<std::map<std::string, double>> kChoices = {
      {{"CPU", 1}}, {{"GPU", 1}, {"CPU", 1}}, {{"GPU", 0.5}}, {{"GPU", 0.25}}, {{"GPU", 2}}, {{"GPU", 4}}};
  return kChoices[rng() % kChoices.size()];
}

// (seed, --keep-terminal)
class HeadSchedulingTest : public ::testing::TestWithParam<std::tuple<int, size_t>> {};

TEST_P(HeadSchedulingTest, TablesAndSchedulerAgreeThroughRandomOperationsAndRestarts) {
  const auto [seed, keep] = GetParam();
  std::mt19937 rng(seed);
  store::MemoryStore store;
  FakeClock clock;
  InstantWorkers workers;
  const RetentionOptions retention{keep};
  auto head = std::make_unique<Head>(store, clock, workers, retention);
  int created_groups = 0, created_actors = 0, restarts = 0, deaths = 0;
  for (int step = 0; step < 250; ++step) {
    int op = rng() % 100;
    std::vector<v1::NodeInfo> alive;
    for (const auto& n : head->nodes.List())
      if (n.state() == v1::NODE_ALIVE) alive.push_back(n);
    if (op < 12 || alive.size() < 2) {
      v1::NodeInfo n;
      int gpus = std::vector<int>{0, 2, 4, 8}[rng() % 4];
      n.set_address(absl::StrCat("127.0.0.1:", 1000 + step));
      (*n.mutable_resources_total())["CPU"] = 16;
      (*n.mutable_resources_total())["GPU"] = gpus;
      for (int i = 0; i < gpus; ++i) n.add_gpu_ids(i);
      (*n.mutable_labels())["rack"] = absl::StrCat("r", rng() % 2);
      ASSERT_TRUE(head->nodes.Register(n).ok());
    } else if (op < 18) {
      const v1::NodeInfo& victim = alive[rng() % alive.size()];
      ASSERT_TRUE(head->nodes.Unregister(*NodeId::Parse(victim.node_id()), "test kill").ok());
      ++deaths;
    } else if (op < 38) {
      v1::PlacementGroupSpec spec;
      spec.set_strategy(v1::PlacementStrategy(rng() % 4));
      if (rng() % 4 == 0) spec.set_domain_label("rack");
      spec.set_wait_for_nodes(rng() % 2);
      int bundles = 1 + rng() % 4;
      for (int i = 0; i < bundles; ++i) {
        auto r = Request(rng);
        spec.add_bundles()->mutable_resources()->insert(r.begin(), r.end());
      }
      absl::StatusOr<v1::PlacementGroupInfo> g = head->groups.Create(spec);
      if (g.ok()) {
        ++created_groups;
      } else {
        ASSERT_TRUE(absl::IsResourceExhausted(g.status())) << g.status();
      }
    } else if (op < 46) {
      std::vector<v1::PlacementGroupInfo> groups = head->groups.List();
      if (!groups.empty()) {
        ASSERT_TRUE(head->groups.Remove(*PlacementGroupId::Parse(groups[rng() % groups.size()].placement_group_id())).ok());
      }
    } else if (op < 76) {
      v1::ActorSpec spec;
      spec.set_class_name("echo");
      auto r = Request(rng);
      spec.mutable_resources()->insert(r.begin(), r.end());
      std::vector<v1::PlacementGroupInfo> groups = head->groups.List();
      if (!groups.empty() && rng() % 2) {
        const v1::PlacementGroupInfo& g = groups[rng() % groups.size()];
        spec.set_placement_group_id(g.placement_group_id());
        if (rng() % 2) spec.set_bundle_index(int(rng() % g.spec().bundles_size()));
      }
      absl::StatusOr<v1::ActorInfo> a = head->actors.Create(spec);
      if (a.ok()) {
        ++created_actors;
      } else {
        ASSERT_TRUE(absl::IsResourceExhausted(a.status()) || absl::IsFailedPrecondition(a.status())) << a.status();
      }
    } else if (op < 92) {
      std::vector<v1::ActorInfo> live;
      for (const auto& a : head->actors.List())
        if (a.state() == v1::ACTOR_ALIVE) live.push_back(a);
      if (!live.empty()) {
        const v1::ActorInfo& a = live[rng() % live.size()];
        if (rng() % 2) {
          ASSERT_TRUE(head->actors.Kill(*ActorId::Parse(a.actor_id())).ok());
        } else {
          v1::ActorExitInfo exit;
          exit.set_actor_id(a.actor_id());
          exit.set_exit_code(1);
          exit.set_description("exit code 1");
          head->actors.OnActorExit(*NodeId::Parse(a.node_id()), exit);  // max_restarts 0: DEAD
        }
      }
    } else {
      head.reset();
      head = std::make_unique<Head>(store, clock, workers, retention);
      ++restarts;
    }
    head->groups.RetryPending();
    clock.Advance(absl::Milliseconds(1 + rng() % 3));
    absl::Status ok = Check(*head);
    ASSERT_TRUE(ok.ok()) << "seed " << seed << " keep " << keep << " step " << step << " op " << op << ": " << ok;
    ok = CheckRetention(*head, store, keep);
    ASSERT_TRUE(ok.ok()) << "seed " << seed << " keep " << keep << " step " << step << " op " << op << ": " << ok;
  }
  EXPECT_GT(created_groups, 3);
  EXPECT_GT(created_actors, 3);
  EXPECT_GT(restarts + deaths, 2);
}

INSTANTIATE_TEST_SUITE_P(Seeds, HeadSchedulingTest,
                         ::testing::Combine(::testing::Range(1, 7), ::testing::Values(size_t(kDefaultKeepTerminal))));
// The same with eviction on nearly every death and removal (0 keeps none).
INSTANTIATE_TEST_SUITE_P(SmallRetention, HeadSchedulingTest,
                         ::testing::Combine(::testing::Range(1, 4), ::testing::Values(size_t(0), size_t(2))));

TEST(HeadSchedulingTest, ConcurrentCreationsNeverDoubleBookAGpu) {
  store::MemoryStore store;
  FakeClock clock;
  InstantWorkers workers;
  Head head(store, clock, workers);
  for (int n = 0; n < 2; ++n) {
    v1::NodeInfo info;
    info.set_address(absl::StrCat("127.0.0.1:", 2000 + n));
    (*info.mutable_resources_total())["CPU"] = 64;
    (*info.mutable_resources_total())["GPU"] = 8;
    for (int i = 0; i < 8; ++i) info.add_gpu_ids(i);
    ASSERT_TRUE(head.nodes.Register(info).ok());
  }
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        if (t % 2) {
          v1::ActorSpec spec;
          spec.set_class_name("echo");
          (*spec.mutable_resources())["GPU"] = (i % 2) ? 1 : 0.5;
          if (head.actors.Create(spec).ok()) ++ok;
        } else {
          v1::PlacementGroupSpec spec;
          (*spec.add_bundles()->mutable_resources())["GPU"] = 1;
          (*spec.add_bundles()->mutable_resources())["GPU"] = 1;
          auto g = head.groups.Create(spec);
          if (g.ok() && g->state() == v1::PG_CREATED) ++ok;
        }
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_GT(ok.load(), 5);
  absl::Status s = Check(head);
  EXPECT_TRUE(s.ok()) << s;
}

// ---- Asynchronous creation, batches and waits (the callback services' paths) ----

// Starts actors only when the test says so: StartActorAsync parks the completion, and a
// class named "broken" fails like a constructor error. Kills are recorded.
class ManualWorkers final : public WorkerClient {
 public:
  absl::StatusOr<v1::StartActorReply> StartActor(const std::string& address, const v1::StartActorRequest& req) override {
    return Reply(address, req);
  }
  absl::Status KillActor(const std::string&, const std::string& id) override {
    absl::MutexLock lock(&mu_);
    killed.push_back(id);
    return absl::OkStatus();
  }
  void StartActorAsync(const std::string& address, const v1::StartActorRequest& req, StartDone done) override {
    if (!hold) return done(Reply(address, req));
    absl::MutexLock lock(&mu_);
    parked.push_back([this, address, req, done = std::move(done)] { done(Reply(address, req)); });
  }
  // Completes the parked starts, oldest first.
  void Release() {
    std::deque<std::function<void()>> run;
    {
      absl::MutexLock lock(&mu_);
      run.swap(parked);
    }
    for (auto& f : run) f();
  }
  size_t Parked() {
    absl::MutexLock lock(&mu_);
    return parked.size();
  }
  std::vector<std::string> Killed() {
    absl::MutexLock lock(&mu_);
    return killed;
  }
  bool hold = false;  // set before any create

 private:
  static absl::StatusOr<v1::StartActorReply> Reply(const std::string& address, const v1::StartActorRequest& req) {
    if (req.class_name() == "broken") return absl::FailedPreconditionError("constructor of broken failed: no config");
    v1::StartActorReply r;
    r.set_address(absl::StrCat(address, "/", req.actor_id()));
    return r;
  }
  absl::Mutex mu_;
  std::deque<std::function<void()>> parked ABSL_GUARDED_BY(mu_);
  std::vector<std::string> killed ABSL_GUARDED_BY(mu_);
};

void AddGpuNode(Head& head, int port, int gpus) {
  v1::NodeInfo info;
  info.set_address(absl::StrCat("127.0.0.1:", port));
  (*info.mutable_resources_total())["CPU"] = 64;
  (*info.mutable_resources_total())["GPU"] = gpus;
  for (int i = 0; i < gpus; ++i) info.add_gpu_ids(i);
  ASSERT_TRUE(head.nodes.Register(info).ok());
}

v1::ActorSpec Spec(const std::string& cls, double gpus, const std::string& name = "") {
  v1::ActorSpec spec;
  spec.set_class_name(cls);
  (*spec.mutable_resources())["GPU"] = gpus;
  spec.set_name(name);
  return spec;
}

// PlacementGroupManager::WaitAsync, blocking the test until it is settled.
absl::StatusOr<v1::PlacementGroupInfo> WaitFor(PlacementGroupManager& groups, const PlacementGroupId& id,
                                               absl::Duration timeout) {
  absl::StatusOr<v1::PlacementGroupInfo> out = absl::UnknownError("WaitAsync never settled");
  absl::Notification done;
  groups.WaitAsync(id, timeout, [&](absl::StatusOr<v1::PlacementGroupInfo> g) {
    out = std::move(g);
    done.Notify();
  });
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(timeout + absl::Seconds(10)));
  return out;
}

std::vector<absl::StatusOr<v1::ActorInfo>> CreateBatch(ActorManager& actors, std::vector<v1::ActorSpec> specs) {
  std::vector<absl::StatusOr<v1::ActorInfo>> out;
  absl::Notification done;
  actors.CreateBatchAsync(std::move(specs), [&](std::vector<absl::StatusOr<v1::ActorInfo>> r) {
    out = std::move(r);
    done.Notify();
  });
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  return out;
}

TEST(HeadAsyncTest, BatchSettlesEachItemOnItsOwn) {
  store::MemoryStore store;
  FakeClock clock;
  ManualWorkers workers;
  Head head(store, clock, workers);
  AddGpuNode(head, 3000, 4);
  std::vector<absl::StatusOr<v1::ActorInfo>> r =
      CreateBatch(head.actors, {Spec("echo", 1, "a"),    // fits
                                Spec("", 1),             // invalid: no class
                                Spec("echo", 16),        // can never fit this cluster
                                Spec("echo", 1, "a"),    // name taken by the first item
                                Spec("broken", 1),       // placed, but its constructor fails
                                Spec("echo", 2)});       // fits beside the first
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
  EXPECT_EQ(head.actors.List().size(), 3u);
  absl::StatusOr<v1::ActorInfo> more = head.actors.Create(Spec("echo", 1));
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_EQ(more->state(), v1::ACTOR_ALIVE);
  absl::Status s = Check(head);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(HeadAsyncTest, CreateWaitsForTheWorkerWithoutHoldingTheCaller) {
  store::MemoryStore store;
  FakeClock clock;
  ManualWorkers workers;
  workers.hold = true;
  Head head(store, clock, workers);
  AddGpuNode(head, 3001, 2);
  std::optional<absl::StatusOr<v1::ActorInfo>> first, second;
  head.actors.CreateAsync(Spec("echo", 1), [&](absl::StatusOr<v1::ActorInfo> a) { first = std::move(a); });
  head.actors.CreateAsync(Spec("echo", 1), [&](absl::StatusOr<v1::ActorInfo> a) { second = std::move(a); });
  // Both returned at once, both PENDING with their GPUs booked, waiting for the worker.
  EXPECT_FALSE(first.has_value());
  EXPECT_FALSE(second.has_value());
  EXPECT_EQ(workers.Parked(), 2u);
  std::vector<v1::ActorInfo> listed = head.actors.List();
  ASSERT_EQ(listed.size(), 2u);
  for (const auto& a : listed) EXPECT_EQ(a.state(), v1::ACTOR_PENDING);
  // A third does not fit while the two hold the node's GPUs.
  std::optional<absl::StatusOr<v1::ActorInfo>> third;
  head.actors.CreateAsync(Spec("echo", 1), [&](absl::StatusOr<v1::ActorInfo> a) { third = std::move(a); });
  ASSERT_TRUE(third.has_value());
  EXPECT_TRUE(absl::IsResourceExhausted(third->status())) << third->status();
  // One is killed while its start is in flight: its late start is answered DEAD and the
  // process it started is killed.
  ASSERT_TRUE(head.actors.Kill(*ActorId::Parse(listed[0].actor_id())).ok());
  workers.Release();
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
  absl::Status s = Check(head);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(HeadAsyncTest, GroupNamesAreUniqueAmongLiveGroupsAndSurviveARestart) {
  store::MemoryStore store;
  FakeClock clock;
  InstantWorkers workers;
  auto head = std::make_unique<Head>(store, clock, workers);
  AddGpuNode(*head, 3003, 4);
  v1::PlacementGroupSpec named;
  named.set_name("trainer");
  named.set_namespace_("rl");
  (*named.add_bundles()->mutable_resources())["GPU"] = 1;
  absl::StatusOr<v1::PlacementGroupInfo> first = head->groups.Create(named);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<v1::PlacementGroupInfo> again = head->groups.Create(named);
  EXPECT_TRUE(absl::IsAlreadyExists(again.status())) << again.status();
  EXPECT_NE(again.status().message().find(first->placement_group_id()), absl::string_view::npos) << again.status();
  v1::PlacementGroupSpec other_ns = named;
  other_ns.set_namespace_("eval");
  EXPECT_TRUE(head->groups.Create(other_ns).ok()) << "the same name in another namespace is another group";
  // After a head restart the index is rebuilt from the store.
  head.reset();
  head = std::make_unique<Head>(store, clock, workers);
  EXPECT_TRUE(absl::IsAlreadyExists(head->groups.Create(named).status()));
  // Removing the group frees its name.
  ASSERT_TRUE(head->groups.Remove(*PlacementGroupId::Parse(first->placement_group_id())).ok());
  absl::StatusOr<v1::PlacementGroupInfo> reused = head->groups.Create(named);
  ASSERT_TRUE(reused.ok()) << reused.status();
  EXPECT_NE(reused->placement_group_id(), first->placement_group_id());
}

// The actor that `id` names once it is `state`, polled: restarts run on threads of their own.
absl::StatusOr<v1::ActorInfo> AwaitActorState(ActorManager& actors, const std::string& id, v1::ActorState state) {
  absl::StatusOr<v1::ActorInfo> a;
  for (absl::Time end = absl::Now() + absl::Seconds(10); absl::Now() < end; absl::SleepFor(absl::Milliseconds(5))) {
    a = actors.Get(*ActorId::Parse(id));
    if (a.ok() && a->state() == state) return a;
  }
  return absl::DeadlineExceededError(absl::StrCat("actor ", id, " never became ", v1::ActorState_Name(state), ": ",
                                                  a.ok() ? v1::ActorState_Name(a->state()) : a.status().ToString()));
}

TEST(HeadAsyncTest, ActorNamesAreUniqueAmongLiveActorsThroughRestartsDeathsAndRecovery) {
  store::MemoryStore store;
  FakeClock clock;
  InstantWorkers workers;
  // Keep no DEAD actor: each death is also an eviction, which must leave the index right.
  auto head = std::make_unique<Head>(store, clock, workers, RetentionOptions{0});
  AddGpuNode(*head, 3006, 4);
  v1::ActorSpec engine = Spec("echo", 1, "engine");
  engine.set_namespace_("rl");
  engine.set_max_restarts(1);
  absl::StatusOr<v1::ActorInfo> first = head->actors.Create(engine);
  ASSERT_TRUE(first.ok() && first->state() == v1::ACTOR_ALIVE) << first.status();
  absl::StatusOr<v1::ActorInfo> again = head->actors.Create(engine);
  EXPECT_TRUE(absl::IsAlreadyExists(again.status())) << again.status();
  EXPECT_NE(again.status().message().find(first->actor_id()), absl::string_view::npos) << again.status();
  v1::ActorSpec other_ns = engine;
  other_ns.set_namespace_("eval");
  EXPECT_TRUE(head->actors.Create(other_ns).ok()) << "the same name in another namespace is another actor";

  // A crash with a restart left: the actor keeps its name while RESTARTING and once ALIVE again.
  v1::ActorExitInfo crash;
  crash.set_actor_id(first->actor_id());
  crash.set_description("exit code 1");
  head->actors.OnActorExit(*NodeId::Parse(first->node_id()), crash);
  EXPECT_TRUE(absl::IsAlreadyExists(head->actors.Create(engine).status()));
  absl::StatusOr<v1::ActorInfo> restarted = AwaitActorState(head->actors, first->actor_id(), v1::ACTOR_ALIVE);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  EXPECT_EQ(restarted->restarts(), 1);
  EXPECT_TRUE(absl::IsAlreadyExists(head->actors.Create(engine).status()));

  // After a head restart the index is rebuilt from the store: the recovered actor holds it.
  head.reset();
  head = std::make_unique<Head>(store, clock, workers, RetentionOptions{0});
  absl::StatusOr<v1::ActorInfo> recovered = head->actors.GetByName("rl", "engine");
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_EQ(recovered->actor_id(), first->actor_id());
  again = head->actors.Create(engine);
  EXPECT_TRUE(absl::IsAlreadyExists(again.status())) << again.status();
  EXPECT_NE(again.status().message().find(first->actor_id()), absl::string_view::npos) << again.status();

  // Out of restarts: DEAD (and evicted at once), and the name is free.
  crash.set_actor_id(recovered->actor_id());
  head->actors.OnActorExit(*NodeId::Parse(recovered->node_id()), crash);
  EXPECT_TRUE(absl::IsNotFound(head->actors.Get(*ActorId::Parse(first->actor_id())).status()));
  absl::StatusOr<v1::ActorInfo> second = head->actors.Create(engine);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NE(second->actor_id(), first->actor_id());
  // The eviction of the old actor did not take the new one's entry: the name is still held.
  EXPECT_TRUE(absl::IsAlreadyExists(head->actors.Create(engine).status()));
  absl::StatusOr<v1::ActorInfo> by_name = head->actors.GetByName("rl", "engine");
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  EXPECT_EQ(by_name->actor_id(), second->actor_id());

  // Killed by the user: the name is free.
  ASSERT_TRUE(head->actors.Kill(*ActorId::Parse(second->actor_id())).ok());
  absl::StatusOr<v1::ActorInfo> third = head->actors.Create(engine);
  ASSERT_TRUE(third.ok()) << third.status();

  // Killed with its placement group: the name is free.
  v1::PlacementGroupSpec group;
  (*group.add_bundles()->mutable_resources())["GPU"] = 1;
  absl::StatusOr<v1::PlacementGroupInfo> g = head->groups.Create(group);
  ASSERT_TRUE(g.ok() && g->state() == v1::PG_CREATED) << g.status();
  v1::ActorSpec member = Spec("echo", 1, "member");
  member.set_placement_group_id(g->placement_group_id());
  ASSERT_TRUE(head->actors.Create(member).ok());
  EXPECT_TRUE(absl::IsAlreadyExists(head->actors.Create(member).status()));
  ASSERT_TRUE(head->groups.Remove(*PlacementGroupId::Parse(g->placement_group_id())).ok());
  EXPECT_TRUE(absl::IsNotFound(head->actors.GetByName("", "member").status()));
  member.clear_placement_group_id();
  EXPECT_TRUE(head->actors.Create(member).ok());
  absl::Status s = Check(*head);
  EXPECT_TRUE(s.ok()) << s;
}

// With DEAD actors kept (the default retention), a reused name resolves to its live holder,
// also after a head restart, and once every holder is dead to the one that died last.
TEST(HeadAsyncTest, AReusedNameResolvesToTheLiveActorThenToTheLastDead) {
  store::MemoryStore store;
  FakeClock clock;
  InstantWorkers workers;
  auto head = std::make_unique<Head>(store, clock, workers, RetentionOptions{});
  AddGpuNode(*head, 3007, 4);
  v1::ActorSpec spec = Spec("echo", 1, "judge");
  absl::StatusOr<v1::ActorInfo> old = head->actors.Create(spec);
  ASSERT_TRUE(old.ok()) << old.status();
  ASSERT_TRUE(head->actors.Kill(*ActorId::Parse(old->actor_id())).ok());
  clock.Advance(absl::Seconds(5));
  absl::StatusOr<v1::ActorInfo> now = head->actors.Create(spec);
  ASSERT_TRUE(now.ok()) << "the dead one's name is free: " << now.status();
  ASSERT_TRUE(head->actors.Get(*ActorId::Parse(old->actor_id())).ok()) << "the DEAD one is kept";
  absl::StatusOr<v1::ActorInfo> by_name = head->actors.GetByName("", "judge");
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  EXPECT_EQ(by_name->actor_id(), now->actor_id());

  head.reset();  // recovery sees one DEAD and one live record of the name
  head = std::make_unique<Head>(store, clock, workers, RetentionOptions{});
  by_name = head->actors.GetByName("", "judge");
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  EXPECT_EQ(by_name->actor_id(), now->actor_id());
  EXPECT_TRUE(absl::IsAlreadyExists(head->actors.Create(spec).status()));

  clock.Advance(absl::Seconds(5));
  ASSERT_TRUE(head->actors.Kill(*ActorId::Parse(now->actor_id())).ok());
  by_name = head->actors.GetByName("", "judge");
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  EXPECT_EQ(by_name->actor_id(), now->actor_id()) << "two DEAD holders: the one that died last";
  EXPECT_EQ(by_name->state(), v1::ACTOR_DEAD);
}

TEST(HeadAsyncTest, WaitAsyncIsSettledByChangeTimeoutOrStop) {
  store::MemoryStore store;
  FakeClock clock;
  InstantWorkers workers;
  Head head(store, clock, workers);
  AddGpuNode(head, 3002, 2);
  v1::PlacementGroupSpec two;
  (*two.add_bundles()->mutable_resources())["GPU"] = 2;
  absl::StatusOr<v1::PlacementGroupInfo> holder = head.groups.Create(two);
  ASSERT_TRUE(holder.ok() && holder->state() == v1::PG_CREATED) << holder.status();
  absl::StatusOr<v1::PlacementGroupInfo> waiter = head.groups.Create(two);
  ASSERT_TRUE(waiter.ok() && waiter->state() == v1::PG_PENDING) << waiter.status();
  PlacementGroupId wid = *PlacementGroupId::Parse(waiter->placement_group_id());

  // Already placed: answered inline.
  std::optional<absl::StatusOr<v1::PlacementGroupInfo>> now;
  head.groups.WaitAsync(*PlacementGroupId::Parse(holder->placement_group_id()), absl::Seconds(5),
                        [&](absl::StatusOr<v1::PlacementGroupInfo> g) { now = std::move(g); });
  ASSERT_TRUE(now.has_value() && now->ok());
  // Pending: a short wait times out with the reason, from the wait thread.
  absl::Notification timed_out;
  absl::Status timeout_status;
  head.groups.WaitAsync(wid, absl::Milliseconds(50), [&](absl::StatusOr<v1::PlacementGroupInfo> g) {
    timeout_status = g.status();
    timed_out.Notify();
  });
  ASSERT_TRUE(timed_out.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_TRUE(absl::IsDeadlineExceeded(timeout_status)) << timeout_status;
  EXPECT_NE(timeout_status.message().find("PENDING"), absl::string_view::npos) << timeout_status;
  // A long wait is settled by the change: removing the holder frees the GPUs.
  absl::Notification placed;
  absl::StatusOr<v1::PlacementGroupInfo> placed_group;
  head.groups.WaitAsync(wid, absl::Seconds(30), [&](absl::StatusOr<v1::PlacementGroupInfo> g) {
    placed_group = std::move(g);
    placed.Notify();
  });
  EXPECT_FALSE(placed.HasBeenNotified());
  ASSERT_TRUE(head.groups.Remove(*PlacementGroupId::Parse(holder->placement_group_id())).ok());
  ASSERT_TRUE(placed.WaitForNotificationWithTimeout(absl::Seconds(5)));
  ASSERT_TRUE(placed_group.ok()) << placed_group.status();
  EXPECT_EQ(placed_group->state(), v1::PG_CREATED);
  // A removed group's wait fails saying so; after StopWaits every wait is Unavailable.
  absl::StatusOr<v1::PlacementGroupInfo> third = head.groups.Create(two);
  ASSERT_TRUE(third.ok() && third->state() == v1::PG_PENDING);
  absl::Notification stopped;
  absl::Status stop_status;
  head.groups.WaitAsync(*PlacementGroupId::Parse(third->placement_group_id()), absl::Seconds(600),
                        [&](absl::StatusOr<v1::PlacementGroupInfo> g) {
                          stop_status = g.status();
                          stopped.Notify();
                        });
  head.groups.StopWaits();
  ASSERT_TRUE(stopped.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_TRUE(absl::IsUnavailable(stop_status)) << stop_status;
  std::optional<absl::StatusOr<v1::PlacementGroupInfo>> late;
  head.groups.WaitAsync(wid, absl::Seconds(5), [&](absl::StatusOr<v1::PlacementGroupInfo> g) { late = std::move(g); });
  ASSERT_TRUE(late.has_value());
  EXPECT_TRUE(absl::IsUnavailable(late->status())) << late->status();
}

TEST(HeadAsyncTest, CreateActorsOverGrpcAnswersPerItem) {
  store::MemoryStore store;
  FakeClock clock;
  ManualWorkers workers;
  Head head(store, clock, workers);
  AddGpuNode(head, 3003, 2);
  const std::string token = "head-async-test-token-0123456789";
  rpc::TokenAuth auth(token);
  ActorDirectoryImpl service(head.actors, auth);
  testing::LoopbackServer loopback = testing::StartLoopbackServer({&service});
  ASSERT_TRUE(loopback.server && loopback.port > 0);
  auto stub = v1::ActorDirectory::NewStub(loopback.Channel());

  v1::CreateActorsRequest req;
  *req.add_specs() = Spec("echo", 1);
  *req.add_specs() = Spec("echo", 4);  // never fits a 2-GPU cluster
  *req.add_specs() = Spec("echo", 1);
  v1::CreateActorsReply reply;
  {
    grpc::ClientContext ctx;
    rpc::PrepareCall(&ctx, token, absl::Seconds(10));
    grpc::Status st = stub->CreateActors(&ctx, req, &reply);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  ASSERT_EQ(reply.results_size(), 3);
  EXPECT_EQ(reply.results(0).code(), 0);
  EXPECT_EQ(reply.results(0).actor().state(), v1::ACTOR_ALIVE);
  EXPECT_EQ(reply.results(1).code(), int(absl::StatusCode::kResourceExhausted));
  EXPECT_NE(reply.results(1).message().find("GPU"), std::string::npos) << reply.results(1).message();
  EXPECT_FALSE(reply.results(1).has_actor());
  EXPECT_EQ(reply.results(2).code(), 0);
  EXPECT_EQ(reply.results(2).actor().state(), v1::ACTOR_ALIVE);
  EXPECT_NE(reply.results(0).actor().actor_id(), reply.results(2).actor().actor_id());

  {  // an empty batch and a batch over the limit are refused as a whole, naming the field
    grpc::ClientContext ctx;
    rpc::PrepareCall(&ctx, token, absl::Seconds(10));
    v1::CreateActorsReply r;
    grpc::Status st = stub->CreateActors(&ctx, v1::CreateActorsRequest(), &r);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(st.error_message().find("specs"), std::string::npos) << st.error_message();
  }
  {
    grpc::ClientContext ctx;
    rpc::PrepareCall(&ctx, token, absl::Seconds(10));
    v1::CreateActorsRequest big;
    for (int i = 0; i <= kMaxCreateBatch; ++i) big.add_specs()->set_class_name("echo");
    v1::CreateActorsReply r;
    grpc::Status st = stub->CreateActors(&ctx, big, &r);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(st.error_message().find("at most 10000"), std::string::npos) << st.error_message();
  }
  {  // no token: refused before anything is created
    grpc::ClientContext ctx;
    v1::CreateActorsReply r;
    grpc::Status st = stub->CreateActors(&ctx, req, &r);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  EXPECT_EQ(head.actors.List().size(), 2u);
  loopback.server->Shutdown();
}


TEST(HeadAsyncTest, CreatePlacementGroupsOverGrpcAnswersPerItem) {
  store::MemoryStore store;
  FakeClock clock;
  InstantWorkers workers;
  Head head(store, clock, workers);
  AddGpuNode(head, 3004, 4);
  const std::string token = "head-async-test-token-0123456789";
  rpc::TokenAuth auth(token);
  PlacementGroupServiceImpl service(head.groups, auth);
  testing::LoopbackServer loopback = testing::StartLoopbackServer({&service});
  ASSERT_TRUE(loopback.server && loopback.port > 0);
  auto stub = v1::PlacementGroupService::NewStub(loopback.Channel());
  auto group = [](double gpus, const std::string& name) {
    v1::PlacementGroupSpec spec;
    spec.set_name(name);
    (*spec.add_bundles()->mutable_resources())["GPU"] = gpus;
    return spec;
  };
  v1::CreatePlacementGroupsRequest req;
  *req.add_specs() = group(2, "trainer");  // fits
  *req.add_specs() = v1::PlacementGroupSpec();  // invalid: no bundles
  *req.add_specs() = group(16, "huge");  // can never fit a 4-GPU cluster
  *req.add_specs() = group(1, "trainer");  // name taken by the first item
  *req.add_specs() = group(2, "engines");  // fits beside the first
  *req.add_specs() = group(1, "late");  // fits later: PENDING, with the reason
  v1::CreatePlacementGroupsReply reply;
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, token, absl::Seconds(10));
  grpc::Status st = stub->CreatePlacementGroups(&ctx, req, &reply);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(reply.results_size(), 6);
  EXPECT_EQ(reply.results(0).code(), 0);
  EXPECT_EQ(reply.results(0).group().state(), v1::PG_CREATED);
  EXPECT_EQ(reply.results(1).code(), int(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(reply.results(1).message().find("spec.bundles"), std::string::npos) << reply.results(1).message();
  EXPECT_EQ(reply.results(2).code(), int(absl::StatusCode::kResourceExhausted));
  EXPECT_NE(reply.results(2).message().find("GPU"), std::string::npos) << reply.results(2).message();
  EXPECT_EQ(reply.results(3).code(), int(absl::StatusCode::kAlreadyExists));
  EXPECT_EQ(reply.results(4).code(), 0);
  EXPECT_EQ(reply.results(4).group().state(), v1::PG_CREATED);
  EXPECT_EQ(reply.results(5).code(), 0);
  EXPECT_EQ(reply.results(5).group().state(), v1::PG_PENDING);
  EXPECT_FALSE(reply.results(5).group().pending_reason().empty());
  EXPECT_EQ(head.groups.List().size(), 3u);  // failed items left nothing behind
  absl::Status s = Check(head);
  EXPECT_TRUE(s.ok()) << s;
  {
    grpc::ClientContext empty_ctx;
    rpc::PrepareCall(&empty_ctx, token, absl::Seconds(10));
    v1::CreatePlacementGroupsReply r;
    grpc::Status empty = stub->CreatePlacementGroups(&empty_ctx, v1::CreatePlacementGroupsRequest(), &r);
    EXPECT_EQ(empty.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(empty.error_message().find("specs"), std::string::npos) << empty.error_message();
  }
  loopback.server->Shutdown();
}

// ---- Bounded retention of DEAD actors and REMOVED groups (--keep-terminal) ----

TEST(HeadRetentionTest, KeepTerminalFlagIsValidatedNamingTheFlag) {
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

std::vector<std::string> IdsIn(const std::vector<v1::PlacementGroupInfo>& groups, v1::PlacementGroupState state) {
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

TEST(HeadRetentionTest, KeepsTheMostRecentTerminalRecordsInMemoryAndStoreAcrossRestarts) {
  store::MemoryStore store;
  FakeClock clock;
  InstantWorkers workers;
  const RetentionOptions keep3{3};
  auto head = std::make_unique<Head>(store, clock, workers, keep3);
  v1::NodeInfo big;
  big.set_address("127.0.0.1:4000");
  (*big.mutable_resources_total())["CPU"] = 64;
  ASSERT_TRUE(head->nodes.Register(big).ok());
  // A node with the only "special" unit: its actor becomes RESTARTING, waiting for room, when
  // the node goes, and must survive every eviction.
  v1::NodeInfo special;
  special.set_address("127.0.0.1:4001");
  (*special.mutable_resources_total())["special"] = 1;
  ASSERT_TRUE(head->nodes.Register(special).ok());

  // Live records that must stay: two groups, two ALIVE actors, one RESTARTING actor.
  std::vector<std::string> live_groups, live_actors;
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<v1::PlacementGroupInfo> g = head->groups.Create(CpuGroup());
    ASSERT_TRUE(g.ok() && g->state() == v1::PG_CREATED) << g.status();
    live_groups.push_back(g->placement_group_id());
    absl::StatusOr<v1::ActorInfo> a = head->actors.Create(CpuActor());
    ASSERT_TRUE(a.ok() && a->state() == v1::ACTOR_ALIVE) << a.status();
    live_actors.push_back(a->actor_id());
  }
  v1::ActorSpec needs_special = CpuActor(/*max_restarts=*/-1);
  needs_special.mutable_resources()->clear();
  (*needs_special.mutable_resources())["special"] = 1;
  absl::StatusOr<v1::ActorInfo> survivor = head->actors.Create(needs_special);
  ASSERT_TRUE(survivor.ok() && survivor->state() == v1::ACTOR_ALIVE) << survivor.status();
  ASSERT_TRUE(head->nodes.Unregister(*NodeId::Parse(survivor->node_id()), "test: node gone").ok());
  absl::StatusOr<v1::ActorInfo> restarting = head->actors.Get(*ActorId::Parse(survivor->actor_id()));
  ASSERT_TRUE(restarting.ok()) << restarting.status();
  ASSERT_EQ(restarting->state(), v1::ACTOR_RESTARTING);

  // Ten groups removed and ten actors killed (by the user, or by an exit with no restarts
  // left), a second apart: the three most recent of each remain.
  std::vector<std::string> removed, dead;
  for (int i = 0; i < 10; ++i) {
    absl::StatusOr<v1::PlacementGroupInfo> g = head->groups.Create(CpuGroup());
    ASSERT_TRUE(g.ok()) << g.status();
    ASSERT_TRUE(head->groups.Remove(*PlacementGroupId::Parse(g->placement_group_id())).ok());
    removed.push_back(g->placement_group_id());
    clock.Advance(absl::Seconds(1));
    absl::StatusOr<v1::ActorInfo> a = head->actors.Create(CpuActor());
    ASSERT_TRUE(a.ok() && a->state() == v1::ACTOR_ALIVE) << a.status();
    if (i % 2) {
      ASSERT_TRUE(head->actors.Kill(*ActorId::Parse(a->actor_id())).ok());
    } else {
      v1::ActorExitInfo exit;
      exit.set_actor_id(a->actor_id());
      exit.set_exit_code(1);
      exit.set_description("exit code 1");
      head->actors.OnActorExit(*NodeId::Parse(a->node_id()), exit);
    }
    dead.push_back(a->actor_id());
    clock.Advance(absl::Seconds(1));
  }
  auto expect_tables = [&](Head& h, const std::vector<std::string>& want_removed,
                           const std::vector<std::string>& want_dead, const std::string& when) {
    SCOPED_TRACE(when);
    std::vector<v1::PlacementGroupInfo> groups = h.groups.List();
    std::vector<v1::ActorInfo> actors = h.actors.List();
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
  for (const v1::ActorInfo& a : head->actors.List())
    if (a.state() == v1::ACTOR_DEAD) EXPECT_GT(a.died_unix_ms(), 0) << a.actor_id();
  for (const v1::PlacementGroupInfo& g : head->groups.List())
    if (g.state() == v1::PG_REMOVED) EXPECT_GE(g.removed_unix_ms(), g.created_unix_ms()) << g.placement_group_id();

  // What callers see: an evicted record is NotFound; a kept one still answers as before.
  ActorId evicted_actor = *ActorId::Parse(dead.front());
  PlacementGroupId evicted_group = *PlacementGroupId::Parse(removed.front());
  EXPECT_TRUE(absl::IsNotFound(head->actors.Get(evicted_actor).status()));
  EXPECT_TRUE(absl::IsNotFound(head->actors.Kill(evicted_actor)));
  EXPECT_TRUE(absl::IsNotFound(head->groups.Get(evicted_group).status()));
  EXPECT_TRUE(absl::IsNotFound(head->groups.Remove(evicted_group)));
  EXPECT_TRUE(absl::IsNotFound(WaitFor(head->groups, evicted_group, absl::ZeroDuration()).status()));
  absl::StatusOr<v1::ActorInfo> kept = head->actors.Get(*ActorId::Parse(dead.back()));
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->state(), v1::ACTOR_DEAD);
  EXPECT_TRUE(head->actors.Kill(*ActorId::Parse(dead.back())).ok()) << "killing a kept DEAD actor is a no-op";
  EXPECT_TRUE(absl::IsFailedPrecondition(
      WaitFor(head->groups, *PlacementGroupId::Parse(removed.back()), absl::ZeroDuration()).status()));

  // A head restart keeps the cap and the order: one more of each evicts the oldest kept.
  head.reset();
  head = std::make_unique<Head>(store, clock, workers, keep3);
  expect_tables(*head, Last(removed, 3), Last(dead, 3), "after a restart");
  {
    absl::StatusOr<v1::PlacementGroupInfo> g = head->groups.Create(CpuGroup());
    ASSERT_TRUE(g.ok()) << g.status();
    ASSERT_TRUE(head->groups.Remove(*PlacementGroupId::Parse(g->placement_group_id())).ok());
    removed.push_back(g->placement_group_id());
    absl::StatusOr<v1::ActorInfo> a = head->actors.Create(CpuActor());
    ASSERT_TRUE(a.ok() && a->state() == v1::ACTOR_ALIVE) << a.status();
    ASSERT_TRUE(head->actors.Kill(*ActorId::Parse(a->actor_id())).ok());
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
  ASSERT_TRUE(store.Put(kPlacementGroupsTable, old_group.placement_group_id(), old_group.SerializeAsString()).ok());
  head = std::make_unique<Head>(store, clock, workers, keep3);
  removed.push_back(old_group.placement_group_id());
  expect_tables(*head, Last(removed, 3), Last(dead, 3), "old records");

  // A head started with a smaller cap trims the store at once.
  head.reset();
  head = std::make_unique<Head>(store, clock, workers, RetentionOptions{1});
  expect_tables(*head, Last(removed, 1), Last(dead, 1), "restarted with --keep-terminal 1");
  EXPECT_EQ(StoredKeys(store, kActorsTable).size(), 2u + 1u + 1u);       // ALIVE, RESTARTING, DEAD
  EXPECT_EQ(StoredKeys(store, kPlacementGroupsTable).size(), 2u + 1u);  // CREATED, REMOVED
}

TEST(HeadRetentionTest, KeepNoneForgetsEachAtOnceEvenWhileItsStartIsInFlight) {
  store::MemoryStore store;
  FakeClock clock;
  ManualWorkers workers;
  workers.hold = true;
  Head head(store, clock, workers, RetentionOptions{0});
  AddGpuNode(head, 4100, 2);
  // Killed while its start is in flight: evicted at once, so the late start finds no actor,
  // answers NotFound, and the process it started is killed.
  std::optional<absl::StatusOr<v1::ActorInfo>> created;
  head.actors.CreateAsync(Spec("echo", 1), [&](absl::StatusOr<v1::ActorInfo> a) { created = std::move(a); });
  std::vector<v1::ActorInfo> listed = head.actors.List();
  ASSERT_EQ(listed.size(), 1u);
  ActorId id = *ActorId::Parse(listed[0].actor_id());
  ASSERT_TRUE(head.actors.Kill(id).ok());
  EXPECT_TRUE(head.actors.List().empty());
  EXPECT_TRUE(absl::IsNotFound(head.actors.Get(id).status()));
  workers.Release();
  ASSERT_TRUE(created.has_value());
  EXPECT_TRUE(absl::IsNotFound(created->status())) << created->status();
  std::vector<std::string> killed = workers.Killed();
  EXPECT_EQ(std::count(killed.begin(), killed.end(), id.ToString()), 2) << "the kill, and the late start's process";
  // A constructor error: the creator still gets the DEAD actor with the reason, then it is gone.
  workers.hold = false;
  absl::StatusOr<v1::ActorInfo> broken = head.actors.Create(Spec("broken", 1));
  ASSERT_TRUE(broken.ok()) << broken.status();
  EXPECT_EQ(broken->state(), v1::ACTOR_DEAD);
  EXPECT_NE(broken->death_reason().find("no config"), absl::string_view::npos) << broken->death_reason();
  EXPECT_TRUE(absl::IsNotFound(head.actors.Get(*ActorId::Parse(broken->actor_id())).status()));
  // Removing a group with an actor in it: both forgotten, the GPUs free again.
  v1::PlacementGroupSpec two;
  (*two.add_bundles()->mutable_resources())["GPU"] = 2;
  absl::StatusOr<v1::PlacementGroupInfo> g = head.groups.Create(two);
  ASSERT_TRUE(g.ok() && g->state() == v1::PG_CREATED) << g.status();
  v1::ActorSpec in_group = Spec("echo", 1);
  in_group.set_placement_group_id(g->placement_group_id());
  absl::StatusOr<v1::ActorInfo> member = head.actors.Create(in_group);
  ASSERT_TRUE(member.ok() && member->state() == v1::ACTOR_ALIVE) << member.status();
  ASSERT_TRUE(head.groups.Remove(*PlacementGroupId::Parse(g->placement_group_id())).ok());
  EXPECT_TRUE(head.groups.List().empty());
  EXPECT_TRUE(head.actors.List().empty());
  EXPECT_TRUE(StoredKeys(store, kActorsTable).empty());
  EXPECT_TRUE(StoredKeys(store, kPlacementGroupsTable).empty());
  absl::StatusOr<v1::PlacementGroupInfo> again = head.groups.Create(two);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->state(), v1::PG_CREATED);
  absl::Status s = Check(head);
  EXPECT_TRUE(s.ok()) << s;
}

}  // namespace
}  // namespace skyrl::head
