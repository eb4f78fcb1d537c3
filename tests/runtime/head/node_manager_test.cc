#include "runtime/head/node_manager.h"

#include <gtest/gtest.h>

#include "runtime/store/memory/memory_store.h"

namespace skyrl::head {
namespace {

v1::NodeInfo Node(double gpus = 2) {
  v1::NodeInfo n;
  n.set_hostname("host-a");
  (*n.mutable_resources_total())["CPU"] = 8;
  (*n.mutable_resources_total())["GPU"] = gpus;
  for (int i = 0; i < int(gpus); ++i) n.add_gpu_ids(i);
  (*n.mutable_labels())["pool"] = "train";
  return n;
}

// The death threshold alone, without the isolation guard (tested on its own below).
class NodeManagerTest : public ::testing::Test {
 protected:
  store::MemoryStore store_;
  FakeClock clock_;
  NodeManager nodes_{store_, clock_, {absl::Seconds(1), 5, absl::ZeroDuration(), /*isolation_guard=*/false}};
};

TEST_F(NodeManagerTest, RegisterPersistsTheNode) {
  auto id = nodes_.Register(Node());
  ASSERT_TRUE(id.ok()) << id.status();
  auto stored = store_.Get(kNodesTable, id->ToString());
  ASSERT_TRUE(stored.ok());
  v1::NodeInfo info;
  ASSERT_TRUE(info.ParseFromString(*stored));
  EXPECT_EQ(info.state(), v1::NODE_ALIVE);
  EXPECT_EQ(info.hostname(), "host-a");
  EXPECT_EQ(info.labels().at(kNodeIdLabel), id->ToString()) << "every node is labelled with its id";
  ASSERT_EQ(nodes_.List().size(), 1u);
}

TEST_F(NodeManagerTest, NodeDiesAfterTheConfiguredMissesAndNotBefore) {
  NodeId id = *nodes_.Register(Node());
  clock_.Advance(absl::Seconds(4));
  ASSERT_TRUE(nodes_.Heartbeat(id).ok());
  clock_.Advance(absl::Seconds(5));  // exactly period x misses since the last heartbeat
  EXPECT_TRUE(nodes_.CheckLiveness().empty());
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_EQ(nodes_.CheckLiveness(), std::vector<NodeId>{id});
  v1::NodeInfo info = nodes_.List()[0];
  EXPECT_EQ(info.state(), v1::NODE_DEAD);
  EXPECT_NE(info.death_reason().find("no heartbeat"), std::string::npos) << info.death_reason();
  EXPECT_TRUE(absl::IsNotFound(nodes_.Heartbeat(id)));
  // Re-registering with its id brings it back.
  v1::NodeInfo again = Node();
  again.set_node_id(id.ToString());
  ASSERT_EQ(*nodes_.Register(again), id);
  EXPECT_TRUE(nodes_.Heartbeat(id).ok());
}

TEST_F(NodeManagerTest, RecoverRestoresNodesWithAFreshHeartbeatWindow) {
  NodeId alive = *nodes_.Register(Node());
  NodeId left = *nodes_.Register(Node(0));
  ASSERT_TRUE(nodes_.Unregister(left, "test").ok());
  clock_.Advance(absl::Minutes(10));
  NodeManager restarted(store_, clock_, {absl::Seconds(1), 5});
  ASSERT_TRUE(restarted.Recover().ok());
  EXPECT_TRUE(restarted.CheckLiveness().empty()) << "recovered nodes get a full window";
  EXPECT_TRUE(restarted.Heartbeat(alive).ok());
  EXPECT_TRUE(absl::IsNotFound(restarted.Heartbeat(left)));
  EXPECT_EQ(restarted.List().size(), 2u);
}

TEST_F(NodeManagerTest, RejectsBadDescriptionsNamingTheField) {
  v1::NodeInfo bad = Node();
  (*bad.mutable_resources_total())["CPU"] = -1;
  auto s = nodes_.Register(bad).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("resources_total"), std::string::npos) << s;

