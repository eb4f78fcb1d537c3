// The head's scheduling as a whole (NodeManager, ResourceTracker, ActorManager,
// PlacementGroupManager, the node listener) over one store, with workers replaced by a fake
// that starts every actor at once. Seeded random sequences of node joins and deaths, group
// creation and removal, actor creation, kills and crashes, and head restarts (everything
// rebuilt from the store in the head's recovery order) are checked after every step: the
// tables never book a device twice or beyond a node, and the scheduler's accounting equals
// the tables.
#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>

#include <deque>
#include <memory>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "runtime/head/actor_directory_service.h"
#include "runtime/head/placement_group_service.h"
#include "runtime/head/actor_manager.h"
#include "runtime/head/node_events.h"
#include "runtime/head/node_manager.h"
#include "runtime/head/placement_group_manager.h"
#include "runtime/head/resource_tracker.h"
#include "runtime/store/memory/memory_store.h"
#include "runtime/rpc/auth.h"
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
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_TRUE(server && port > 0);
  auto stub = v1::ActorDirectory::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));

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
  server->Shutdown();
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
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_TRUE(server && port > 0);
  auto stub = v1::PlacementGroupService::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
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
  server->Shutdown();
}

}  // namespace
}  // namespace skyrl::head
