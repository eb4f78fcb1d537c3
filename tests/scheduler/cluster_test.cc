#include "scheduler/cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "scheduler/invariants.h"

namespace skyrl::scheduler {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ResourceSet R(absl::string_view text) {
  absl::StatusOr<ResourceSet> r = ResourceSet::Parse(text);
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}

NodeSpec Node(std::string id, int gpus, int cpus = 32, Labels labels = {}) {
  NodeSpec n{
      std::move(id), R(absl::StrCat("CPU=", cpus, ",GPU=", gpus, ",memory=256Gi")), std::move(labels), {}};
  for (int i = 0; i < gpus; ++i) n.gpu_ids.push_back(i);
  return n;
}

Demand D(absl::string_view text, Labels selector = {}) { return Demand{R(text), std::move(selector)}; }

GroupRequest Group(std::string name, int bundles, absl::string_view each, Strategy s, Labels selector = {}) {
  GroupRequest g;
  g.name = std::move(name);
  g.strategy = s;
  for (int i = 0; i < bundles; ++i) g.bundles.push_back(D(each, selector));
  return g;
}

std::vector<std::optional<Slot>> Opt(const std::vector<Slot>& slots) { return {slots.begin(), slots.end()}; }

TEST(PoolTest, WholeGpusTakeTheLowestFreeIds) {
  Pool p = Pool::ForNode(R("CPU=8,GPU=4"), {0, 1, 2, 3});
  ASSERT_TRUE(p.Take(R("GPU=1"), {1}).ok());
  EXPECT_EQ(p.Fit(R("GPU=2")), (std::vector<int>{0, 2}));
  EXPECT_EQ(p.Fit(R("GPU=4")), std::nullopt);
  EXPECT_EQ(p.FreeWholeDevices(), 3);
}

TEST(PoolTest, FractionsShareOneDeviceAndWholeRequestsAvoidIt) {
  Pool p = Pool::ForNode(R("CPU=8,GPU=2"), {0, 1});
  std::optional<std::vector<int>> a = p.Fit(R("GPU=0.5"));
  ASSERT_TRUE(a);
  ASSERT_TRUE(p.Take(R("GPU=0.5"), *a).ok());
  std::optional<std::vector<int>> b = p.Fit(R("GPU=0.5"));
  ASSERT_TRUE(b);
  EXPECT_EQ(*a, *b) << "the second half goes to the same device";
  ASSERT_TRUE(p.Take(R("GPU=0.5"), *b).ok());
  EXPECT_EQ(p.Fit(R("GPU=1")), (std::vector<int>{1}));
  EXPECT_EQ(p.Fit(R("GPU=0.1")), (std::vector<int>{1}));
  ASSERT_TRUE(p.Take(R("GPU=0.3"), {1}).ok());
  EXPECT_EQ(p.Fit(R("GPU=1")), std::nullopt) << "1.0 GPU free in sum, but no whole device";
  EXPECT_FALSE(p.Take(R("GPU=0.8"), {1}).ok());
  p.Give(R("GPU=0.3"), {1});
  EXPECT_TRUE(p.Take(R("GPU=1"), {1}).ok());
  EXPECT_FALSE(p.Take(R("GPU=0.1"), {1}).ok()) << "device 1 is whole-booked";
}

TEST(ClusterTest, ColocatedFractionsLandOnTheSameGpu) {
  Cluster c;
  ASSERT_TRUE(c.AddNode(Node("n1", 2)).ok());
  absl::StatusOr<Slot> trainer = c.PlanActor(D("GPU=0.5"));
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  ASSERT_TRUE(c.AllocateActor("trainer", R("GPU=0.5"), *trainer).ok());
  absl::StatusOr<Slot> gen = c.PlanActor(D("GPU=0.5"));
  ASSERT_TRUE(gen.ok());
  EXPECT_EQ(gen->gpu_ids, trainer->gpu_ids);
  ASSERT_TRUE(c.AllocateActor("generator", R("GPU=0.5"), *gen).ok());
  absl::StatusOr<Slot> whole = c.PlanActor(D("GPU=1"));
  ASSERT_TRUE(whole.ok());
  EXPECT_NE(whole->gpu_ids, trainer->gpu_ids);
  EXPECT_FALSE(c.AllocateActor("generator", R("GPU=0.5"), *gen).ok()) << "placed twice";
  EXPECT_TRUE(CheckInvariants({Node("n1", 2)}, c.Allocations(), &c).ok());
}

TEST(ClusterTest, LabelSelectorsPickNodesAndExplainMisses) {
  Cluster c;
  ASSERT_TRUE(c.AddNode(Node("a", 8, 32, {{"accelerator", "H100"}})).ok());
  ASSERT_TRUE(c.AddNode(Node("b", 8, 32, {{"accelerator", "B200"}})).ok());
  absl::StatusOr<Slot> s = c.PlanActor(D("GPU=1", {{"accelerator", "B200"}}));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->node_id, "b");
  absl::StatusOr<Slot> none = c.PlanActor(D("GPU=1", {{"accelerator", "B300"}}));
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(none.status())) << none.status();
  EXPECT_THAT(none.status().message(), HasSubstr("accelerator=B300"));
  EXPECT_THAT(none.status().message(), HasSubstr("no alive node has those labels"));
}

