// Placement groups through a real head and real workers (with declared GPU ids, as on a
// CPU-only development cluster): ordered GPU ids per bundle, fractional colocation, explained
// infeasibility, pending groups that wait and get placed, node loss and head restarts.
#include "tests/cluster/cluster_fixture.h"

#include "absl/strings/str_join.h"
#include "skyrl/placement_group.grpc.pb.h"

namespace skyrl::testing {
namespace {

class PlacementGroupTest : public LocalClusterTest {
 protected:
  std::unique_ptr<Client> Connect() {
    auto c = Client::Connect(address_, Token());
    EXPECT_TRUE(c.ok()) << c.status();
    return std::move(*c);
  }
  static PlacementGroupOptions Group(const std::string& name, int bundles, std::map<std::string, double> each,
                                     v1::PlacementStrategy strategy) {
    PlacementGroupOptions o;
    o.name = name;
    o.strategy = strategy;
    for (int i = 0; i < bundles; ++i) o.bundles.push_back(Bundle{each, {}});
    return o;
  }
  std::string Env(Client& c, const ActorHandle& a) {
    absl::StatusOr<std::string> v = c.Call(a, "getenv", "CUDA_VISIBLE_DEVICES");
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? *v : "?";
  }
  static std::string Ids(const v1::BundlePlacement& b) { return absl::StrJoin(b.gpu_ids(), ","); }
};

TEST_F(PlacementGroupTest, BundlesGetOrderedGpusAndActorsSeeExactlyThem) {
  Subprocess head = StartHead();
  Subprocess w1 = StartWorker("w1", "CPU=4", {"--gpu-ids", "0,1,2,3"});
  Subprocess w2 = StartWorker("w2", "CPU=4", {"--gpu-ids", "0,1,2,3"});
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 2; }));
  auto client = Connect();
  absl::StatusOr<v1::PlacementGroupInfo> g =
      client->CreatePlacementGroup(Group("trainer", 4, {{"GPU", 2}, {"CPU", 1}}, v1::PACK));
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->state(), v1::PG_CREATED);
  ASSERT_EQ(g->bundles_size(), 4);
  // Ranks are ordered node by node, devices ascending within a node.
  EXPECT_EQ(g->bundles(0).node_id(), g->bundles(1).node_id());
  EXPECT_EQ(g->bundles(2).node_id(), g->bundles(3).node_id());
  EXPECT_LT(g->bundles(0).node_id(), g->bundles(2).node_id());
  EXPECT_EQ(Ids(g->bundles(0)), "0,1");
  EXPECT_EQ(Ids(g->bundles(1)), "2,3");
  EXPECT_EQ(Ids(g->bundles(2)), "0,1");
  EXPECT_EQ(Ids(g->bundles(3)), "2,3");

  std::vector<ActorHandle> shards;
  for (int i = 0; i < 4; ++i) {
    v1::ActorSpec spec = ActorSpecFor("echo", {{"GPU", 2}, {"CPU", 1}});
    spec.set_placement_group_id(g->placement_group_id());
    spec.set_bundle_index(i);
    absl::StatusOr<ActorHandle> a = client->CreateActor(spec);
    ASSERT_TRUE(a.ok()) << a.status();
    absl::StatusOr<v1::ActorInfo> info = client->Describe(*a);
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->node_id(), g->bundles(i).node_id());
    EXPECT_EQ(Env(*client, *a), Ids(g->bundles(i))) << "shard " << i;
    shards.push_back(*a);
  }
  // The cluster has no GPU left outside the group.
  absl::StatusOr<ActorHandle> none = client->CreateActor(ActorSpecFor("echo", {{"GPU", 1}}));
  EXPECT_TRUE(absl::IsResourceExhausted(none.status())) << none.status();
  int code = -1;
  std::string status = RunCli({"status"}, &code);
  EXPECT_NE(status.find("Placement groups: 1"), std::string::npos) << status;
  EXPECT_NE(status.find("CREATED"), std::string::npos) << status;

  ASSERT_TRUE(client->RemovePlacementGroup(g->placement_group_id()).ok());
  for (const ActorHandle& a : shards) {
    absl::StatusOr<v1::ActorInfo> info = client->Describe(a);
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->state(), v1::ACTOR_DEAD);
    EXPECT_NE(info->death_reason().find("was removed"), std::string::npos) << info->death_reason();
  }
  // Freed: two colocated halves now share one device, as trainer and generator do.
  const v1::ActorSpec half = ActorSpecFor("echo", {{"GPU", 0.5}});
  absl::StatusOr<ActorHandle> trainer = client->CreateActor(half);
  absl::StatusOr<ActorHandle> generator = client->CreateActor(half);
  ASSERT_TRUE(trainer.ok() && generator.ok()) << trainer.status() << generator.status();
  EXPECT_EQ(client->Describe(*trainer)->node_id(), client->Describe(*generator)->node_id());
  std::string dev = Env(*client, *trainer);
  EXPECT_EQ(dev.size(), 1u) << dev;
  EXPECT_EQ(Env(*client, *generator), dev);
}

