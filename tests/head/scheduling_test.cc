// The head's scheduling as a whole (NodeManager, ResourceTracker, ActorManager,
// PlacementGroupManager, the node listener) over one store, with workers replaced by a fake
// that starts every actor at once. Seeded random sequences of node joins and deaths, group
// creation and removal, actor creation, kills and crashes, and head restarts (everything
// rebuilt from the store in the head's recovery order) are checked after every step: the
// tables never book a device twice or beyond a node, and the scheduler's accounting equals
// the tables.
#include <gtest/gtest.h>

#include <memory>
#include <random>

#include "absl/strings/str_cat.h"
#include "runtime/head/actor_manager.h"
#include "runtime/head/node_events.h"
#include "runtime/head/node_manager.h"
#include "runtime/head/placement_group_manager.h"
#include "runtime/head/resource_tracker.h"
#include "runtime/store/memory/memory_store.h"
#include "scheduler/invariants.h"

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
  Head(store::Store& store, const Clock& clock, WorkerClient& workers)
      : nodes(store, clock, {absl::Seconds(1), 5}),
        actors(store, nodes, tracker, workers),
        groups(store, tracker, actors, clock),
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

std::map<std::string, double> Request(std::mt19937& rng) {
  static const std::vector<std::map<std::string, double>> kChoices = {
      {{"CPU", 1}}, {{"GPU", 1}, {"CPU", 1}}, {{"GPU", 0.5}}, {{"GPU", 0.25}}, {{"GPU", 2}}, {{"GPU", 4}}};
  return kChoices[rng() % kChoices.size()];
}

class HeadSchedulingTest : public ::testing::TestWithParam<int> {};

TEST_P(HeadSchedulingTest, TablesAndSchedulerAgreeThroughRandomOperationsAndRestarts) {
  std::mt19937 rng(GetParam());
  store::MemoryStore store;
  FakeClock clock;
  InstantWorkers workers;
  auto head = std::make_unique<Head>(store, clock, workers);
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
      head = std::make_unique<Head>(store, clock, workers);
      ++restarts;
    }
    head->groups.RetryPending();
    absl::Status ok = Check(*head);
    ASSERT_TRUE(ok.ok()) << "seed " << GetParam() << " step " << step << " op " << op << ": " << ok;
  }
  EXPECT_GT(created_groups, 3);
  EXPECT_GT(created_actors, 3);
  EXPECT_GT(restarts + deaths, 2);
}

INSTANTIATE_TEST_SUITE_P(Seeds, HeadSchedulingTest, ::testing::Range(1, 7));

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

}  // namespace
}  // namespace skyrl::head