TEST(ClusterTest, BusyIsUnavailableAndNeverIsResourceExhausted) {
  Cluster c;
  ASSERT_TRUE(c.AddNode(Node("n1", 4)).ok());
  ASSERT_TRUE(c.AllocateActor("a", R("GPU=3"), Slot{"n1", {0, 1, 2}}).ok());
  absl::StatusOr<Slot> busy = c.PlanActor(D("GPU=2"));
  EXPECT_TRUE(absl::IsUnavailable(busy.status())) << busy.status();
  EXPECT_THAT(busy.status().message(), HasSubstr("best match n1 has GPU=1 free of 4"));
  absl::StatusOr<Slot> never = c.PlanActor(D("GPU=8"));
  EXPECT_TRUE(absl::IsResourceExhausted(never.status())) << never.status();
  EXPECT_THAT(never.status().message(), HasSubstr("can ever fit"));
}

// Checks the cluster against its own allocations (what the head's tables would record).
absl::Status SelfCheck(const Cluster& c, const std::vector<NodeSpec>& nodes) {
  std::vector<Allocation> recorded = c.Allocations();
  for (Allocation& a : recorded) a.lent = ResourceSet();  // the tables do not know of lending
  return CheckInvariants(nodes, recorded, &c);
}

TEST(ClusterTest, AnActorBlockedWaitingLendsItsCpuAndTakesItBackWhenFree) {
  Cluster c;
  const NodeSpec node = Node("n1", 1, /*cpus=*/1);
  ASSERT_TRUE(c.AddNode(node).ok());
  ASSERT_TRUE(c.AllocateActor("parent", R("CPU=1,GPU=1"), Slot{"n1", {0}}).ok());
  EXPECT_TRUE(absl::IsUnavailable(c.PlanActor(D("CPU=1")).status()));
  // Blocked: its CPU (not its GPU) goes to a child; counted once, not twice.
  c.LendCpu("parent");
  c.LendCpu("parent");  // twice is once
  EXPECT_EQ(c.FreeResources().Get("CPU"), 1);
  EXPECT_EQ(c.FreeResources().Get("GPU"), 0);
  absl::StatusOr<Slot> child = c.PlanActor(D("CPU=1"));
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_TRUE(c.AllocateActor("child", R("CPU=1"), *child).ok());
  absl::Status s = SelfCheck(c, {node});
  EXPECT_TRUE(s.ok()) << s;
  // Unblocked while the child holds the CPU: it stays lent (runs uncounted) ...
  EXPECT_FALSE(c.ReclaimCpu("parent"));
  // ... until the CPU is free again.
  c.ReleaseActor("child");
  EXPECT_TRUE(c.ReclaimCpu("parent"));
  EXPECT_EQ(c.FreeResources().Get("CPU"), 0);
  s = SelfCheck(c, {node});
  EXPECT_TRUE(s.ok()) << s;
  // Released while lent: gives back only what it held; the node is idle.
  c.LendCpu("parent");
  c.ReleaseActor("parent");
  EXPECT_EQ(c.FreeResources(), node.total);
  EXPECT_TRUE(c.ReclaimCpu("parent")) << "an unknown actor holds nothing to reclaim";
  c.LendCpu("unknown");
  EXPECT_EQ(c.FreeResources(), node.total);
}