TEST_F(PlacementGroupTest, InfeasibleFailsAtOnceAndWaitingGroupsSayWhy) {
  Subprocess head = StartHead();
  Subprocess w1 = StartWorker("w1", "CPU=4", {"--gpu-ids", "0,1", "--labels", "accelerator=H100"});
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 1; }));
  auto client = Connect();
  PlacementGroupOptions big = Group("big", 2, {{"GPU", 4}}, v1::STRICT_SPREAD);
  big.bundles[1].label_selector = {{"accelerator", "B200"}};
  absl::Time start = absl::Now();
  absl::StatusOr<v1::PlacementGroupInfo> g = client->CreatePlacementGroup(big);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5)) << "said at once";
  ASSERT_TRUE(absl::IsResourceExhausted(g.status())) << g.status();
  EXPECT_NE(g.status().message().find("pg big (STRICT_SPREAD, 2 bundles)"), std::string::npos) << g.status();
  // The pickiest bundle is placed (and explained) first.
  EXPECT_NE(g.status().message().find("bundle 1 needs GPU=4 accelerator=B200"), std::string::npos)
      << g.status();
  EXPECT_NE(g.status().message().find("no alive node has those labels"), std::string::npos) << g.status();
  EXPECT_NE(g.status().message().find("the cluster has GPU=2 free"), std::string::npos) << g.status();

  // Asked to wait for nodes, it stays PENDING with the reason, visible in status.
  big.wait_for_nodes = true;
  g = client->CreatePlacementGroup(big);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->state(), v1::PG_PENDING);
  EXPECT_NE(g->pending_reason().find("needs GPU=4"), std::string::npos) << g->pending_reason();
  absl::StatusOr<v1::PlacementGroupInfo> waited =
      client->WaitPlacementGroup(g->placement_group_id(), absl::Milliseconds(300));
  EXPECT_TRUE(absl::IsDeadlineExceeded(waited.status())) << waited.status();
  EXPECT_NE(waited.status().message().find("needs GPU=4"), std::string::npos) << waited.status();
  int code = -1;
  std::string status = RunCli({"status"}, &code);
  EXPECT_NE(status.find("Pending demands: 1"), std::string::npos) << status;
  EXPECT_NE(status.find("needs GPU=4"), std::string::npos) << status;

  Subprocess w2 = StartWorker("w2", "CPU=4", {"--gpu-ids", "0,1,2,3", "--labels", "accelerator=B200"});
  Subprocess w3 = StartWorker("w3", "CPU=4", {"--gpu-ids", "4,5,6,7", "--labels", "accelerator=H100"});
  waited = client->WaitPlacementGroup(g->placement_group_id(), absl::Seconds(20));
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_EQ(waited->state(), v1::PG_CREATED);
  EXPECT_EQ(Ids(waited->bundles(0)), "4,5,6,7");
  EXPECT_EQ(Ids(waited->bundles(1)), "0,1,2,3");

  // Busy, not infeasible: a group that needs what another holds waits for it to go.
  absl::StatusOr<v1::PlacementGroupInfo> second =
      client->CreatePlacementGroup(Group("second", 1, {{"GPU", 4}}, v1::PACK));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->state(), v1::PG_PENDING) << second->ShortDebugString();
  ASSERT_TRUE(client->RemovePlacementGroup(g->placement_group_id()).ok());
  waited = client->WaitPlacementGroup(second->placement_group_id(), absl::Seconds(20));
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_EQ(waited->state(), v1::PG_CREATED);
}

