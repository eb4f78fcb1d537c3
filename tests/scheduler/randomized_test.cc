// Seeded random sequences of node joins and deaths, group creation and removal, actor
// placement and release, and "head restarts" (a new Cluster rebuilt from the tables, as the
// head does from the store), checked against the invariant checker after every step.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "absl/strings/str_cat.h"
#include "scheduler/cluster.h"
#include "scheduler/invariants.h"

namespace skyrl::scheduler {
namespace {

// What the head would have in its tables: the truth the checker compares against.
struct Tables {
  std::map<std::string, NodeSpec> nodes;
  std::map<std::string, std::pair<GroupRequest, std::vector<std::optional<Slot>>>> groups;
  std::map<std::string, Allocation> actors;

  std::vector<NodeSpec> NodeList() const {
    std::vector<NodeSpec> out;
    for (const auto& [id, n] : nodes) out.push_back(n);
    return out;
  }
  std::vector<Allocation> Recorded() const {
    std::vector<Allocation> out;
    for (const auto& [id, a] : actors) out.push_back(a);
    for (const auto& [gid, g] : groups)
      for (size_t i = 0; i < g.second.size(); ++i)
        if (g.second[i])
          out.push_back(Allocation{absl::StrCat(gid, "#", i), g.second[i]->node_id,
                                   g.first.bundles[i].resources, g.second[i]->gpu_ids, gid, int(i)});
    return out;
  }
};

Cluster Rebuild(const Tables& t) {
  Cluster c;
  for (const auto& [id, n] : t.nodes) EXPECT_TRUE(c.AddNode(n).ok());
  for (const auto& [gid, g] : t.groups) EXPECT_TRUE(c.ReserveGroup(gid, g.first, g.second).ok()) << gid;
  for (const auto& [id, a] : t.actors) {
    absl::Status s = c.AllocateActor(id, a.resources, Slot{a.node_id, a.gpu_ids}, a.group, a.bundle);
    EXPECT_TRUE(s.ok()) << s;
  }
  return c;
}

ResourceSet GpuRequest(std::mt19937& rng) {
  static const char* kChoices[] = {"CPU=1", "GPU=1,CPU=1", "GPU=0.5", "GPU=0.25,CPU=2",
                                   "GPU=2", "GPU=4",       "GPU=0.7"};
  return *ResourceSet::Parse(kChoices[rng() % 7]);
}

// The node a scan of every node picks for an actor outside any group: the rule PlanActor's
// placement index must give the same answer to (tightest GPU fit; for the rest, nodes
// without GPUs, then the most free CPU; ties by id).
std::optional<std::string> ScanChoice(const Cluster& c, const Demand& d) {
  std::optional<std::string> best;
  int64_t best_key = 0;
  const bool gpu = d.resources.GetUnits(kGPU) > 0;
  for (const std::string& id : c.NodeIds()) {
    const Pool* pool = c.NodePool(id);
    const NodeSpec* node = c.FindNode(id);
    if (!Matches(node->labels, d.selector) || !pool->Fit(d.resources)) continue;
    int64_t key = gpu ? pool->free().GetUnits(kGPU)
                      : (node->gpu_ids.empty() ? 0 : int64_t(1) << 50) - pool->free().GetUnits(kCPU);
    if (!best || key < best_key) best = id, best_key = key;
  }
  return best;
}

// The node a scan of every node picks for a STRICT_PACK group (no domain, no affinity): the
// one with the fewest free GPU units (ties by id) that holds every bundle, biggest first.
std::optional<std::string> ScanStrictPack(const Cluster& c, const GroupRequest& g) {
  std::vector<ResourceSet> bundles;
  for (const Demand& d : g.bundles) bundles.push_back(d.resources);
  std::stable_sort(bundles.begin(), bundles.end(), [](const ResourceSet& x, const ResourceSet& y) {
    return std::make_pair(-x.GetUnits(kGPU), -x.GetUnits(kCPU)) <
           std::make_pair(-y.GetUnits(kGPU), -y.GetUnits(kCPU));
  });
  std::optional<std::pair<int64_t, std::string>> best;
  for (const std::string& id : c.NodeIds()) {
    Pool pool = *c.NodePool(id);
    const int64_t key = pool.free().GetUnits(kGPU);
    bool fits = true;
    for (const ResourceSet& need : bundles) {
      std::optional<std::vector<int>> ids = pool.Fit(need);
      if (!(fits = ids && pool.Take(need, *ids).ok())) break;
    }
    if (fits && (!best || std::make_pair(key, id) < *best)) best = {key, id};
  }
  if (!best) return std::nullopt;
  return best->second;
}

class RandomizedTest : public ::testing::TestWithParam<int> {};

TEST_P(RandomizedTest, InvariantsHoldThroughRandomOperations) {
  std::mt19937 rng(GetParam());
  Cluster c;
  Tables t;
  int next = 0;
  int placed_groups = 0, placed_actors = 0, restarts = 0;
  for (int step = 0; step < 400; ++step) {
    int op = rng() % 100;
    if (op < 10 || t.nodes.size() < 2) {  // a node joins
      int gpus = std::vector<int>{0, 2, 4, 8}[rng() % 4];
      const std::string host = absl::StrCat("n", next++);
      NodeSpec n{host,
                 *ResourceSet::Parse(absl::StrCat("CPU=16,GPU=", gpus)),
                 {{"rack", absl::StrCat("r", rng() % 2)}, {"all", "1"}, {"host", host}},
                 {}};
      for (int i = 0; i < gpus; ++i) n.gpu_ids.push_back(i);
      ASSERT_TRUE(c.AddNode(n).ok());
      t.nodes[n.id] = n;
    } else if (op < 16) {  // a node dies
      auto it = std::next(t.nodes.begin(), rng() % t.nodes.size());
      std::string id = it->first;
      Cluster::Displaced d = c.RemoveNode(id);
      t.nodes.erase(id);
      for (const std::string& a : d.actors) {
        ASSERT_TRUE(t.actors.contains(a));
        t.actors.erase(a);
      }
      for (const auto& [gid, i] : d.bundles) t.groups[gid].second[i].reset();
      for (const auto& [aid, a] : t.actors) ASSERT_NE(a.node_id, id) << aid << " survived its node";
    } else if (op < 36) {  // a group is created
      GroupRequest g;
      g.name = absl::StrCat("g", next);
      g.strategy = Strategy(rng() % 4);
      if (rng() % 4 == 0) g.domain_label = "rack";
      int bundles = 1 + rng() % 4;
      for (int i = 0; i < bundles; ++i) g.bundles.push_back(Demand{GpuRequest(rng), {}});
      absl::StatusOr<std::vector<Slot>> slots = c.PlanGroup(g);
      if (g.domain_label.empty()) {
        // Planned through the indexes; with every node in one domain ("all"), by the walk over
        // that domain's nodes. The same plan.
        GroupRequest one_domain = g;
        one_domain.domain_label = "all";
        absl::StatusOr<std::vector<Slot>> walked = c.PlanGroup(one_domain);
        ASSERT_EQ(slots.ok(), walked.ok()) << slots.status() << " / " << walked.status();
        if (slots.ok())
          for (size_t i = 0; i < slots->size(); ++i) {
            ASSERT_EQ((*slots)[i].node_id, (*walked)[i].node_id) << "bundle " << i;
            ASSERT_EQ((*slots)[i].gpu_ids, (*walked)[i].gpu_ids) << "bundle " << i;
          }
      }
      if (g.strategy == Strategy::kStrictPack && g.domain_label.empty()) {
        std::optional<std::string> scan = ScanStrictPack(c, g);
        ASSERT_EQ(slots.ok(), scan.has_value()) << slots.status();
        if (scan) ASSERT_EQ((*slots)[0].node_id, *scan) << "the index must pick what a scan picks";
      }
      if (!slots.ok()) {
        ASSERT_TRUE(absl::IsUnavailable(slots.status()) || absl::IsResourceExhausted(slots.status()))
            << slots.status();
        continue;
      }
      std::string gid = absl::StrCat("pg-", next++);
      std::vector<std::optional<Slot>> opt(slots->begin(), slots->end());
      ASSERT_TRUE(c.ReserveGroup(gid, g, opt).ok());
      t.groups[gid] = {g, opt};
      ++placed_groups;
    } else if (op < 46 && !t.groups.empty()) {  // a group is removed
      auto it = std::next(t.groups.begin(), rng() % t.groups.size());
      std::string gid = it->first;
      for (const std::string& a : c.RemoveGroup(gid)) {
        ASSERT_EQ(t.actors[a].group, gid);
        t.actors.erase(a);
      }
      t.groups.erase(gid);
    } else if (op < 54) {  // lost bundles are placed again
      for (auto& [gid, g] : t.groups) {
        bool missing = false;
        for (const auto& s : g.second) missing |= !s.has_value();
        if (!missing) continue;
        absl::StatusOr<std::vector<Slot>> slots = c.PlanGroup(g.first, g.second);
        if (!slots.ok()) continue;
        for (size_t i = 0; i < g.second.size(); ++i)
          if (g.second[i]) {
            ASSERT_EQ(*g.second[i], (*slots)[i]) << "a placed bundle moved";
          }
        ASSERT_TRUE(c.PlaceBundles(gid, *slots).ok());
        g.second.assign(slots->begin(), slots->end());
      }
    } else if (op < 80) {  // an actor is placed, on a node or in a group
      Demand d{GpuRequest(rng), {}};
      // Selectors matching half the nodes (walked in index order), or one node, or none
      // (visited as a set): the same choice as the scan.
      if (rng() % 4 == 0) d.selector["rack"] = absl::StrCat("r", rng() % 2);
      if (rng() % 4 == 0) d.selector["host"] = absl::StrCat("n", rng() % (next + 2));
      std::string group;
      std::optional<int> bundle;
      if (!t.groups.empty() && rng() % 2) {
        auto it = std::next(t.groups.begin(), rng() % t.groups.size());
        group = it->first;
        if (rng() % 2) bundle = int(rng() % it->second.first.bundles.size());
      }
      absl::StatusOr<Slot> slot = c.PlanActor(d, group, bundle);
      if (group.empty()) {
        std::optional<std::string> scan = ScanChoice(c, d);
        ASSERT_EQ(slot.ok(), scan.has_value())
            << "seed " << GetParam() << " step " << step << ": " << slot.status();
        if (scan) {
          ASSERT_EQ(slot->node_id, *scan) << "seed " << GetParam() << " step " << step;
        }
      }
      if (!slot.ok()) continue;
      int b = slot->bundle;
      if (!group.empty()) {
        ASSERT_GE(b, 0);
        if (bundle) {
          ASSERT_EQ(b, *bundle);
        }
      }
      std::string id = absl::StrCat("actor-", next++);
      absl::Status s = c.AllocateActor(id, d.resources, *slot, group, b);
      ASSERT_TRUE(s.ok()) << s;
      t.actors[id] = Allocation{id, slot->node_id, d.resources, slot->gpu_ids, group, b};
      ++placed_actors;
    } else if (op < 86 && !t.actors.empty()) {  // an actor blocks (lends its CPU) or unblocks
      auto it = std::next(t.actors.begin(), rng() % t.actors.size());
      if (rng() % 2) {
        c.LendCpu(it->first);
      } else {
        (void)c.ReclaimCpu(it->first);
      }
    } else if (op < 95 && !t.actors.empty()) {  // an actor exits
      auto it = std::next(t.actors.begin(), rng() % t.actors.size());
      c.ReleaseActor(it->first);
      t.actors.erase(it);
    } else {  // the head restarts: everything rebuilt from the tables
      c = Rebuild(t);
      ++restarts;
    }
    absl::Status ok = CheckInvariants(t.NodeList(), t.Recorded(), &c);
    ASSERT_TRUE(ok.ok()) << "seed " << GetParam() << " step " << step << ": " << ok;
  }
  EXPECT_GT(placed_groups, 5);
  EXPECT_GT(placed_actors, 5);
}

INSTANTIATE_TEST_SUITE_P(Seeds, RandomizedTest, ::testing::Range(1, 9));

}  // namespace
}  // namespace skyrl::scheduler