TEST(GroupTest, PackPutsEverythingOnOneNodeWhenItCan) {
  Cluster c;
  for (auto id : {"n1", "n2", "n3"}) ASSERT_TRUE(c.AddNode(Node(id, 8)).ok());
  ASSERT_TRUE(c.AllocateActor("x", R("GPU=6"), Slot{"n1", {0, 1, 2, 3, 4, 5}}).ok());
  absl::StatusOr<std::vector<Slot>> slots = c.PlanGroup(Group("g", 4, "GPU=1,CPU=1", Strategy::kPack));
  ASSERT_TRUE(slots.ok()) << slots.status();
  for (const Slot& s : *slots) EXPECT_EQ(s.node_id, (*slots)[0].node_id);
  EXPECT_NE((*slots)[0].node_id, "n1");
  EXPECT_EQ((*slots)[0].gpu_ids, std::vector<int>{0});
  EXPECT_EQ((*slots)[3].gpu_ids, std::vector<int>{3});
}

TEST(GroupTest, PackSpillsNodeByNodeWithOrderedRanks) {
  Cluster c;
  for (auto id : {"n1", "n2", "n3"}) ASSERT_TRUE(c.AddNode(Node(id, 8)).ok());
  absl::StatusOr<std::vector<Slot>> slots = c.PlanGroup(Group("trainer", 16, "GPU=1", Strategy::kPack));
  ASSERT_TRUE(slots.ok()) << slots.status();
  // Rank i: the first node's devices 0..7, then the second node's 0..7.
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ((*slots)[i].node_id, (*slots)[i < 8 ? 0 : 8].node_id);
    EXPECT_EQ((*slots)[i].gpu_ids, std::vector<int>{i % 8}) << "bundle " << i;
  }
  EXPECT_LT((*slots)[0].node_id, (*slots)[8].node_id);
}

TEST(GroupTest, StrictPackFailsAtOnceSayingWhatIsMissing) {
  Cluster c;
  for (auto id : {"n1", "n2"}) ASSERT_TRUE(c.AddNode(Node(id, 8)).ok());
  absl::StatusOr<std::vector<Slot>> slots = c.PlanGroup(Group("trainer", 12, "GPU=1", Strategy::kStrictPack));
  ASSERT_FALSE(slots.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(slots.status())) << slots.status();
  EXPECT_THAT(slots.status().message(), HasSubstr("pg trainer (STRICT_PACK, 12 bundles)"));
  EXPECT_THAT(slots.status().message(), HasSubstr("no node can hold all 12 bundles"));
  EXPECT_THAT(slots.status().message(), HasSubstr("GPU=8 free of 8"));
  // PACK may spread the same request over both nodes.
  EXPECT_TRUE(c.PlanGroup(Group("trainer", 12, "GPU=1", Strategy::kPack)).ok());
}

TEST(GroupTest, SpreadUsesDistinctNodesThenReuses) {
  Cluster c;
  for (auto id : {"n1", "n2", "n3"}) ASSERT_TRUE(c.AddNode(Node(id, 8)).ok());
  absl::StatusOr<std::vector<Slot>> three = c.PlanGroup(Group("g", 3, "GPU=1", Strategy::kSpread));
  ASSERT_TRUE(three.ok());
  EXPECT_EQ((*three)[0].node_id, "n1");
  EXPECT_EQ((*three)[1].node_id, "n2");
  EXPECT_EQ((*three)[2].node_id, "n3");
  absl::StatusOr<std::vector<Slot>> five = c.PlanGroup(Group("g", 5, "GPU=1", Strategy::kSpread));
  ASSERT_TRUE(five.ok()) << five.status();
  std::set<std::string> nodes;
  for (const Slot& s : *five) nodes.insert(s.node_id);
  EXPECT_EQ(nodes.size(), 3u);
}

TEST(GroupTest, StrictSpreadNeedsDistinctNodes) {
  Cluster c;
  for (auto id : {"n1", "n2", "n3"}) ASSERT_TRUE(c.AddNode(Node(id, 8)).ok());
  absl::StatusOr<std::vector<Slot>> ok = c.PlanGroup(Group("g", 3, "GPU=2", Strategy::kStrictSpread));
  ASSERT_TRUE(ok.ok());
  std::set<std::string> nodes;
  for (const Slot& s : *ok) nodes.insert(s.node_id);
  EXPECT_EQ(nodes.size(), 3u);
  absl::StatusOr<std::vector<Slot>> bad = c.PlanGroup(Group("g", 4, "GPU=1", Strategy::kStrictSpread));
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(bad.status()));
  EXPECT_THAT(bad.status().message(),
              HasSubstr("STRICT_SPREAD needs 4 distinct nodes, 3 alive node(s) match"));
}

