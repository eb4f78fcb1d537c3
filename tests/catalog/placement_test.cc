// The plan's placement groups through the real scheduler (catalog/placement.h): conversion to
// scheduler::GroupRequest, the simulated nodes, the exact bundle -> (node, GPU) mapping of a
// hand-made case, refusals as Internal errors, every table row's reference plan, and the
// placement in text and --json.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "catalog/capacity_planner.h"
#include "catalog/placement.h"
#include "catalog/plan_command.h"
#include "catalog/render.h"
#include "tests/catalog/test_catalog.h"

namespace skyrl::catalog {
namespace {

using testing::RealCatalog;

Cluster Hand(int nodes, int gpn, int cpus = 0) {
  Cluster c;
  c.shape = {nodes, gpn, "X1"};
  c.gpu.name = "X1";
  c.cpus_per_node = cpus;
  c.host_memory_gb = 512;
  return c;
}

PlacementGroupSpec Spec(std::string name, std::string strategy, int bundles, std::string affinity = "",
                        std::string domain = "") {
  PlacementGroupSpec g{std::move(name), std::move(strategy), std::move(domain), std::move(affinity), {}};
  for (int i = 0; i < bundles; ++i) g.bundles.push_back(BundleSpec{1, 1, {{"accelerator", "X1"}}, 0, 0});
  return g;
}

BundlePlacement At(int node, std::vector<int> gpus) {
  return BundlePlacement{node, absl::StrCat("node-0", node), std::move(gpus)};
}

TEST(PlacementTest, SpecBecomesTheSchedulersRequest) {
  PlacementGroupSpec g = Spec("generator-0", "STRICT_PACK", 2, "trainer", "nvlink-domain");
  g.bundles[1].cpu = 0.5;
  absl::StatusOr<scheduler::GroupRequest> r = ToGroupRequest(g);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->name, "generator-0");
  EXPECT_EQ(r->strategy, scheduler::Strategy::kStrictPack);
  EXPECT_EQ(r->domain_label, "nvlink-domain");
  EXPECT_EQ(r->affinity_group, "trainer");
  ASSERT_EQ(r->bundles.size(), 2u);
  EXPECT_EQ(r->bundles[0].resources.ToString(), "CPU=1,GPU=1");
  EXPECT_EQ(r->bundles[1].resources.ToString(), "CPU=0.5,GPU=1");
  EXPECT_EQ(r->bundles[0].selector, (scheduler::Labels{{"accelerator", "X1"}}));
}

TEST(PlacementTest, RequestsTheSchedulerRefusesNameTheGroupAndField) {
  PlacementGroupSpec bad = Spec("trainer", "TIGHT", 1);
  absl::StatusOr<scheduler::GroupRequest> r = ToGroupRequest(bad);
  ASSERT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "placement group trainer: strategy")) << r.status();
  // More than one GPU must be whole: 1.5 is refused by the scheduler's own validation.
  PlacementGroupSpec split = Spec("trainer", "PACK", 2);
  split.bundles[1].gpu = 1.5;
  r = ToGroupRequest(split);
  ASSERT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "bundles[1]")) << r.status();
  PlacementGroupSpec negative = Spec("trainer", "PACK", 1);
  negative.bundles[0].cpu = -1;
  r = ToGroupRequest(negative);
  ASSERT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "bundles[0].CPU")) << r.status();
}