TEST_F(PlacementGroupTest, LostBundlesAreRescheduledAndTheirActorsRestartThere) {
  Subprocess head = StartHead();
  Subprocess w1 = StartWorker("w1", "CPU=2", {"--gpu-ids", "0,1"});
  Subprocess w2 = StartWorker("w2", "CPU=2", {"--gpu-ids", "0,1"});
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 2; }));
  auto client = Connect();
  absl::StatusOr<v1::PlacementGroupInfo> g =
      client->CreatePlacementGroup(Group("engines", 2, {{"GPU", 1}, {"CPU", 1}}, v1::STRICT_SPREAD));
  ASSERT_TRUE(g.ok()) << g.status();
  v1::ActorSpec spec = ActorSpecFor("echo", {{"GPU", 1}, {"CPU", 1}});
  spec.set_placement_group_id(g->placement_group_id());
  spec.set_bundle_index(1);
  spec.set_max_restarts(2);
  absl::StatusOr<ActorHandle> a = client->CreateActor(spec);
  ASSERT_TRUE(a.ok()) << a.status();
  std::string lost_node = g->bundles(1).node_id();
  std::vector<v1::NodeInfo> nodes = ListNodes();
  Subprocess* victim = nullptr;
  for (const auto& n : nodes)
    if (n.node_id() == lost_node) victim = n.pid() == w1.pid() ? &w1 : &w2;
  ASSERT_NE(victim, nullptr);
  victim->Signal(SIGKILL).IgnoreError();
  victim->Wait();
  // STRICT_SPREAD cannot put bundle 1 beside bundle 0: it waits, saying so.
  v1::PlacementGroupInfo now;
  for (int i = 0; i < 200; ++i) {
    auto got = client->WaitPlacementGroup(g->placement_group_id(), absl::ZeroDuration());
    if (!got.ok() && absl::IsDeadlineExceeded(got.status())) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  int code = -1;
  std::string status = RunCli({"status"}, &code);
  EXPECT_NE(status.find("RESCHEDULING"), std::string::npos) << status;
  EXPECT_NE(status.find("waits for room"), std::string::npos) << "the actor waits for its bundle: " << status;
  Subprocess w3 = StartWorker("w3", "CPU=2", {"--gpu-ids", "0,1"});
  absl::StatusOr<v1::PlacementGroupInfo> back =
      client->WaitPlacementGroup(g->placement_group_id(), absl::Seconds(20));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->bundles(0).node_id(), g->bundles(0).node_id()) << "the surviving bundle stays";
  EXPECT_NE(back->bundles(1).node_id(), lost_node);
  absl::StatusOr<v1::ActorInfo> info;
  for (int i = 0; i < 200; ++i) {
    info = client->Describe(*a);
    if (info.ok() && info->state() == v1::ACTOR_ALIVE) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state(), v1::ACTOR_ALIVE) << info->ShortDebugString();
  EXPECT_EQ(info->node_id(), back->bundles(1).node_id());
  EXPECT_EQ(info->restarts(), 1);
  EXPECT_EQ(Env(*client, *a), Ids(back->bundles(1)));
}