TEST(GroupTest, InfeasibleMessageNamesBundleNeedAndBestNode) {
  Cluster c;
  ASSERT_TRUE(c.AddNode(Node("n1", 8, 32, {{"accelerator", "B200"}})).ok());
  ASSERT_TRUE(c.AddNode(Node("n2", 8, 32, {{"accelerator", "B200"}})).ok());
  ASSERT_TRUE(c.AllocateActor("busy", R("GPU=4"), Slot{"n2", {0, 1, 2, 3}}).ok());
  ASSERT_TRUE(c.AllocateActor("busier", R("GPU=1"), Slot{"n1", {0}}).ok());
  GroupRequest g;
  g.name = "trainer";
  g.strategy = Strategy::kSpread;
  for (int i = 0; i < 4; ++i) g.bundles.push_back(D(i == 3 ? "GPU=8" : "GPU=1", {{"accelerator", "B200"}}));
  absl::StatusOr<std::vector<Slot>> slots = c.PlanGroup(g);
  ASSERT_FALSE(slots.ok());
  EXPECT_TRUE(absl::IsUnavailable(slots.status())) << "fits once the actors are gone: " << slots.status();
  EXPECT_THAT(slots.status().message(),
              HasSubstr("bundle 3 needs GPU=8 accelerator=B200; best match n1 has GPU=7 free of 8"));
}

TEST(GroupTest, PickyBundlesChooseFirst) {
  Cluster c;
  ASSERT_TRUE(c.AddNode(Node("a", 4, 32, {{"accelerator", "B200"}})).ok());
  ASSERT_TRUE(c.AddNode(Node("b", 4, 32, {{"accelerator", "H100"}})).ok());
  GroupRequest g = Group("g", 2, "GPU=4", Strategy::kStrictSpread);
  g.bundles[1].selector = {{"accelerator", "B200"}};
  absl::StatusOr<std::vector<Slot>> slots = c.PlanGroup(g);
  ASSERT_TRUE(slots.ok()) << "bundle 0 must leave node a to bundle 1: " << slots.status();
  EXPECT_EQ((*slots)[0].node_id, "b");
  EXPECT_EQ((*slots)[1].node_id, "a");
}

TEST(GroupTest, DomainLabelKeepsAGroupInsideOneDomain) {
  Cluster c;
  ASSERT_TRUE(c.AddNode(Node("a1", 4, 32, {{"nvlink-domain", "rack1"}})).ok());
  ASSERT_TRUE(c.AddNode(Node("a2", 4, 32, {{"nvlink-domain", "rack1"}})).ok());
  ASSERT_TRUE(c.AddNode(Node("b1", 4, 32, {{"nvlink-domain", "rack2"}})).ok());
  ASSERT_TRUE(c.AddNode(Node("b2", 4, 32, {{"nvlink-domain", "rack2"}})).ok());
  ASSERT_TRUE(c.AddNode(Node("b3", 4, 32, {{"nvlink-domain", "rack2"}})).ok());
  GroupRequest g = Group("trainer", 10, "GPU=1", Strategy::kPack);
  g.domain_label = "nvlink-domain";
  absl::StatusOr<std::vector<Slot>> slots = c.PlanGroup(g);
  ASSERT_TRUE(slots.ok()) << slots.status();
  for (const Slot& s : *slots) EXPECT_EQ(s.node_id[0], 'b') << "rack2 is the only domain with 10 GPUs";
  g.bundles.resize(13, g.bundles[0]);
  absl::StatusOr<std::vector<Slot>> too_big = c.PlanGroup(g);
  ASSERT_FALSE(too_big.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(too_big.status()));
  EXPECT_THAT(too_big.status().message(), HasSubstr("within one nvlink-domain"));
}

TEST(GroupTest, AffinityGroupPullsGeneratorsOntoTrainerNodes) {
  Cluster c;
  for (auto id : {"n1", "n2", "n3"}) ASSERT_TRUE(c.AddNode(Node(id, 8)).ok());
  ASSERT_TRUE(c.AllocateActor("other", R("GPU=1"), Slot{"n1", {0}}).ok());
  // The trainer takes half of the tightest node that fits.
  GroupRequest trainer = Group("trainer", 4, "GPU=1", Strategy::kStrictPack);
  absl::StatusOr<std::vector<Slot>> t = c.PlanGroup(trainer);
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(c.ReserveGroup("pg-t", trainer, Opt(*t)).ok());
  std::string trainer_node = (*t)[0].node_id;
  GroupRequest gen = Group("generator", 2, "GPU=1", Strategy::kPack);
  gen.affinity_group = "pg-t";
  absl::StatusOr<std::vector<Slot>> g = c.PlanGroup(gen);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ((*g)[0].node_id, trainer_node);
  EXPECT_EQ((*g)[1].node_id, trainer_node);
}