  bad = Node(2);
  bad.add_gpu_ids(7);  // three ids for GPU=2
  EXPECT_NE(nodes_.Register(bad).status().message().find("gpu_ids"), std::string::npos);
  bad = Node(2);
  bad.set_gpu_ids(1, 0);  // repeated id
  EXPECT_NE(nodes_.Register(bad).status().message().find("gpu_ids"), std::string::npos);
  bad = Node();
  bad.set_node_id("actor-000000000000000000000001");
  EXPECT_NE(nodes_.Register(bad).status().message().find("node_id"), std::string::npos);
  bad = Node();
  (*bad.mutable_labels())["bad key"] = "x";
  EXPECT_NE(nodes_.Register(bad).status().message().find("labels"), std::string::npos);
  bad = Node();
  (*bad.mutable_labels())["skyrl.zone"] = "x";
  EXPECT_NE(nodes_.Register(bad).status().message().find("are the head's"), std::string::npos);
  EXPECT_TRUE(nodes_.List().empty()) << "nothing is stored for a rejected node";
  EXPECT_TRUE(store_.Scan(kNodesTable, "")->empty());
}

TEST(NodeManagerStallTest, AHeadThatStalledGivesNodesAFreshWindow) {
  store::MemoryStore store;
  FakeClock clock;
  NodeManager nodes(store, clock,
                    {absl::Seconds(1), 5, /*stall_grace=*/absl::Seconds(2), /*isolation_guard=*/false});
  NodeId id = *nodes.Register(Node());
  EXPECT_TRUE(nodes.CheckLiveness().empty());
  clock.Advance(absl::Seconds(30));  // the head was blocked: no check, no heartbeat
  EXPECT_TRUE(nodes.CheckLiveness().empty()) << "the head's own stall is not the node's fault";
  clock.Advance(absl::Milliseconds(500));
  EXPECT_TRUE(nodes.CheckLiveness().empty());
  for (int i = 0; i < 11; ++i) {  // checks every 0.5 s, no heartbeat: dead after 5 s
    clock.Advance(absl::Milliseconds(500));
    if (!nodes.CheckLiveness().empty()) break;
  }
  EXPECT_EQ(nodes.List()[0].state(), v1::NODE_DEAD);
  bool was_dead = false;
  ASSERT_TRUE(nodes.Register(nodes.List()[0], &was_dead).ok());
  EXPECT_TRUE(was_dead) << "re-registration after death is reported";
  ASSERT_TRUE(nodes.Register(nodes.List()[0], &was_dead).ok());
  EXPECT_TRUE(was_dead) << "again, while no heartbeat says the worker got the first reply";
  ASSERT_TRUE(nodes.Heartbeat(id).ok());
  ASSERT_TRUE(nodes.Register(nodes.List()[0], &was_dead).ok());
  EXPECT_FALSE(was_dead);
}

// With the guard (the default), a node is declared dead only while another is heard.
class IsolationGuardTest : public ::testing::Test {
 protected:
  // Advances the clock in checks of 0.5 s, heartbeating `beating`, for `d`; returns the dead.
  std::vector<NodeId> Run(absl::Duration d, const std::vector<NodeId>& beating) {
    std::vector<NodeId> dead;
    for (absl::Duration t; t < d; t += absl::Milliseconds(500)) {
      clock_.Advance(absl::Milliseconds(500));
      for (const NodeId& id : beating) EXPECT_TRUE(nodes_.Heartbeat(id).ok());
      for (const NodeId& id : nodes_.CheckLiveness()) dead.push_back(id);
    }
    return dead;
  }
  v1::NodeState State(const NodeId& id) { return nodes_.Find(id.ToString())->state(); }

  store::MemoryStore store_;
  FakeClock clock_;
  NodeManager nodes_{store_, clock_, {absl::Seconds(1), 4}};  // dead after 4 s of silence
};

TEST_F(IsolationGuardTest, ASilentNodeDiesWhileOthersAreHeard) {
  NodeId a = *nodes_.Register(Node(0)), b = *nodes_.Register(Node(0));
  EXPECT_TRUE(Run(absl::Seconds(4), {b}).empty()) << "not before the threshold";
  EXPECT_EQ(Run(absl::Seconds(1), {b}), std::vector<NodeId>{a});
  EXPECT_EQ(State(b), v1::NODE_ALIVE);
}

TEST_F(IsolationGuardTest, WhenNoNodeIsHeardNoneIsDeclaredDead) {
  NodeId a = *nodes_.Register(Node(0)), b = *nodes_.Register(Node(0));
  EXPECT_TRUE(Run(absl::Minutes(5), {}).empty()) << "the head is as likely cut off as they are dead";
  EXPECT_EQ(State(a), v1::NODE_ALIVE);
  EXPECT_EQ(State(b), v1::NODE_ALIVE);
}

TEST_F(IsolationGuardTest, ALoneNodeIsDeclaredDeadBySilenceAlone) {
  NodeId lone = *nodes_.Register(Node(0));
  EXPECT_TRUE(Run(absl::Seconds(4), {}).empty());
  EXPECT_EQ(Run(absl::Seconds(1), {}), std::vector<NodeId>{lone});
}

TEST_F(IsolationGuardTest, WhenOneIsHeardAgainTheOthersGetAFullWindow) {
  NodeId a = *nodes_.Register(Node(0)), b = *nodes_.Register(Node(0));
  EXPECT_TRUE(Run(absl::Seconds(10), {}).empty());
  // b is heard again; a, silent for 10 s already, must get the whole threshold again to learn
  // (from b) that the head is back, and fence.
  EXPECT_TRUE(Run(absl::Seconds(4), {b}).empty()) << "a fresh window of 4 s";
  EXPECT_EQ(Run(absl::Seconds(1), {b}), std::vector<NodeId>{a});
}

TEST_F(IsolationGuardTest, HeartbeatsCarryThePeerListWhenItChanged) {
  NodeId a = *nodes_.Register(Node(0));
  v1::NodeInfo second = Node(0);
  second.set_address("10.0.0.2:7000");
  NodeId b = *nodes_.Register(second);
  PeerList peers;
  ASSERT_TRUE(nodes_.Heartbeat(a, 0, &peers).ok());
  EXPECT_TRUE(peers.changed);
  EXPECT_EQ(peers.addresses, std::vector<std::string>{"10.0.0.2:7000"}) << "the others, not itself";
  PeerList again;
  ASSERT_TRUE(nodes_.Heartbeat(a, peers.version, &again).ok());
  EXPECT_FALSE(again.changed);
  EXPECT_TRUE(again.addresses.empty());
  ASSERT_TRUE(nodes_.Unregister(b, "test").ok());
  ASSERT_TRUE(nodes_.Heartbeat(a, peers.version, &again).ok());
  EXPECT_TRUE(again.changed) << "a node left";
  EXPECT_TRUE(again.addresses.empty());
}

}  // namespace
}  // namespace skyrl::head