TEST(PlacementTest, SimulatedNodesAreLabelledLikeWorkers) {
  std::vector<scheduler::NodeSpec> nodes = SimulatedNodes(Hand(12, 4, 48));
  ASSERT_EQ(nodes.size(), 12u);
  EXPECT_EQ(nodes[0].id, "node-00");
  EXPECT_EQ(nodes[11].id, "node-11");
  for (size_t i = 1; i < nodes.size(); ++i)
    EXPECT_LT(nodes[i - 1].id, nodes[i].id) << "id order is index order";
  EXPECT_EQ(nodes[3].total.Get(kCPU), 48);
  EXPECT_EQ(nodes[3].total.Get(kGPU), 4);
  EXPECT_EQ(nodes[3].total.Get(kMemory), 512e9);  // the node's host memory
  EXPECT_EQ(nodes[3].gpu_ids, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(nodes[3].labels, (scheduler::Labels{{"accelerator", "X1"}, {"nvlink-domain", "node-03"}}));
  // Unknown CPUs: one per GPU, what the bundles then ask.
  EXPECT_EQ(SimulatedNodes(Hand(1, 8))[0].total.Get(kCPU), 8);
  // Wider indices stay ordered.
  std::vector<scheduler::NodeSpec> many = SimulatedNodes(Hand(101, 1));
  EXPECT_EQ(many[7].id, "node-007");
  EXPECT_LT(many[99].id, many[100].id);
}

// Trainer of 6 on 3 nodes x 4, then two TP2 engines near it: ranks go node by node, devices
// ascending; the first engine takes the rest of the trainer's second node (affinity), the
// second the next node.
TEST(PlacementTest, HandMadeCaseMapsBundlesToNodesAndDevices) {
  std::vector<PlacementGroupSpec> groups = {Spec("trainer", "PACK", 6),
                                            Spec("generator-0", "STRICT_PACK", 2, "trainer"),
                                            Spec("generator-1", "STRICT_PACK", 2, "trainer")};
  absl::StatusOr<std::vector<GroupPlacement>> placed = PlaceGroups(Hand(3, 4), groups);
  ASSERT_TRUE(placed.ok()) << placed.status();
  ASSERT_EQ(placed->size(), 3u);
  EXPECT_EQ((*placed)[0].group, "trainer");
  EXPECT_EQ((*placed)[0].bundles, (std::vector<BundlePlacement>{At(0, {0}), At(0, {1}), At(0, {2}),
                                                                At(0, {3}), At(1, {0}), At(1, {1})}));
  EXPECT_EQ((*placed)[1].bundles, (std::vector<BundlePlacement>{At(1, {2}), At(1, {3})}));
  EXPECT_EQ((*placed)[2].bundles, (std::vector<BundlePlacement>{At(2, {0}), At(2, {1})}));
  EXPECT_EQ(DescribePlacement((*placed)[0]),
            "bundles 0-3 -> node 0 GPUs 0-3, bundles 4-5 -> node 1 GPUs 0-1");
  EXPECT_EQ(DescribePlacement((*placed)[1]), "bundles 0-1 -> node 1 GPUs 2-3");
}

TEST(PlacementTest, DescriptionMergesWholeNodesAndListsOddDevices) {
  GroupPlacement g{"colocated", {}};
  for (int n = 0; n < 3; ++n)
    for (int d = 0; d < 4; ++d) g.bundles.push_back(At(n, {d}));
  EXPECT_EQ(DescribePlacement(g), "bundles 0-11 -> nodes 0-2 x GPUs 0-3");
  g.bundles.push_back(At(3, {0}));
  EXPECT_EQ(DescribePlacement(g), "bundles 0-11 -> nodes 0-2 x GPUs 0-3, bundle 12 -> node 3 GPU 0");
  GroupPlacement odd{"x", {At(0, {1, 3}), At(0, {}), At(1, {0, 1})}};
  EXPECT_EQ(DescribePlacement(odd),
            "bundle 0 -> node 0 GPUs 1,3, bundle 1 -> node 0 no GPU, bundle 2 -> node 1 GPUs 0-1");
}

TEST(PlacementTest, AGroupTheSchedulerRefusesIsAnInternalError) {
  // 4 bundles STRICT_PACK on nodes of 2 GPUs: no node holds them.
  absl::StatusOr<std::vector<GroupPlacement>> placed =
      PlaceGroups(Hand(2, 2), {Spec("trainer", "PACK", 2), Spec("generator-0", "STRICT_PACK", 4, "trainer")});
  ASSERT_TRUE(absl::IsInternal(placed.status())) << placed.status();
  std::string msg(placed.status().message());
  EXPECT_TRUE(absl::StrContains(msg, "placement group generator-0 (STRICT_PACK, 4 bundles)")) << msg;
  EXPECT_TRUE(absl::StrContains(msg, "2 nodes x 2 X1")) << msg;
  EXPECT_TRUE(absl::StrContains(msg, "no node can hold all 4 bundles")) << msg;  // the scheduler's words
  // Groups are placed in order and kept: the second group no longer fits beside the first.
  placed = PlaceGroups(Hand(1, 4), {Spec("trainer", "PACK", 3), Spec("generator-0", "STRICT_PACK", 2)});
  ASSERT_TRUE(absl::IsInternal(placed.status())) << placed.status();
  EXPECT_TRUE(absl::StrContains(placed.status().message(), "generator-0")) << placed.status();
  // CPUs count: 8 bundles of one CPU on a node of 4.
  placed = PlaceGroups(Hand(1, 8, 4), {Spec("colocated", "STRICT_PACK", 8)});
  ASSERT_TRUE(absl::IsInternal(placed.status())) << placed.status();
  EXPECT_TRUE(absl::StrContains(placed.status().message(), "CPU")) << placed.status();
}

TEST(PlacementTest, MismatchesNameTheBundleAndBothPlaces) {
  std::vector<PlacementGroupSpec> groups = {Spec("trainer", "PACK", 2)};
  groups[0].bundles[1].gpu_id = 1;
  absl::StatusOr<std::vector<GroupPlacement>> placed = PlaceGroups(Hand(2, 2), groups);
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_TRUE(PlacementMismatches(groups, *placed).empty());
  groups[0].bundles[1].node = 1;  // the scheduler keeps both on node 0
  groups[0].bundles[1].gpu_id = 0;
  EXPECT_EQ(PlacementMismatches(groups, *placed),
            (std::vector<std::string>{
                "trainer: bundles 0-1 -> node 0 GPUs 0-1; expected bundles 0-1 -> nodes 0-1 x GPU 0"}));
}

// Every table row's reference plan at its stated minimum (and the other placement where that
// plans too) is placed by the scheduler exactly where the plan's cost model puts it: the
// bundle shapes pass the scheduler's validation, no device is given twice, and no plan carries
// a placement note.
void ExpectPlacedAsPlanned(const Plan& p, const std::string& what) {
  std::set<std::pair<int, int>> used;
  int bundles = 0;
  std::vector<PlacementGroupSpec> specs;
  std::vector<GroupPlacement> placed;
  for (const PlannedGroup& g : p.groups) {
    ASSERT_EQ(g.placement.bundles.size(), g.spec.bundles.size()) << what << " " << g.spec.name;
    EXPECT_EQ(g.placement.group, g.spec.name) << what;
    for (const BundlePlacement& b : g.placement.bundles) {
      ASSERT_EQ(b.gpu_ids.size(), 1u) << what;
      EXPECT_TRUE(used.insert({b.node, b.gpu_ids[0]}).second) << what << ": device given twice";
      ++bundles;
    }
    specs.push_back(g.spec);
    placed.push_back(g.placement);
  }
  EXPECT_TRUE(PlacementMismatches(specs, placed).empty())
      << what << ": " << PlacementMismatches(specs, placed).front();
  for (const std::string& n : p.notes) EXPECT_FALSE(absl::StartsWith(n, "placement:")) << what << ": " << n;
  EXPECT_EQ(bundles, p.placement == Placement::kColocated ? p.cluster.shape.total_gpus()
                                                          : p.trainer.shape.gpus + p.generator.gpus)
      << what;
}

TEST(PlacementTest, EveryRowsReferencePlanPlacesOnTheSchedulerAsPlanned) {
  const Catalog& cat = RealCatalog();
  int plans = 0;
  for (const Row& r : cat.rows()) {
    const ModelEntry* m = nullptr;
    for (const ModelEntry& e : r.models)
      if (e.name == r.reference.model) m = &e;
    ASSERT_NE(m, nullptr) << r.family;
    Cluster min = StatedMinimum(cat, r);
    PlanRequest opts;
    opts.plan_weight_sync = false;  // not what is checked here; keeps the sweep fast
    UseReferenceRecipe(r, &opts.assumptions);
    absl::StatusOr<Plan> at = PlanOn(cat, r, *m, r.reference.mode, min, r.reference.placement, opts);
    ASSERT_TRUE(at.ok()) << r.family << " at " << min.shape.ToString() << ": " << at.status();
    ExpectPlacedAsPlanned(*at, r.family + " at " + min.shape.ToString());
    ++plans;
    Placement other =
        r.reference.placement == Placement::kSeparate ? Placement::kColocated : Placement::kSeparate;
    absl::StatusOr<Plan> alt = PlanOn(cat, r, *m, r.reference.mode, min, other, opts);
    if (alt.ok()) ExpectPlacedAsPlanned(*alt, r.family + " " + std::string(PlacementName(other))), ++plans;
    // A bigger cluster of the same type: more nodes, engines after a partly used node.
    Cluster bigger = min;
    bigger.shape.nodes = min.shape.nodes * 2 + 1;
    absl::StatusOr<Plan> big = PlanOn(cat, r, *m, r.reference.mode, bigger, Placement::kSeparate, opts);
    if (big.ok()) ExpectPlacedAsPlanned(*big, r.family + " at " + bigger.shape.ToString()), ++plans;
  }
  EXPECT_GE(plans, 2 * static_cast<int>(cat.rows().size()));
}

TEST(PlacementTest, FewerCpusThanGpusShareThemOut) {
  const Catalog& cat = RealCatalog();
  for (auto [cpus, each] : {std::pair{4, 0.5}, {3, 0.375}, {7, 0.875}, {100, 12.0}}) {
    absl::StatusOr<Cluster> c =
        ParseClusterYaml(absl::StrCat("nodes: 2\ngpus_per_node: 8\ngpu: H100\ncpus_per_node: ", cpus, "\n"),
                         "c.yaml", cat.hardware());
    ASSERT_TRUE(c.ok()) << c.status();
    PlanRequest req;
    req.model = "Qwen3-8B";
    req.cluster = *c;
    req.plan_weight_sync = false;
    absl::StatusOr<Plan> p = MakePlan(cat, req);
    ASSERT_TRUE(p.ok()) << cpus << " CPUs: " << p.status();
    EXPECT_DOUBLE_EQ(p->groups[0].spec.bundles[0].cpu, each) << cpus << " CPUs";
    ExpectPlacedAsPlanned(*p, absl::StrCat(cpus, " CPUs"));
  }
}

TEST(PlacementTest, TextAndJsonCarryTheSchedulersPlacement) {
  const Catalog& cat = RealCatalog();
  PlanRequest req;
  req.model = "Qwen3-8B";
  req.cluster = *ParseCluster("2x8xH100", cat.hardware());
  req.plan_weight_sync = false;
  absl::StatusOr<Plan> p = MakePlan(cat, req);
  ASSERT_TRUE(p.ok()) << p.status();
  std::string text = RenderPlanText(*p);
  for (const PlannedGroup& g : p->groups)
    EXPECT_TRUE(absl::StrContains(text, DescribePlacement(g.placement))) << text;
  EXPECT_TRUE(absl::StrContains(text, "placed by the scheduler on a simulated 2x8xH100")) << text;

  PlanCommandOptions o;
  o.models_dir = SKYRL_TEST_MODELS_DIR;
  o.model = "Qwen3-8B";
  o.cluster = "2x8xH100";
  o.json = true;
  std::ostringstream out, err;
  ASSERT_EQ(RunPlanCommand(o, out, err), 0) << err.str();
  nlohmann::json j = nlohmann::json::parse(out.str());
  const nlohmann::json& groups = j.at("placement_groups");
  ASSERT_EQ(groups.size(), p->groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    const GroupPlacement& placed = p->groups[g].placement;
    EXPECT_EQ(groups[g].at("name"), placed.group);
    EXPECT_EQ(groups[g].at("placement"), DescribePlacement(placed));
    ASSERT_EQ(groups[g].at("bundles").size(), placed.bundles.size());
    for (size_t b = 0; b < placed.bundles.size(); ++b) {
      const nlohmann::json& jb = groups[g].at("bundles")[b];
      EXPECT_EQ(jb.at("node").get<int>(), placed.bundles[b].node);
      EXPECT_EQ(jb.at("node_id"), placed.bundles[b].node_id);
      EXPECT_EQ(jb.at("gpu_ids").get<std::vector<int>>(), placed.bundles[b].gpu_ids);
    }
  }
  // The trainer starts at node 0 GPU 0; the first engine follows it on its last node.
  EXPECT_EQ(groups[0].at("bundles")[0].at("node_id"), "node-00");
  EXPECT_EQ(groups[0].at("bundles")[0].at("gpu_ids"), nlohmann::json::array({0}));
  const int t = j.at("trainer").at("gpus");
  EXPECT_EQ(groups[1].at("bundles")[0].at("node").get<int>(), t / 8);
  EXPECT_EQ(groups[1].at("bundles")[0].at("gpu_ids"), nlohmann::json::array({t % 8}));
}

}  // namespace
}  // namespace skyrl::catalog