TEST(GroupTest, AffinityPicksTheDomainBeforeFreeGpusDo) {
  // One domain per node; the trainer leaves 4 GPUs of n1 free, n2 is empty. An engine group
  // kept in one domain and tied to the trainer goes to n1 (weight sync over NVLink), although
  // n2 has more free GPUs.
  Cluster c;
  ASSERT_TRUE(c.AddNode(Node("n1", 8, 32, {{"nvlink-domain", "d1"}})).ok());
  ASSERT_TRUE(c.AddNode(Node("n2", 8, 32, {{"nvlink-domain", "d2"}})).ok());
  GroupRequest trainer = Group("trainer", 4, "GPU=1", Strategy::kStrictPack);
  absl::StatusOr<std::vector<Slot>> t = c.PlanGroup(trainer);
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(c.ReserveGroup("pg-t", trainer, Opt(*t)).ok());
  const std::string trainer_node = (*t)[0].node_id;
  GroupRequest gen = Group("generator", 4, "GPU=1", Strategy::kStrictPack);
  gen.domain_label = "nvlink-domain";
  gen.affinity_group = "pg-t";
  absl::StatusOr<std::vector<Slot>> g = c.PlanGroup(gen);
  ASSERT_TRUE(g.ok()) << g.status();
  for (const Slot& s : *g) EXPECT_EQ(s.node_id, trainer_node);
  // Without the affinity, the emptiest domain wins.
  gen.affinity_group.clear();
  absl::StatusOr<std::vector<Slot>> free_first = c.PlanGroup(gen);
  ASSERT_TRUE(free_first.ok());
  EXPECT_NE((*free_first)[0].node_id, trainer_node);
}

TEST(GroupTest, ActorsGoIntoTheirBundles) {
  Cluster c;
  ASSERT_TRUE(c.AddNode(Node("n1", 4)).ok());
  ASSERT_TRUE(c.AddNode(Node("n2", 4)).ok());
  GroupRequest req = Group("g", 2, "GPU=1,CPU=2", Strategy::kStrictSpread);
  absl::StatusOr<std::vector<Slot>> slots = c.PlanGroup(req);
  ASSERT_TRUE(slots.ok());
  ASSERT_TRUE(c.ReserveGroup("pg-1", req, Opt(*slots)).ok());
  // Two colocated halves in bundle 1, on its device.
  absl::StatusOr<Slot> a = c.PlanActor(D("GPU=0.5,CPU=1"), "pg-1", 1);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->node_id, (*slots)[1].node_id);
  EXPECT_EQ(a->gpu_ids, (*slots)[1].gpu_ids);
  ASSERT_TRUE(c.AllocateActor("a", R("GPU=0.5,CPU=1"), *a, "pg-1", 1).ok());
  absl::StatusOr<Slot> b = c.PlanActor(D("GPU=0.5,CPU=1"), "pg-1", 1);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(c.AllocateActor("b", R("GPU=0.5,CPU=1"), *b, "pg-1", 1).ok());
  absl::StatusOr<Slot> full = c.PlanActor(D("GPU=0.5"), "pg-1", 1);
  EXPECT_TRUE(absl::IsUnavailable(full.status())) << full.status();
  absl::StatusOr<Slot> any = c.PlanActor(D("GPU=1"), "pg-1");
  ASSERT_TRUE(any.ok());
  EXPECT_EQ(any->node_id, (*slots)[0].node_id);
  EXPECT_TRUE(absl::IsResourceExhausted(c.PlanActor(D("GPU=2"), "pg-1").status()))
      << "bigger than any bundle";
  EXPECT_TRUE(absl::IsInvalidArgument(c.PlanActor(D("GPU=1"), "pg-1", 7).status()));
  // Bundles count against their nodes even when empty.
  EXPECT_EQ(c.NodePool("n1")->FreeWholeDevices(), 3);
  std::vector<NodeSpec> nodes = {Node("n1", 4), Node("n2", 4)};
  EXPECT_TRUE(CheckInvariants(nodes, c.Allocations(), &c).ok())
      << CheckInvariants(nodes, c.Allocations(), &c);
  // Removing the group releases the actors inside it and the bundles.
  EXPECT_THAT(c.RemoveGroup("pg-1"), ElementsAre("a", "b"));
  EXPECT_EQ(c.NodePool("n1")->FreeWholeDevices(), 4);
  EXPECT_EQ(c.NodePool("n2")->FreeWholeDevices(), 4);
}

