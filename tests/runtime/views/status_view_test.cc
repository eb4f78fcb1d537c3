// What `skyrl status` and `skyrl list ... [--json]` print, from fixed tables.
#include "runtime/views/status_view.h"

#include <gtest/gtest.h>

#include <sstream>

#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace skyrl::views {
namespace {

const absl::Time kNow = absl::FromUnixMillis(1'000'000);

v1::NodeInfo Node(const std::string& id, bool alive, double cpus, int gpus) {
  v1::NodeInfo n;
  n.set_node_id(id);
  n.set_state(alive ? v1::NODE_ALIVE : v1::NODE_DEAD);
  n.set_hostname("host-" + id);
  n.set_address(id + ":7000");
  (*n.mutable_resources_total())["CPU"] = cpus;
  if (gpus > 0) (*n.mutable_resources_total())["GPU"] = gpus;
  for (int i = 0; i < gpus; ++i) n.add_gpu_ids(i);
  (*n.mutable_labels())["pool"] = "train";
  n.set_last_heartbeat_unix_ms(1'000'000 - 1500);
  if (!alive) n.set_death_reason("no heartbeat for 5s");
  return n;
}

v1::ActorInfo Actor(const std::string& id, v1::ActorState state, const std::string& node, double gpus,
                    const std::string& group = "") {
  v1::ActorInfo a;
  a.set_actor_id(id);
  a.set_state(state);
  a.set_node_id(node);
  a.mutable_spec()->set_class_name("trainer");
  (*a.mutable_spec()->mutable_resources())["GPU"] = gpus;
  a.mutable_spec()->set_placement_group_id(group);
  return a;
}

v1::PlacementGroupInfo Group(const std::string& id, v1::PlacementGroupState state, const std::string& node) {
  v1::PlacementGroupInfo g;
  g.set_placement_group_id(id);
  g.set_state(state);
  g.mutable_spec()->set_name("rollout");
  g.mutable_spec()->set_namespace_("rl");
  (*g.mutable_spec()->add_bundles()->mutable_resources())["GPU"] = 2;
  v1::BundlePlacement* b = g.add_bundles();
  b->set_node_id(node);
  b->add_gpu_ids(2);
  b->add_gpu_ids(3);
  return g;
}

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

// The row of `table` whose first column is `key`, split on runs of spaces.
std::vector<std::string> Row(const std::string& table, const std::string& key) {
  for (const std::string& line : Lines(table)) {
    std::vector<std::string> cols = absl::StrSplit(line, "  ", absl::SkipEmpty());
    for (auto& c : cols) c = std::string(absl::StripAsciiWhitespace(c));
    if (!cols.empty() && cols[0] == key) return cols;
  }
  return {};
}

TEST(StatusViewTest, NodesTableCountsActorsOutsideGroupsAndPlacedBundlesOnce) {
  std::vector<v1::NodeInfo> nodes = {Node("n1", true, 8, 4), Node("n2", false, 8, 0)};
  std::vector<v1::ActorInfo> actors = {
      Actor("a1", v1::ACTOR_ALIVE, "n1", 1),          // counted
      Actor("a2", v1::ACTOR_DEAD, "n1", 1),           // holds nothing
      Actor("a3", v1::ACTOR_ALIVE, "n1", 1, "pg-1"),  // counted with its bundle
  };
  std::vector<v1::PlacementGroupInfo> groups = {Group("pg-1", v1::PG_CREATED, "n1"),
                                                Group("pg-2", v1::PG_REMOVED, "n1")};
  std::string table = RenderNodesTable(nodes, kNow, actors, groups);
  std::vector<std::string> header = Row(table, "NODE");
  ASSERT_EQ(header.size(), 8u) << table;
  std::vector<std::string> n1 = Row(table, "n1");
  ASSERT_EQ(n1.size(), 8u) << table;
  EXPECT_EQ(n1[1], "ALIVE");
  EXPECT_EQ(n1[3], "CPU=8,GPU=4");
  EXPECT_EQ(n1[4], "GPU=3") << "one actor outside a group and one placed bundle of 2";
  EXPECT_EQ(n1[5], "0,1,2,3");
  EXPECT_EQ(n1[6], "pool=train");
  EXPECT_EQ(n1[7], "1.5s ago");
  std::vector<std::string> n2 = Row(table, "n2");
  ASSERT_EQ(n2.size(), 8u) << table;
  EXPECT_EQ(n2[4], "-");
  EXPECT_EQ(n2[7], "no heartbeat for 5s") << "a dead node shows why instead of its heartbeat";
  // Columns line up: every column starts at the same offset on every line.
  std::vector<std::string> lines = Lines(table);
  size_t state_col = lines[0].find("STATE");
  for (const std::string& l : lines)
    EXPECT_TRUE(l.compare(state_col, 4, "ALIV") == 0 || l.compare(state_col, 4, "DEAD") == 0 ||
                l.compare(state_col, 5, "STATE") == 0)
        << table;
}

TEST(StatusViewTest, StatusSaysWhatIsPendingAndWhatFailed) {
  std::vector<v1::NodeInfo> nodes = {Node("n1", true, 8, 4), Node("n2", false, 4, 0)};
  v1::ActorInfo waiting = Actor("a9", v1::ACTOR_RESTARTING, "", 8);
  waiting.set_pending_reason("needs GPU=8, largest free node has GPU=4");
  v1::ActorInfo created = Actor("a8", v1::ACTOR_PENDING, "", 1);  // created while the cluster is full
  created.set_pending_reason("needs CPU=1, best match n1 has CPU=0");
  v1::ActorInfo dead = Actor("a7", v1::ACTOR_DEAD, "n2", 1);
  dead.set_death_reason("node lost: n2");
  v1::PlacementGroupInfo pending = Group("pg-3", v1::PG_PENDING, "");
  pending.set_pending_reason("bundle 0 needs GPU=2");
  std::string out = RenderStatus("127.0.0.1:7420", nodes, {waiting, created, dead}, {pending}, kNow);
  EXPECT_NE(out.find("(head 127.0.0.1:7420)"), std::string::npos) << out;
  EXPECT_NE(out.find("Nodes: 1 alive, 1 dead"), std::string::npos) << out;
  EXPECT_NE(out.find("Resources (alive nodes): CPU=8,GPU=4"), std::string::npos) << "dead nodes add nothing\n"
                                                                                 << out;
  EXPECT_NE(out.find("Actors: 3 (DEAD 1, PENDING 1, RESTARTING 1)"), std::string::npos) << out;
  EXPECT_NE(out.find("Pending demands: 3"), std::string::npos) << out;
  EXPECT_NE(out.find("a8 (trainer, PENDING): waits for room: needs CPU=1"), std::string::npos) << out;
  EXPECT_NE(out.find("pg-3 (PENDING): bundle 0 needs GPU=2"), std::string::npos) << out;
  EXPECT_NE(out.find("a9 (trainer, RESTARTING): waits for room: needs GPU=8"), std::string::npos) << out;
  EXPECT_NE(out.find("n2: no heartbeat for 5s"), std::string::npos) << out;
  EXPECT_NE(out.find("a7 (trainer, DEAD): node lost: n2"), std::string::npos) << out;

  std::string calm = RenderStatus("h:1", {Node("n1", true, 8, 0)}, {}, {}, kNow);
  EXPECT_NE(calm.find("Pending demands: none"), std::string::npos) << calm;
  EXPECT_EQ(calm.find("Recent failures"), std::string::npos) << calm;
}

TEST(StatusViewTest, JsonListsParseBackWithEveryField) {
  nlohmann::json nodes = nlohmann::json::parse(RenderNodesJson({Node("n1", true, 8, 2)}));
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0]["node_id"], "n1");
  EXPECT_EQ(nodes[0]["state"], "ALIVE");
  EXPECT_EQ(nodes[0]["resources"]["GPU"], 2);
  EXPECT_EQ(nodes[0]["resources_text"], "CPU=8,GPU=2");
  EXPECT_EQ(nodes[0]["gpu_ids"], (std::vector<int>{0, 1}));
  EXPECT_EQ(nodes[0]["labels"]["pool"], "train");

  v1::ActorInfo a = Actor("a1", v1::ACTOR_ALIVE, "n1", 1);
  a.add_gpu_ids(3);
  a.set_restarts(2);
  a.set_incarnation(4);
  a.mutable_spec()->set_name("engine-0");
  a.mutable_spec()->set_namespace_("rl");
  nlohmann::json actors = nlohmann::json::parse(RenderActorsJson({a}));
  ASSERT_EQ(actors.size(), 1u);
  EXPECT_EQ(actors[0]["class"], "trainer");
  EXPECT_EQ(actors[0]["name"], "engine-0");
  EXPECT_EQ(actors[0]["namespace"], "rl");
  EXPECT_EQ(actors[0]["state"], "ALIVE");
  EXPECT_EQ(actors[0]["gpu_ids"], (std::vector<int>{3}));
  EXPECT_EQ(actors[0]["restarts"], 2);
  EXPECT_EQ(actors[0]["incarnation"], 4);
  EXPECT_EQ(actors[0]["pending_reason"], "");

  nlohmann::json groups = nlohmann::json::parse(RenderGroupsJson({Group("pg-1", v1::PG_CREATED, "n1")}));
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0]["state"], "CREATED") << "the PG_ prefix is dropped";
  EXPECT_EQ(groups[0]["bundles"][0]["node_id"], "n1");
  EXPECT_EQ(groups[0]["bundles"][0]["gpu_ids"], (std::vector<int>{2, 3}));
  EXPECT_EQ(groups[0]["bundles"][0]["resources"]["GPU"], 2);
}

TEST(StatusViewTest, GroupsTableShowsEachBundlesNodeAndDevices) {
  v1::PlacementGroupInfo g = Group("pg-1", v1::PG_CREATED, "node-0123456789abcdef");
  (*g.mutable_spec()->add_bundles()->mutable_resources())["CPU"] = 1;
  g.add_bundles();  // the second bundle, not placed
  std::string table = RenderGroupsTable({g});
  std::vector<std::string> row = Row(table, "pg-1");
  ASSERT_EQ(row.size(), 6u) << table;
  EXPECT_EQ(row[1], "rl/rollout");
  EXPECT_EQ(row[2], "CREATED");
  EXPECT_EQ(row[4], "2");
  EXPECT_EQ(row[5], "node-012345:2,3 -") << "node ids cut to 11 characters; '-' for an unplaced bundle";
}

}  // namespace
}  // namespace skyrl::views
