// head::Head as a whole (NodeManager, ResourceTracker, ActorManager, PlacementGroupManager,
// the node listener) over one store, with workers faked to start every actor at once. Seeded
// random sequences of node joins and deaths, group creation and removal, actor creation,
// kills and crashes, and head restarts (everything recovered from the store by a new Head)
// are checked after every step: the tables never book a device twice or beyond a node, and
// the scheduler's accounting equals the tables.
#include <gtest/gtest.h>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "runtime/head/head_metrics.h"
#include "runtime/rpc/channel.h"
#include "runtime/store/memory/memory_store.h"
#include "tests/runtime/head/head_fixture.h"
#include "tests/runtime/metrics/flatten.h"
#include "tests/util/flaky_store.h"

namespace skyrl::head {
namespace {

std::map<std::string, double> Request(std::mt19937& rng) {
  static const std::vector<std::map<std::string, double>> kChoices = {
      {{"CPU", 1}}, {{"GPU", 1}, {"CPU", 1}}, {{"GPU", 0.5}}, {{"GPU", 0.25}}, {{"GPU", 2}}, {{"GPU", 4}}};
  return kChoices[rng() % kChoices.size()];
}

// (seed, --keep-terminal)
class HeadTest : public ::testing::TestWithParam<std::tuple<int, size_t>> {};

TEST_P(HeadTest, TablesAndSchedulerAgreeThroughRandomOperationsAndRestarts) {
  const auto [seed, keep] = GetParam();
  std::mt19937 rng(seed);
  store::MemoryStore store;
  FakeClock clock;
  testing::FakeWorkers workers;
  const RetentionOptions retention{keep};
  auto head = OpenTestHead(store, clock, workers, retention);
  int created_groups = 0, created_actors = 0, restarts = 0, deaths = 0;
  for (int step = 0; step < 250; ++step) {
    int op = rng() % 100;
    std::vector<v1::NodeInfo> alive;
    for (const auto& n : head->nodes().List())
      if (n.state() == v1::NODE_ALIVE) alive.push_back(n);
    if (op < 12 || alive.size() < 2) {
      v1::NodeInfo n;
      int gpus = std::vector<int>{0, 2, 4, 8}[rng() % 4];
      n.set_address(absl::StrCat("127.0.0.1:", 1000 + step));
      (*n.mutable_resources_total())["CPU"] = 16;
      (*n.mutable_resources_total())["GPU"] = gpus;
      for (int i = 0; i < gpus; ++i) n.add_gpu_ids(i);
      (*n.mutable_labels())["rack"] = absl::StrCat("r", rng() % 2);
      ASSERT_TRUE(head->nodes().Register(n).ok());
    } else if (op < 18) {
      const v1::NodeInfo& victim = alive[rng() % alive.size()];
      ASSERT_TRUE(head->nodes().Unregister(*NodeId::Parse(victim.node_id()), "test kill").ok());
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
      absl::StatusOr<v1::PlacementGroupInfo> g = head->groups().Create(spec);
      if (g.ok()) {
        ++created_groups;
      } else {
        ASSERT_TRUE(absl::IsResourceExhausted(g.status())) << g.status();
      }
    } else if (op < 46) {
      std::vector<v1::PlacementGroupInfo> groups = head->groups().List();
      if (!groups.empty()) {
        ASSERT_TRUE(head->groups()
                        .Remove(*PlacementGroupId::Parse(groups[rng() % groups.size()].placement_group_id()))
                        .ok());
      }
    } else if (op < 76) {
      v1::ActorSpec spec;
      spec.set_class_name("echo");
      auto r = Request(rng);
      spec.mutable_resources()->insert(r.begin(), r.end());
      std::vector<v1::PlacementGroupInfo> groups = head->groups().List();
      if (!groups.empty() && rng() % 2) {
        const v1::PlacementGroupInfo& g = groups[rng() % groups.size()];
        spec.set_placement_group_id(g.placement_group_id());
        if (rng() % 2) spec.set_bundle_index(int(rng() % g.spec().bundles_size()));
      }
      absl::StatusOr<v1::ActorInfo> a = head->actors().Create(spec);
      if (a.ok()) {
        ++created_actors;
      } else {
        ASSERT_TRUE(absl::IsResourceExhausted(a.status()) || absl::IsFailedPrecondition(a.status()))
            << a.status();
      }
    } else if (op < 92) {
      std::vector<v1::ActorInfo> live;
      for (const auto& a : head->actors().List())
        if (a.state() == v1::ACTOR_ALIVE) live.push_back(a);
      if (!live.empty()) {
        const v1::ActorInfo& a = live[rng() % live.size()];
        if (rng() % 2) {
          ASSERT_TRUE(head->actors().Kill(*ActorId::Parse(a.actor_id())).ok());
        } else {
          v1::ActorExitInfo exit;
          exit.set_actor_id(a.actor_id());
          exit.set_exit_code(1);
          exit.set_description("exit code 1");
          head->actors().OnActorExit(*NodeId::Parse(a.node_id()), exit);  // max_restarts 0: DEAD
        }
      }
    } else {
      head.reset();
      head = OpenTestHead(store, clock, workers, retention);
      ++restarts;
    }
    head->groups().RetryPending();
    clock.Advance(absl::Milliseconds(1 + rng() % 3));
    absl::Status ok = Check(*head);
    ASSERT_TRUE(ok.ok()) << "seed " << seed << " keep " << keep << " step " << step << " op " << op << ": "
                         << ok;
    ok = CheckRetention(*head, store, keep);
    ASSERT_TRUE(ok.ok()) << "seed " << seed << " keep " << keep << " step " << step << " op " << op << ": "
                         << ok;
  }
  EXPECT_GT(created_groups, 3);
  EXPECT_GT(created_actors, 3);
  EXPECT_GT(restarts + deaths, 2);
}

INSTANTIATE_TEST_SUITE_P(Seeds, HeadTest,
                         ::testing::Combine(::testing::Range(1, 7),
                                            ::testing::Values(size_t(kDefaultKeepTerminal))));
// The same with eviction on nearly every death and removal (0 keeps none).
INSTANTIATE_TEST_SUITE_P(SmallRetention, HeadTest,
                         ::testing::Combine(::testing::Range(1, 4), ::testing::Values(size_t(0), size_t(2))));

TEST(HeadTest, ConcurrentCreationsNeverDoubleBookAGpu) {
  store::MemoryStore store;
  FakeClock clock;
  testing::FakeWorkers workers;
  auto head = OpenTestHead(store, clock, workers);
  for (int n = 0; n < 2; ++n) {
    v1::NodeInfo info;
    info.set_address(absl::StrCat("127.0.0.1:", 2000 + n));
    (*info.mutable_resources_total())["CPU"] = 64;
    (*info.mutable_resources_total())["GPU"] = 8;
    for (int i = 0; i < 8; ++i) info.add_gpu_ids(i);
    ASSERT_TRUE(head->nodes().Register(info).ok());
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
          if (head->actors().Create(spec).ok()) ++ok;
        } else {
          v1::PlacementGroupSpec spec;
          (*spec.add_bundles()->mutable_resources())["GPU"] = 1;
          (*spec.add_bundles()->mutable_resources())["GPU"] = 1;
          auto g = head->groups().Create(spec);
          if (g.ok() && g->state() == v1::PG_CREATED) ++ok;
        }
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_GT(ok.load(), 5);
  absl::Status s = Check(*head);
  EXPECT_TRUE(s.ok()) << s;
}

// What a Kubernetes probe asks: grpc.health.v1.Health/Check with an empty request, no token.
// Whether the answer is SERVING (field 1 = 1: bytes 08 01).
absl::StatusOr<bool> Serving(int port) {
  grpc::GenericStub stub(rpc::MakeChannel(absl::StrCat("127.0.0.1:", port)));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Slice empty{std::string()};
  grpc::ByteBuffer request(&empty, 1), response;
  absl::Notification done;
  grpc::Status status;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  if (!status.ok()) return absl::UnavailableError(status.error_message());
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return absl::InternalError("unreadable reply");
  std::string bytes;
  for (const grpc::Slice& slice : slices)
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  return bytes == std::string("\x08\x01", 2);
}

// The store loses a write (the write-behind queue full, say): the change that met it fails as
// the store said, every later change is refused naming it, the health check turns NOT_SERVING
// (a Kubernetes liveness probe restarts the head) and the metric says so. What happened in the
// cluster still happens in memory: the killed actor is DEAD.
TEST(HeadTest, AHeadWhoseStoreLostAWriteTakesNoMoreChangesAndSaysWhy) {
  store::MemoryStore real;
  skyrl::testing::FlakyStore flaky(real);
  FakeClock clock;
  testing::FakeWorkers workers;
  absl::StatusOr<std::unique_ptr<Head>> opened =
      Head::Open(TestHeadOptions("head-store-lost-jobs"), flaky, workers, clock);
  ASSERT_TRUE(opened.ok()) << opened.status();
  Head& head = **opened;
  ASSERT_TRUE(head.Start().ok());
  AddGpuNode(head, 3001, 4);
  absl::StatusOr<v1::ActorInfo> a = head.actors().Create(Spec("Trainer", 1));
  ASSERT_TRUE(a.ok()) << a.status();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(head.actors().Create(Spec("Trainer", 1)).ok());
  // One more waits for room (the node's four GPUs are taken).
  absl::Notification recorded;
  std::string waiting_id;
  head.actors().CreateAsync(
      Spec("Trainer", 1),
      [&](absl::StatusOr<v1::ActorInfo> w) {
        if (w.ok()) waiting_id = w->actor_id();
        recorded.Notify();
      },
      /*return_pending=*/true);
  recorded.WaitForNotification();
  ASSERT_FALSE(waiting_id.empty());
  EXPECT_EQ(Serving(head.port()).value_or(false), true);

  flaky.writes_down = true;
  absl::Status kill = head.actors().Kill(*ActorId::Parse(a->actor_id()));
  EXPECT_TRUE(absl::IsUnavailable(kill)) << kill;
  flaky.writes_down = false;  // the store works again; the record it missed stays stale
  EXPECT_EQ(head.actors().Get(*ActorId::Parse(a->actor_id()))->state(), v1::ACTOR_DEAD);
  EXPECT_EQ(workers.Killed(), std::vector<std::string>{a->actor_id()})
      << "its process is stopped all the same";
  // The kill freed a GPU: the waiting actor's placement cannot be recorded, so it waits on,
  // as the store has it, saying why.
  absl::StatusOr<v1::ActorInfo> waiting;
  for (absl::Time deadline = absl::Now() + absl::Seconds(10); absl::Now() < deadline;
       absl::SleepFor(absl::Milliseconds(10))) {
    waiting = head.actors().Get(*ActorId::Parse(waiting_id));
    if (waiting.ok() && absl::StrContains(waiting->pending_reason(), "refused its placement")) break;
  }
  ASSERT_TRUE(waiting.ok()) << waiting.status();
  EXPECT_EQ(waiting->state(), v1::ACTOR_PENDING);
  EXPECT_TRUE(waiting->node_id().empty()) << waiting->node_id();
  EXPECT_NE(waiting->pending_reason().find("lost a write"), std::string::npos) << waiting->pending_reason();
  EXPECT_EQ(workers.Started().size(), 4u) << "nothing started under a placement the store does not have";

  absl::StatusOr<v1::ActorInfo> b = head.actors().Create(Spec("Trainer", 1));
  ASSERT_TRUE(absl::IsFailedPrecondition(b.status())) << b.status();
  EXPECT_NE(b.status().message().find(absl::StrCat("actors/", a->actor_id())), absl::string_view::npos)
      << b.status();
  EXPECT_NE(b.status().message().find("restart it"), absl::string_view::npos) << b.status();
  v1::PlacementGroupSpec group;
  (*group.add_bundles()->mutable_resources())["GPU"] = 1;
  absl::StatusOr<v1::PlacementGroupInfo> refused_group = head.groups().Create(group);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused_group.status())) << refused_group.status();
  EXPECT_EQ(Serving(head.port()).value_or(true), false);
  EXPECT_EQ(skyrl::testing::Flatten(HeadMetrics(head).Collect())["skyrl_store_write_lost"], 1);
  head.Shutdown();
}

}  // namespace
}  // namespace skyrl::head