TEST(GroupTest, NodeLossUnplacesBundlesAndReplanningKeepsTheRest) {
  Cluster c;
  for (auto id : {"n1", "n2", "n3"}) ASSERT_TRUE(c.AddNode(Node(id, 2)).ok());
  GroupRequest req = Group("g", 2, "GPU=2", Strategy::kStrictSpread);
  absl::StatusOr<std::vector<Slot>> slots = c.PlanGroup(req);
  ASSERT_TRUE(slots.ok());
  ASSERT_TRUE(c.ReserveGroup("pg-1", req, Opt(*slots)).ok());
  ASSERT_TRUE(c.AllocateActor("a0", R("GPU=1"), Slot{(*slots)[0].node_id, {0}}, "pg-1", 0).ok());
  std::string lost = (*slots)[1].node_id;
  ASSERT_TRUE(c.AllocateActor("a1", R("GPU=1"), Slot{lost, {1}}, "pg-1", 1).ok());
  Cluster::Displaced d = c.RemoveNode(lost);
  EXPECT_THAT(d.actors, ElementsAre("a1"));
  ASSERT_EQ(d.bundles.size(), 1u);
  EXPECT_EQ(d.bundles[0], std::make_pair(std::string("pg-1"), 1));
  absl::StatusOr<std::vector<std::optional<Slot>>> now = c.GroupSlots("pg-1");
  ASSERT_TRUE(now.ok());
  EXPECT_FALSE((*now)[1]);
  absl::StatusOr<std::vector<Slot>> again = c.PlanGroup(req, *now);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)[0], (*slots)[0]) << "placed bundles stay";
  EXPECT_NE((*again)[1].node_id, (*again)[0].node_id) << "STRICT_SPREAD still holds";
  EXPECT_NE((*again)[1].node_id, lost);
  ASSERT_TRUE(c.PlaceBundles("pg-1", *again).ok());
  EXPECT_TRUE(c.PlanActor(D("GPU=1"), "pg-1", 1).ok());
}

TEST(InvariantsTest, CatchesDoubleBookingAndDrift) {
  std::vector<NodeSpec> nodes = {Node("n1", 2)};
  std::vector<Allocation> recorded = {
      {"a", "n1", R("GPU=1"), {0}, "", -1},
      {"b", "n1", R("GPU=1"), {0}, "", -1},
  };
  absl::Status s = CheckInvariants(nodes, recorded);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("GPU 0 booked 2 times over"));
  recorded[1].gpu_ids = {1};
  EXPECT_TRUE(CheckInvariants(nodes, recorded).ok());
  Cluster c;
  ASSERT_TRUE(c.AddNode(nodes[0]).ok());
  ASSERT_TRUE(c.AllocateActor("a", R("GPU=1"), Slot{"n1", {0}}).ok());
  s = CheckInvariants(nodes, recorded, &c);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("b: recorded on n1 but the scheduler does not hold it"));
  recorded.push_back({"c", "n9", R("CPU=1"), {}, "", -1});
  EXPECT_THAT(CheckInvariants(nodes, recorded).message(), HasSubstr("unknown or dead node n9"));
}

TEST(ValidationTest, RejectsBadDemandsNamingTheField) {
  Cluster c;
  ASSERT_TRUE(c.AddNode(Node("n1", 8)).ok());
  GroupRequest g = Group("g", 2, "GPU=1", Strategy::kPack);
  g.bundles[1].resources = R("GPU=1.5");
  absl::StatusOr<std::vector<Slot>> s = c.PlanGroup(g);
  EXPECT_TRUE(absl::IsInvalidArgument(s.status()));
  EXPECT_THAT(s.status().message(), HasSubstr("bundles[1].resources"));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseStrategy("SPRAED").status()));
  EXPECT_EQ(*ParseStrategy("strict_spread"), Strategy::kStrictSpread);
}

}  // namespace
}  // namespace skyrl::scheduler