TEST_F(PlacementGroupTest, GroupsSurviveAHeadRestartOnRedisWithoutDoubleBooking) {
  auto redis = testing::RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  Subprocess head = StartHead((*redis)->url());
  Subprocess w1 = StartWorker("w1", "CPU=4", {"--gpu-ids", "0,1,2,3"});
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 1; }));
  auto client = Connect();
  absl::StatusOr<v1::PlacementGroupInfo> g =
      client->CreatePlacementGroup(Group("t", 3, {{"GPU", 1}}, v1::PACK));
  ASSERT_TRUE(g.ok()) << g.status();
  v1::ActorSpec spec = ActorSpecFor("echo", {{"GPU", 1}});
  spec.set_placement_group_id(g->placement_group_id());
  spec.set_bundle_index(2);
  absl::StatusOr<ActorHandle> a = client->CreateActor(spec);
  ASSERT_TRUE(a.ok()) << a.status();
  head.Signal(SIGKILL).IgnoreError();
  head.Wait();
  Subprocess restarted = StartHead((*redis)->url());
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 1; }));
  absl::StatusOr<v1::PlacementGroupInfo> after;
  for (int i = 0; i < 100; ++i) {
    after = client->WaitPlacementGroup(g->placement_group_id(), absl::ZeroDuration());
    if (after.ok()) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->bundles(2).node_id(), g->bundles(2).node_id());
  EXPECT_EQ(Ids(after->bundles(2)), Ids(g->bundles(2)));
  // One device is left; a second group of two must wait, and a single device still fits.
  absl::StatusOr<v1::PlacementGroupInfo> two =
      client->CreatePlacementGroup(Group("two", 2, {{"GPU", 1}}, v1::PACK));
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->state(), v1::PG_PENDING) << "the recovered reservation still holds its devices";
  absl::StatusOr<ActorHandle> last = client->CreateActor(ActorSpecFor("echo", {{"GPU", 1}}));
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(Env(*client, *last), "3");
  EXPECT_EQ(Env(*client, *a), Ids(g->bundles(2))) << "the actor kept running through the restart";
}

TEST_F(PlacementGroupTest, BadSpecsAreRejectedNamingTheField) {
  Subprocess head = StartHead();
  Subprocess w1 = StartWorker("w1", "CPU=2", {"--gpu-ids", "0"});
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 1; }));
  auto client = Connect();
  absl::StatusOr<v1::PlacementGroupInfo> g = client->CreatePlacementGroup(Group("x", 0, {}, v1::PACK));
  EXPECT_TRUE(absl::IsInvalidArgument(g.status()));
  EXPECT_NE(g.status().message().find("spec.bundles"), std::string::npos) << g.status();
  g = client->CreatePlacementGroup(Group("x", 1, {{"GPU", 1.5}}, v1::PACK));
  EXPECT_TRUE(absl::IsInvalidArgument(g.status()));
  EXPECT_NE(g.status().message().find("spec.bundles[0].resources"), std::string::npos) << g.status();
  g = client->CreatePlacementGroup(Group("bad name!", 1, {{"CPU", 1}}, v1::PACK));
  EXPECT_TRUE(absl::IsInvalidArgument(g.status()));
  EXPECT_NE(g.status().message().find("spec.name"), std::string::npos) << g.status();
  v1::ActorSpec flavour = ActorSpecFor("echo");
  flavour.set_host("../../bin/sh");
  absl::StatusOr<ActorHandle> bad_host = client->CreateActor(flavour);
  EXPECT_TRUE(absl::IsInvalidArgument(bad_host.status())) << bad_host.status();
  EXPECT_NE(bad_host.status().message().find("spec.host"), std::string::npos) << bad_host.status();
  flavour.set_host("nosuch");
  bad_host = client->CreateActor(flavour);
  EXPECT_TRUE(absl::IsFailedPrecondition(bad_host.status())) << bad_host.status();
  EXPECT_NE(bad_host.status().message().find("no actor host \"nosuch\""), std::string::npos)
      << bad_host.status();
  v1::ActorSpec o = ActorSpecFor("echo");
  o.set_placement_group_id("pg-nothex");
  EXPECT_TRUE(absl::IsInvalidArgument(client->CreateActor(o).status()));
  o.set_placement_group_id(PlacementGroupId::Random().ToString());
  absl::StatusOr<ActorHandle> a = client->CreateActor(o);
  EXPECT_TRUE(absl::IsFailedPrecondition(a.status())) << a.status();
  ASSERT_TRUE(client->CreatePlacementGroup(Group("same", 1, {{"CPU", 1}}, v1::PACK)).ok());
  EXPECT_TRUE(
      absl::IsAlreadyExists(client->CreatePlacementGroup(Group("same", 1, {{"CPU", 1}}, v1::PACK)).status()));
  EXPECT_TRUE(absl::IsNotFound(client->RemovePlacementGroup(PlacementGroupId::Random().ToString())));
}

}  // namespace
}  // namespace skyrl::testing
