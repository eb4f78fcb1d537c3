#include "runtime/head/node_manager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
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

// A heartbeat with the reply's peer list in `peers` (when given; else the reply carries
// none). It records no limits.
absl::Status SendHeartbeat(NodeManager& nodes, const NodeId& id, uint64_t peers_version = 0,
                           PeerList* peers = nullptr, std::vector<PeerSupport> supports = {}) {
  absl::StatusOr<HeartbeatOut> out = nodes.Heartbeat({.node = id,
                                                      .peers_version = peers_version,
                                                      .send_peers = peers != nullptr,
                                                      .supports = std::move(supports)});
  if (!out.ok()) return out.status();
  if (peers != nullptr) *peers = std::move(out->peers);
  return absl::OkStatus();
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
  ASSERT_TRUE(SendHeartbeat(nodes_, id).ok());
  clock_.Advance(absl::Seconds(5));  // exactly period x misses since the last heartbeat
  EXPECT_TRUE(nodes_.CheckLiveness().empty());
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_EQ(nodes_.CheckLiveness(), std::vector<NodeId>{id});
  v1::NodeInfo info = nodes_.List()[0];
  EXPECT_EQ(info.state(), v1::NODE_DEAD);
  EXPECT_NE(info.death_reason().find("no heartbeat"), std::string::npos) << info.death_reason();
  EXPECT_TRUE(absl::IsNotFound(SendHeartbeat(nodes_, id)));
  // Re-registering with its id brings it back.
  v1::NodeInfo again = Node();
  again.set_node_id(id.ToString());
  ASSERT_EQ(*nodes_.Register(again), id);
  EXPECT_TRUE(SendHeartbeat(nodes_, id).ok());
}

TEST_F(NodeManagerTest, RecoverRestoresNodesWithAFreshHeartbeatWindow) {
  NodeId alive = *nodes_.Register(Node());
  NodeId left = *nodes_.Register(Node(0));
  ASSERT_TRUE(nodes_.Unregister(left, "test").ok());
  clock_.Advance(absl::Minutes(10));
  NodeManager restarted(store_, clock_, {absl::Seconds(1), 5});
  ASSERT_TRUE(restarted.Recover().ok());
  EXPECT_TRUE(restarted.CheckLiveness().empty()) << "recovered nodes get a full window";
  EXPECT_TRUE(SendHeartbeat(restarted, alive).ok());
  EXPECT_TRUE(absl::IsNotFound(SendHeartbeat(restarted, left)));
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
  ASSERT_TRUE(SendHeartbeat(nodes, id).ok());
  ASSERT_TRUE(nodes.Register(nodes.List()[0], &was_dead).ok());
  EXPECT_FALSE(was_dead);
}

// With the guard (the default), a node is declared dead only while another is heard.
// Advances `clock` in checks of 0.5 s, heartbeating `beating`, for `d`; returns the dead.
std::vector<NodeId> RunChecks(NodeManager& nodes, FakeClock& clock, absl::Duration d,
                              const std::vector<NodeId>& beating) {
  std::vector<NodeId> dead;
  for (absl::Duration t; t < d; t += absl::Milliseconds(500)) {
    clock.Advance(absl::Milliseconds(500));
    for (const NodeId& id : beating) EXPECT_TRUE(SendHeartbeat(nodes, id).ok());
    for (const NodeId& id : nodes.CheckLiveness()) dead.push_back(id);
  }
  return dead;
}

class IsolationGuardTest : public ::testing::Test {
 protected:
  std::vector<NodeId> Run(absl::Duration d, const std::vector<NodeId>& beating) {
    return RunChecks(nodes_, clock_, d, beating);
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
  ASSERT_TRUE(SendHeartbeat(nodes_, a, 0, &peers).ok());
  EXPECT_TRUE(peers.changed);
  EXPECT_EQ(peers.addresses, std::vector<std::string>{"10.0.0.2:7000"}) << "the others, not itself";
  PeerList again;
  ASSERT_TRUE(SendHeartbeat(nodes_, a, peers.version, &again).ok());
  EXPECT_FALSE(again.changed);
  EXPECT_TRUE(again.addresses.empty());
  ASSERT_TRUE(nodes_.Unregister(b, "test").ok());
  ASSERT_TRUE(SendHeartbeat(nodes_, a, peers.version, &again).ok());
  EXPECT_TRUE(again.changed) << "a node left";
  EXPECT_TRUE(again.addresses.empty());
}

// Past heartbeat_period x heartbeats_per_s ALIVE nodes, workers are asked for a longer
// period (whole periods), and a node is declared dead only after the longest period its
// worker may apply x the misses.
class HeartbeatPeriodTest : public ::testing::Test {
 protected:
  std::vector<NodeId> Run(absl::Duration d, const std::vector<NodeId>& beating) {
    return RunChecks(nodes_, clock_, d, beating);
  }
  int64_t StoredPeriodMs(const NodeId& id) {
    v1::NodeInfo info;
    EXPECT_TRUE(info.ParseFromString(*store_.Get(kNodesTable, id.ToString())));
    return info.heartbeat_period_ms();
  }

  store::MemoryStore store_;
  FakeClock clock_;
  NodeManager nodes_{store_,
                     clock_,
                     {.heartbeat_period = absl::Seconds(1),
                      .heartbeat_misses = 4,
                      .confirm_deaths = false,
                      .heartbeats_per_s = 10}};
};

TEST_F(HeartbeatPeriodTest, ThePeriodGrowsWithTheClusterAndTheThresholdWithIt) {
  absl::Duration told;
  NodeId first = *nodes_.Register(Node(0), nullptr, 0, &told);
  EXPECT_EQ(told, absl::Seconds(1));
  std::vector<NodeId> others;
  for (int i = 0; i < 24; ++i) others.push_back(*nodes_.Register(Node(0)));
  EXPECT_EQ(nodes_.HeartbeatPeriod(), absl::Seconds(3)) << "25 nodes at 10 heartbeats a second";
  // It applies 1 s and is told 3 s: it may apply either from this reply on.
  ASSERT_EQ(nodes_.Heartbeat({.node = first, .period = absl::Seconds(1)})->period, absl::Seconds(3));
  EXPECT_EQ(StoredPeriodMs(first), 3000) << "recorded (and stored) before the reply goes out";
  EXPECT_TRUE(Run(absl::Seconds(11), others).empty()) << "not before 4 x 3 s";
  EXPECT_EQ(Run(absl::Milliseconds(1500), others), std::vector<NodeId>{first});
}

// Recording a node's limits changes no one's peer list: the cluster growing past the budget
// (every node's period recorded anew) does not send every node its list again.
TEST_F(HeartbeatPeriodTest, RecordingAPeriodSendsNoPeerListAgain) {
  std::vector<NodeId> ids;
  for (int i = 0; i < 25; ++i) ids.push_back(*nodes_.Register(Node(0)));
  absl::StatusOr<HeartbeatOut> first = nodes_.Heartbeat({.node = ids[0], .period = absl::Seconds(1)});
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(first->peers.changed);
  for (int i = 1; i < 25; ++i)
    ASSERT_TRUE(nodes_.Heartbeat({.node = ids[i], .period = absl::Seconds(1)}).ok());
  for (const NodeId& id : ids) EXPECT_EQ(StoredPeriodMs(id), 3000) << "recorded and stored";
  absl::StatusOr<HeartbeatOut> again =
      nodes_.Heartbeat({.node = ids[0], .peers_version = first->peers.version, .period = absl::Seconds(3)});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->peers.changed) << "version " << first->peers.version << " -> " << again->peers.version;
  EXPECT_TRUE(again->peers.addresses.empty());
}

TEST_F(HeartbeatPeriodTest, AShorterPeriodCountsOnlyOnceTheWorkerSaysItAppliesIt) {
  std::vector<NodeId> ids;
  for (int i = 0; i < 25; ++i) ids.push_back(*nodes_.Register(Node(0)));
  const NodeId a = ids[0];
  ASSERT_EQ(nodes_.Heartbeat({.node = a, .period = absl::Seconds(1)})->period, absl::Seconds(3));
  for (int i = 5; i < 25; ++i) ASSERT_TRUE(nodes_.Unregister(ids[i], "test").ok());
  EXPECT_EQ(nodes_.HeartbeatPeriod(), absl::Seconds(1)) << "5 nodes";
  // It still applies 3 s (and is told 1 s): 12 s.
  ASSERT_EQ(nodes_.Heartbeat({.node = a, .period = absl::Seconds(3)})->period, absl::Seconds(1));
  EXPECT_EQ(StoredPeriodMs(a), 3000);
  const std::vector<NodeId> rest(ids.begin() + 1, ids.begin() + 5);
  ASSERT_TRUE(SendHeartbeat(nodes_, a).ok());
  EXPECT_TRUE(Run(absl::Seconds(5), rest).empty()) << "not after 4 x 1 s";
  // Now it says it applies 1 s: 4 s.
  ASSERT_EQ(nodes_.Heartbeat({.node = a, .period = absl::Seconds(1)})->period, absl::Seconds(1));
  EXPECT_EQ(StoredPeriodMs(a), 1000);
  ASSERT_TRUE(SendHeartbeat(nodes_, a).ok());
  EXPECT_TRUE(Run(absl::Seconds(4), rest).empty());
  EXPECT_EQ(Run(absl::Seconds(1), rest), std::vector<NodeId>{a});
  // A worker that does not say (an older one) is held to the longest recorded or told.
  ASSERT_EQ(nodes_.Heartbeat({.node = ids[1], .period = absl::ZeroDuration()})->period, absl::Seconds(1));
  EXPECT_EQ(StoredPeriodMs(ids[1]), 1000);
}

// Confirmed deaths: a silent node's actors restart only once half its peers know it is dead.
class RecordingListener final : public NodeListener {
 public:
  void OnNodeAlive(const v1::NodeInfo& node) override { events.push_back("alive " + node.node_id()); }
  void OnNodeDead(const NodeId& node, const std::string&, Displaced) override {
    events.push_back("dead " + node.ToString());
  }
  void OnNodeSilent(const NodeId& node, Displaced) override { events.push_back("silent " + node.ToString()); }
  std::vector<std::string> events;
};

class ConfirmedDeathTest : public ::testing::Test {
 protected:
  ConfirmedDeathTest() { nodes_.SetListener(&listener_); }
  NodeId Join(absl::Duration retry_window = absl::ZeroDuration()) {
    v1::NodeInfo n = Node(0);
    n.set_head_retry_window_ms(absl::ToInt64Milliseconds(retry_window));
    NodeId id = *nodes_.Register(n);
    Beat(id);  // gets the list
    return id;
  }
  // A heartbeat naming the list the node holds; `adopt`: it takes the one sent back.
  void Beat(const NodeId& id, bool adopt = true, std::vector<PeerSupport> supports = {}) {
    PeerList peers;
    ASSERT_TRUE(SendHeartbeat(nodes_, id, held_[id], &peers, supports).ok());
    if (adopt) held_[id] = peers.version;
  }
  // Checks every 0.5 s for `d`, `beating` heartbeating (keeping the lists they hold unless
  // `adopt`); the events the listener saw meanwhile.
  std::vector<std::string> Run(absl::Duration d, const std::vector<NodeId>& beating, bool adopt = false) {
    listener_.events.clear();
    for (absl::Duration t; t < d; t += absl::Milliseconds(500)) {
      clock_.Advance(absl::Milliseconds(500));
      for (const NodeId& id : beating) Beat(id, adopt);
      nodes_.CheckLiveness();
    }
    return listener_.events;
  }
  // Each holds the latest list and has said so (two heartbeats: a worker's every period).
  void Settle(const std::vector<NodeId>& ids) {
    for (int i = 0; i < 2; ++i)
      for (const NodeId& id : ids) Beat(id);
  }
  static std::string Dead(const NodeId& id) { return "dead " + id.ToString(); }
  static std::string Silent(const NodeId& id) { return "silent " + id.ToString(); }

  store::MemoryStore store_;
  FakeClock clock_;
  RecordingListener listener_;
  NodeManager nodes_{store_, clock_, {absl::Seconds(1), 4}};  // dead after 4 s of silence
  std::map<NodeId, uint64_t> held_;
};

TEST_F(ConfirmedDeathTest, ASilentNodesActorsRestartOnceHalfItsPeersHoldAListWithoutIt) {
  NodeId a = Join(), b = Join(), c = Join();
  Settle({a, b, c});  // each holds the list of all three
  EXPECT_EQ(Run(absl::Seconds(5), {b, c}), std::vector<std::string>{Silent(a)})
      << "declared DEAD, nothing new goes there, but its actors stay";
  EXPECT_EQ(nodes_.Find(a.ToString())->state(), v1::NODE_DEAD);
  EXPECT_TRUE(nodes_.Find(a.ToString())->death_unconfirmed());
  EXPECT_TRUE(nodes_.DeathUnconfirmed(a.ToString()));
  EXPECT_TRUE(Run(absl::Minutes(10), {b, c}).empty())
      << "b and c still hold lists with a: cut off from the head, they could be counting it alive";
  Beat(b);  // gets the list without a
  EXPECT_TRUE(Run(absl::Seconds(1), {b, c}).empty()) << "one of two is not enough";
  Beat(c);  // c too: its next heartbeat says it holds it
  EXPECT_EQ(Run(absl::Milliseconds(500), {b, c}), std::vector<std::string>{Dead(a)});
  EXPECT_FALSE(nodes_.Find(a.ToString())->death_unconfirmed());
  absl::StatusOr<std::vector<store::Entry>> stored = store_.Scan(kNodesTable, "");
  ASSERT_TRUE(stored.ok());
  for (const store::Entry& e : *stored) {
    v1::NodeInfo n;
    ASSERT_TRUE(n.ParseFromString(e.value));
    EXPECT_FALSE(n.death_unconfirmed()) << "stored confirmed";
  }
}

TEST_F(ConfirmedDeathTest, OneOfFiveNeedsThreeOfItsFourPeers) {
  NodeId a = Join(), b = Join(), c = Join(), d = Join(), e = Join();
  Settle({a, b, c, d, e});
  EXPECT_EQ(Run(absl::Seconds(5), {b, c, d, e}), std::vector<std::string>{Silent(a)});
  Beat(b), Beat(c), Beat(b), Beat(c);
  EXPECT_TRUE(Run(absl::Seconds(1), {b, c}).empty()) << "b and c know: 2 of 5 nodes";
  Beat(d), Beat(d);
  EXPECT_EQ(Run(absl::Milliseconds(500), {b, c, d, e}), std::vector<std::string>{Dead(a)}) << "3 of 5";
}

// Past 17 nodes, a peer list is the node's ring neighbours: the kPeersEachSide nodes after
// it in id order and as many before, wrapping round; so each is on the other's list.
TEST_F(ConfirmedDeathTest, InALargeClusterAPeerListIsTheNodesRingNeighbours) {
  std::vector<NodeId> ids;
  for (int i = 0; i < 40; ++i) ids.push_back(Join());
  std::vector<NodeId> ring = ids;
  std::sort(ring.begin(), ring.end());
  const int each = int(DeathQuorum::kPeersEachSide);
  for (int p = 0; p < int(ring.size()); ++p) {
    PeerList peers;
    ASSERT_TRUE(SendHeartbeat(nodes_, ring[p], 0, &peers).ok());
    std::set<std::string> got(peers.node_ids.begin(), peers.node_ids.end());
    std::set<std::string> want;
    for (int k = 1; k <= each; ++k) {
      want.insert(ring[(p + k) % ring.size()].ToString());
      want.insert(ring[(p - k + ring.size()) % ring.size()].ToString());
    }
    EXPECT_EQ(got, want) << "node at ring position " << p;
    EXPECT_EQ(peers.addresses.size(), peers.node_ids.size());
  }
}

// So a silent node's death is confirmed by half of its list (itself and its 16 neighbours:
// 9), however many nodes the cluster has and whatever lists the others hold.
TEST_F(ConfirmedDeathTest, ALargeClustersSilentNodeNeedsHalfItsNeighboursNotHalfTheCluster) {
  std::vector<NodeId> ids;
  for (int i = 0; i < 40; ++i) ids.push_back(Join());
  Settle(ids);
  std::vector<NodeId> ring = ids;
  std::sort(ring.begin(), ring.end());
  const NodeId silent = ring[0];
  std::vector<NodeId> others(ring.begin() + 1, ring.end());
  EXPECT_EQ(Run(absl::Seconds(5), others), std::vector<std::string>{Silent(silent)});
  // Its neighbours, nearest first, alternating sides.
  std::vector<NodeId> near;
  for (int k = 1; k <= int(DeathQuorum::kPeersEachSide); ++k) {
    near.push_back(ring[k]);
    near.push_back(ring[ring.size() - k]);
  }
  for (int i = 0; i < 8; ++i) Beat(near[i]), Beat(near[i]);  // they hold a list without it
  EXPECT_TRUE(Run(absl::Seconds(1), others).empty()) << "8 of 17 is not half";
  Beat(near[8]), Beat(near[8]);
  EXPECT_EQ(Run(absl::Milliseconds(500), others), std::vector<std::string>{Dead(silent)})
      << "9 of its 17, while the other 22 nodes still hold lists from before its death";
}

TEST_F(ConfirmedDeathTest, ASupportGivenToTheSilentNodeDelaysItsRestartByAThreshold) {
  NodeId a = Join(), b = Join(), c = Join();
  Settle({a, b, c});
  Run(absl::Seconds(5), {b, c});
  // b told a, 1 s ago, that it counted it alive: a keeps its actors until 0.9 x 4 s after that.
  Beat(b, true, {{a, absl::Seconds(1)}});
  Beat(c);
  Beat(b), Beat(c);
  EXPECT_TRUE(Run(absl::Milliseconds(2500), {b, c}).empty()) << "3 s after the support";
  EXPECT_EQ(Run(absl::Milliseconds(500), {b, c}), std::vector<std::string>{Dead(a)}) << "4 s after it";
}

TEST_F(ConfirmedDeathTest, ANodeThatLeavesConfirmsOnceTheSupportsItMayHaveGivenRunOut) {
  NodeId a = Join(), b = Join(), c = Join();
  Settle({a, b, c});
  Run(absl::Seconds(5), {b, c});
  Beat(b), Beat(b);  // b holds the list without a
  // c leaves: it supports no one from now on, but may have supported a since its last
  // heartbeat, unreported; a keeps its actors for a threshold after that.
  ASSERT_TRUE(nodes_.Unregister(c, "leaving").ok());
  EXPECT_TRUE(Run(absl::Milliseconds(3500), {b}).empty()) << "b and c confirm, but c may support a";
  EXPECT_EQ(Run(absl::Milliseconds(500), {b}), std::vector<std::string>{Dead(a)}) << "4 s after it left";
}

TEST_F(ConfirmedDeathTest, ANodeThatLeftBeforeTheDeathStillCountsAsConfirming) {
  NodeId a = Join(), b = Join(), d = Join();
  Settle({a, b, d});
  // d leaves, and a goes silent still holding the list of all three: d cannot heartbeat a
  // list without a, but gone, it supports no one.
  ASSERT_TRUE(nodes_.Unregister(d, "leaving").ok());
  EXPECT_EQ(Run(absl::Seconds(5), {b}), std::vector<std::string>{Silent(a)});
  Beat(b), Beat(b);
  EXPECT_EQ(Run(absl::Milliseconds(500), {b}), std::vector<std::string>{Dead(a)})
      << "b and d: 2 of 3, not the retry window (none here: it would never come)";
}

TEST_F(ConfirmedDeathTest, NodesThatJoinedSinceCannotConfirmButTheRetryWindowEndsTheWait) {
  NodeId a = Join(absl::Seconds(30)), b = Join(), c = Join();
  Settle({a, b, c});
  const absl::Time last_heard = clock_.Now();
  EXPECT_EQ(Run(absl::Seconds(5), {b, c}), std::vector<std::string>{Silent(a)});
  NodeId d = Join(), e = Join();
  Beat(b), Beat(d), Beat(e), Beat(b), Beat(d), Beat(e);
  // a may be cut off with c, counting on c and itself, 2 of the 3 on its list: d and e do not count.
  std::vector<std::string> events = Run(absl::Seconds(28), {b, c, d, e});
  EXPECT_TRUE(events.empty());
  events = Run(absl::Seconds(2), {b, c, d, e});
  EXPECT_EQ(events, std::vector<std::string>{Dead(a)})
      << "its worker exits 30 s after it last reached the head: confirmed after that and a threshold";
  EXPECT_GE(clock_.Now() - last_heard, absl::Seconds(34));
}

TEST_F(ConfirmedDeathTest, ALoneNodeOrOneThatNeverHeldAListIsConfirmedAtOnce) {
  NodeId lone = Join();
  EXPECT_EQ(Run(absl::Seconds(5), {}), std::vector<std::string>{Dead(lone)});
  NodeId b = Join();
  NodeId fresh = *nodes_.Register(Node(0));  // dies before its first heartbeat
  EXPECT_EQ(Run(absl::Seconds(5), {b}), std::vector<std::string>{Dead(fresh)});
}

TEST_F(ConfirmedDeathTest, ANodeRegisteringAgainWhileHoldingAListWaitsForItsPeers) {
  NodeId a = Join(), b = Join(), c = Join();
  Settle({a, b, c});
  // a registers again (its heartbeat was refused, say) but never gets the reply: it still
  // holds its list, and may keep its actors on b's and c's support.
  v1::NodeInfo again = Node(0);
  again.set_node_id(a.ToString());
  ASSERT_TRUE(nodes_.Register(again, nullptr, held_[a]).ok());
  EXPECT_EQ(Run(absl::Seconds(5), {b, c}), std::vector<std::string>{Silent(a)})
      << "not confirmed at once, as a node holding no list would be";
  Beat(b), Beat(c), Beat(b), Beat(c);
  EXPECT_EQ(Run(absl::Milliseconds(500), {b, c}), std::vector<std::string>{Dead(a)});
}

TEST_F(ConfirmedDeathTest, ANodeThatMayHoldAListOfItselfAloneOrOneWithAPeerWaitsForThePeer) {
  NodeId solo = Join();  // holds the list of itself alone
  NodeId other = Join();
  Beat(solo);  // says so, and is sent the list with the other: which one it got is unknown
  EXPECT_EQ(Run(absl::Seconds(5), {other}), std::vector<std::string>{Silent(solo)})
      << "holding the list with the other, it keeps its actors while the other supports it";
  Beat(other), Beat(other);
  EXPECT_EQ(Run(absl::Milliseconds(500), {other}), std::vector<std::string>{Dead(solo)});
}

TEST_F(ConfirmedDeathTest, AfterAHeadRestartANodeSilentBeforeItsSecondHeartbeatWaitsForTheRecovered) {
  NodeId a = Join(), b = Join(), c = Join();
  Settle({a, b, c});
  NodeManager next(store_, clock_, {absl::Seconds(1), 4});
  RecordingListener heard;
  next.SetListener(&heard);
  ASSERT_TRUE(next.Recover().ok());
  // b and c heartbeat the new head with the lists of the old one; a never does: the list it
  // holds is one the new head cannot know.
  for (int i = 0; i < 10; ++i) {
    clock_.Advance(absl::Milliseconds(500));
    for (NodeId id : {b, c}) ASSERT_TRUE(SendHeartbeat(next, id, held_[id]).ok());
    next.CheckLiveness();
  }
  EXPECT_EQ(heard.events, std::vector<std::string>{Silent(a)}) << "not a lone node: the recovered three";
  for (int i = 0; i < 2; ++i)
    for (NodeId id : {b, c}) {
      PeerList peers;
      ASSERT_TRUE(SendHeartbeat(next, id, held_[id], &peers).ok());
      held_[id] = peers.version;
    }
  heard.events.clear();
  next.CheckLiveness();
  EXPECT_EQ(heard.events, std::vector<std::string>{Dead(a)});
}

TEST_F(ConfirmedDeathTest, AVersionThisHeadNeverSentConfirmsNothing) {
  NodeId a = Join(), b = Join(), c = Join();
  Settle({a, b, c});
  Run(absl::Seconds(5), {b, c});
  for (NodeId id : {b, c}) ASSERT_TRUE(SendHeartbeat(nodes_, id, UINT64_MAX - 1).ok());
  EXPECT_TRUE(Run(absl::Seconds(1), {b, c}).empty()) << "a list from the future is no list this head sent";
}

TEST_F(ConfirmedDeathTest, ANodeThatComesBackConfirmsItsOwnDeath) {
  NodeId a = Join(), b = Join(), c = Join();
  Settle({a, b, c});
  Run(absl::Seconds(5), {b, c});
  listener_.events.clear();
  v1::NodeInfo again = *nodes_.Find(a.ToString());
  bool was_dead = false;
  ASSERT_TRUE(nodes_.Register(again, &was_dead).ok());
  EXPECT_TRUE(was_dead) << "it stops its old actors on this reply";
  EXPECT_TRUE(listener_.events.empty()) << "not announced before it has";
  EXPECT_TRUE(nodes_.Find(a.ToString())->death_unconfirmed()) << "stored so, for a head restarted meanwhile";
  nodes_.CheckLiveness();
  EXPECT_TRUE(listener_.events.empty());
  ASSERT_TRUE(SendHeartbeat(nodes_, a, held_[a]).ok());  // sent before it registered: not it
  nodes_.CheckLiveness();
  EXPECT_TRUE(listener_.events.empty()) << "a heartbeat naming a list is from before the registration";
  Beat(b), Beat(c), Beat(b), Beat(c);  // their lists have a again: they confirm nothing
  nodes_.CheckLiveness();
  EXPECT_TRUE(listener_.events.empty());
  held_[a] = 0;  // a worker drops its list when it registers
  Beat(a);       // sent once the old actors are stopped
  nodes_.CheckLiveness();
  EXPECT_EQ(listener_.events, (std::vector<std::string>{Dead(a), "alive " + a.ToString()}))
      << "they restart elsewhere, then the node takes new ones";
  EXPECT_FALSE(nodes_.DeathUnconfirmed(a.ToString()));
  EXPECT_FALSE(nodes_.Find(a.ToString())->death_unconfirmed());
}

TEST_F(ConfirmedDeathTest, ANodeBackButSilentBeforeItsFirstHeartbeatWaitsForItsRetryWindow) {
  NodeId a = Join(absl::Seconds(30)), b = Join(), c = Join();
  Settle({a, b, c});
  Run(absl::Seconds(5), {b, c});
  ASSERT_TRUE(nodes_.Register(*nodes_.Find(a.ToString())).ok());  // the reply may be lost
  const absl::Time registered = clock_.Now();
  // Silent again: declared again, and now only its retry window confirms it (it may never
  // have been told to stop its actors).
  std::vector<std::string> events = Run(absl::Seconds(5), {b, c}, /*adopt=*/true);
  EXPECT_EQ(events, std::vector<std::string>{Silent(a)});
  EXPECT_TRUE(Run(absl::Seconds(28), {b, c}, true).empty());
  EXPECT_EQ(Run(absl::Seconds(2), {b, c}, true), std::vector<std::string>{Dead(a)});
  EXPECT_GE(clock_.Now() - registered, absl::Seconds(34));
}

TEST_F(ConfirmedDeathTest, AHeadRestartedAfterANodeCameBackStillTellsItToStopItsActors) {
  NodeId a = Join(), b = Join(), c = Join();
  Settle({a, b, c});
  Run(absl::Seconds(5), {b, c});
  ASSERT_TRUE(nodes_.Register(*nodes_.Find(a.ToString())).ok());  // its reply is lost
  NodeManager next(store_, clock_, {absl::Seconds(1), 4});
  RecordingListener heard;
  next.SetListener(&heard);
  ASSERT_TRUE(next.Recover().ok());
  bool was_dead = false;
  ASSERT_TRUE(next.Register(*next.Find(a.ToString()), &was_dead).ok());
  EXPECT_TRUE(was_dead) << "the new head knows its death is unconfirmed: it must stop its old actors";
  EXPECT_TRUE(heard.events.empty());
  ASSERT_TRUE(SendHeartbeat(next, a, 0).ok());
  next.CheckLiveness();
  EXPECT_EQ(heard.events, (std::vector<std::string>{Dead(a), "alive " + a.ToString()}));
}

TEST_F(ConfirmedDeathTest, AHeadRestartedMeanwhileWaitsAgainForTheRecoveredNodes) {
  NodeId a = Join(), b = Join(), c = Join();
  Settle({a, b, c});
  Run(absl::Seconds(5), {b, c});
  NodeManager next(store_, clock_, {absl::Seconds(1), 4});
  RecordingListener heard;
  next.SetListener(&heard);
  ASSERT_TRUE(next.Recover().ok());
  EXPECT_TRUE(next.DeathUnconfirmed(a.ToString()));
  for (NodeId id : {b, c})  // the lists of the new head, twice: the second says they hold it
    for (int i = 0; i < 2; ++i) {
      PeerList peers;
      ASSERT_TRUE(SendHeartbeat(next, id, held_[id], &peers).ok());
      held_[id] = peers.version;
    }
  next.CheckLiveness();
  EXPECT_TRUE(heard.events.empty()) << "supports given before the restart are unknown: a threshold first";
  for (int i = 0; i < 7; ++i) {
    clock_.Advance(absl::Milliseconds(500));
    for (NodeId id : {b, c}) ASSERT_TRUE(SendHeartbeat(next, id, held_[id]).ok());
    next.CheckLiveness();
  }
  EXPECT_TRUE(heard.events.empty()) << "3.5 s";
  clock_.Advance(absl::Milliseconds(500));
  for (NodeId id : {b, c}) ASSERT_TRUE(SendHeartbeat(next, id, held_[id]).ok());
  next.CheckLiveness();
  EXPECT_EQ(heard.events, std::vector<std::string>{Dead(a)}) << "4 s: T after the recovery";
}

// With a keep limit K, no lease of a node the head last heard at t runs past t + K + 0.9 T:
// its actors restart at t + K + T even when every peer that could confirm is gone too.
class KeepLimitTest : public ConfirmedDeathTest {
 protected:
  KeepLimitTest() { keeping_.SetListener(&listener_); }
  NodeId JoinKeeping(const std::string& space = "", int pid = 0) {
    v1::NodeInfo n = Node(0);
    n.set_process_space(space);
    n.set_pid(pid);
    n.set_pid_start_ticks(pid > 0 ? 1000 + pid : 0);
    NodeId id = *keeping_.Register(n);
    BeatKeeping(id);
    return id;
  }
  // A heartbeat from a worker that applies the head's limit (it had it in its registration
  // reply), as the node service makes it: the limit noted first.
  void BeatKeeping(const NodeId& id, absl::Duration applied = kKeep) {
    absl::StatusOr<HeartbeatOut> out =
        keeping_.Heartbeat({.node = id, .peers_version = held_[id], .keep = applied});
    ASSERT_TRUE(out.ok()) << out.status();
    held_[id] = out->peers.version;
  }
  // A heartbeat of `id` (as BeatKeeping) reporting `gone`: the checks its reply asks.
  std::vector<ProcessCheck> BeatReporting(const NodeId& id, std::vector<ProcessCheck> gone = {}) {
    absl::StatusOr<HeartbeatOut> out =
        keeping_.Heartbeat({.node = id, .peers_version = held_[id], .gone = std::move(gone), .keep = kKeep});
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return {};
    held_[id] = out->peers.version;
    return out->checks;
  }
  std::vector<std::string> RunKeeping(absl::Duration d, const std::vector<NodeId>& beating) {
    listener_.events.clear();
    for (absl::Duration t; t < d; t += absl::Milliseconds(500)) {
      clock_.Advance(absl::Milliseconds(500));
      for (const NodeId& id : beating) BeatKeeping(id);
      keeping_.CheckLiveness();
    }
    return listener_.events;
  }
  // As RunKeeping, on another head (`heard` listening), with only `beating` heartbeating.
  void RunOn(NodeManager& head, RecordingListener& heard, const NodeId& beating, absl::Duration span) {
    heard.events.clear();
    for (absl::Duration t; t < span; t += absl::Milliseconds(500)) {
      clock_.Advance(absl::Milliseconds(500));
      ASSERT_TRUE(SendHeartbeat(head, beating).ok());
      head.CheckLiveness();
    }
  }
  static std::vector<std::string> Sorted(std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    return v;
  }
  static constexpr absl::Duration kKeep = absl::Seconds(2);
  NodeManager keeping_{
      store_, clock_, {.heartbeat_period = absl::Seconds(1), .heartbeat_misses = 4, .headless_keep = kKeep}};
};

TEST_F(KeepLimitTest, ANodeWhosePeersDiedWithItIsConfirmedOnceNoLeaseCanRun) {
  NodeId a = JoinKeeping(), b = JoinKeeping(), c = JoinKeeping();
  for (int i = 0; i < 2; ++i)
    for (NodeId id : {a, b, c}) BeatKeeping(id);
  NodeId d = JoinKeeping();  // joined after: cannot confirm, but keeps the head from isolation
  // a, b and c die at once: nobody is left to hold a list without them.
  EXPECT_EQ(Sorted(RunKeeping(absl::Milliseconds(5500), {d})), Sorted({Silent(a), Silent(b), Silent(c)}))
      << "declared DEAD after 4 s, not yet confirmed";
  EXPECT_EQ(Sorted(RunKeeping(absl::Milliseconds(500), {d})), Sorted({Dead(a), Dead(b), Dead(c)}))
      << "6 s = K + T after they were last heard: no lease any of them renewed can still run";
  EXPECT_FALSE(keeping_.DeathUnconfirmed(a.ToString()));
}

TEST_F(KeepLimitTest, AfterAHeadRestartTheLimitCountsFromTheRecovery) {
  NodeId a = JoinKeeping(), b = JoinKeeping(), c = JoinKeeping();
  for (int i = 0; i < 2; ++i)
    for (NodeId id : {a, b, c}) BeatKeeping(id);
  RunKeeping(absl::Seconds(5), {b, c});  // a silent, unconfirmed; then b and c die too
  ASSERT_TRUE(keeping_.DeathUnconfirmed(a.ToString()));
  clock_.Advance(absl::Minutes(1));  // the head is down a minute
  NodeManager next(store_, clock_,
                   {.heartbeat_period = absl::Seconds(1), .heartbeat_misses = 4, .headless_keep = kKeep});
  RecordingListener heard;
  next.SetListener(&heard);
  ASSERT_TRUE(next.Recover().ok());
  NodeId d = *next.Register(Node(0));
  auto run = [&](absl::Duration span) { RunOn(next, heard, d, span); };
  run(absl::Milliseconds(5500));
  EXPECT_TRUE(std::find(heard.events.begin(), heard.events.end(), Dead(a)) == heard.events.end())
      << "the previous head may have answered a just before it died: K + T after the recovery";
  run(absl::Seconds(1));
  EXPECT_EQ(Sorted(heard.events), Sorted({Dead(a), Dead(b), Dead(c)}));
}

TEST_F(KeepLimitTest, ANodeWhoseWorkerAppliesNoLimitWaitsForItsPeers) {
  NodeId a = JoinKeeping(), b = JoinKeeping(), c = JoinKeeping();
  for (int i = 0; i < 2; ++i) {
    BeatKeeping(a, absl::ZeroDuration());  // an older worker, or one that never had the limit
    BeatKeeping(b), BeatKeeping(c);
  }
  EXPECT_EQ(keeping_.Find(a.ToString())->headless_keep_ms(), 0) << "no limit is the larger";
  EXPECT_EQ(keeping_.Find(b.ToString())->headless_keep_ms(), 2000);
  NodeId d = JoinKeeping();
  EXPECT_EQ(Sorted(RunKeeping(absl::Seconds(30), {d})),
            Sorted({Silent(a), Silent(b), Silent(c), Dead(b), Dead(c)}))
      << "b and c by the horizon; a may still keep its actors on its peers' word";
  EXPECT_TRUE(keeping_.DeathUnconfirmed(a.ToString()));
}

TEST_F(KeepLimitTest, TheStoredLimitIsTheLargerOfTheWorkersAndTheHeads) {
  v1::NodeInfo fresh = Node(0);
  NodeId a = *keeping_.Register(fresh);
  EXPECT_EQ(keeping_.Find(a.ToString())->headless_keep_ms(), 2000)
      << "a fresh worker has no actors yet, and applies the head's limit from the reply on";
  v1::NodeInfo again = Node(0);
  again.set_node_id(a.ToString());
  again.set_headless_keep_ms(5000);  // registering again, it still applies a previous head's
  ASSERT_TRUE(keeping_.Register(again).ok());
  EXPECT_EQ(keeping_.Find(a.ToString())->headless_keep_ms(), 5000);
  ASSERT_TRUE(keeping_.Heartbeat({.node = a, .keep = absl::Seconds(1)}).ok());
  EXPECT_EQ(keeping_.Find(a.ToString())->headless_keep_ms(), 2000) << "1 s now, or 2 s from this reply";
  ASSERT_TRUE(keeping_.Heartbeat({.node = a, .keep = absl::ZeroDuration()}).ok());
  EXPECT_EQ(keeping_.Find(a.ToString())->headless_keep_ms(), 0) << "none is the largest";
  ASSERT_TRUE(keeping_.Heartbeat({.node = a, .keep = kKeep}).ok());
  EXPECT_EQ(keeping_.Find(a.ToString())->headless_keep_ms(), 2000);
  absl::StatusOr<std::string> stored = store_.Get(kNodesTable, a.ToString());
  ASSERT_TRUE(stored.ok());
  v1::NodeInfo info;
  ASSERT_TRUE(info.ParseFromString(*stored));
  EXPECT_EQ(info.headless_keep_ms(), 2000) << "stored, for the next head";
  EXPECT_TRUE(absl::IsNotFound(keeping_.Heartbeat({.node = NodeId::Random(), .keep = kKeep}).status()));
}

// The horizon runs on the steady clock: a step of the wall clock declares nodes dead (as it
// always did) but confirms none before their leases have run out.
TEST(KeepLimitClockTest, AWallClockStepDoesNotShortenTheHorizon) {
  store::MemoryStore store;
  FakeClock wall, steady;
  NodeManager nodes(
      store, wall,
      {.heartbeat_period = absl::Seconds(1), .heartbeat_misses = 4, .headless_keep = absl::Seconds(2)},
      &steady);
  RecordingListener heard;
  nodes.SetListener(&heard);
  std::map<NodeId, uint64_t> held;
  auto beat = [&](const NodeId& id) {
    absl::StatusOr<HeartbeatOut> out =
        nodes.Heartbeat({.node = id, .peers_version = held[id], .keep = absl::Seconds(2)});
    ASSERT_TRUE(out.ok()) << out.status();
    held[id] = out->peers.version;
  };
  NodeId a = *nodes.Register(Node(0)), b = *nodes.Register(Node(0)), c = *nodes.Register(Node(0));
  for (int i = 0; i < 2; ++i)
    for (NodeId id : {a, b, c}) beat(id);
  NodeId d = *nodes.Register(Node(0));
  wall.Advance(absl::Hours(1));  // the wall clock jumps an hour; a second passes
  steady.Advance(absl::Seconds(1));
  ASSERT_TRUE(SendHeartbeat(nodes, d).ok());
  nodes.CheckLiveness();
  EXPECT_TRUE(nodes.DeathUnconfirmed(a.ToString())) << "declared by the wall clock, not confirmed";
  for (int i = 0; i < 9; ++i) {
    steady.Advance(absl::Milliseconds(500));
    wall.Advance(absl::Milliseconds(500));
    ASSERT_TRUE(SendHeartbeat(nodes, d).ok());
    nodes.CheckLiveness();
  }
  EXPECT_TRUE(nodes.DeathUnconfirmed(a.ToString())) << "5.5 s on the steady clock";
  steady.Advance(absl::Milliseconds(500));
  wall.Advance(absl::Milliseconds(500));
  ASSERT_TRUE(SendHeartbeat(nodes, d).ok());
  nodes.CheckLiveness();
  EXPECT_FALSE(nodes.DeathUnconfirmed(a.ToString())) << "6 s = K + T on the steady clock";
}

TEST_F(KeepLimitTest, ALimitFromAPreviousHeadCountsUntilTheWorkerSaysItAppliesTheNewOne) {
  NodeId a = JoinKeeping(), b = JoinKeeping(), c = JoinKeeping();
  for (int i = 0; i < 2; ++i)
    for (NodeId id : {a, b, c}) BeatKeeping(id, absl::Seconds(9));  // a previous head's 9 s
  ASSERT_EQ(keeping_.Find(a.ToString())->headless_keep_ms(), 9000);
  NodeManager next(store_, clock_,
                   {.heartbeat_period = absl::Seconds(1), .heartbeat_misses = 4, .headless_keep = kKeep});
  RecordingListener heard;
  next.SetListener(&heard);
  ASSERT_TRUE(next.Recover().ok());
  // b tells the new head it applies 2 s now; a and c never reach it.
  ASSERT_TRUE(
      next.Heartbeat({.node = b, .peers_version = held_[b], .send_peers = false, .keep = kKeep}).ok());
  EXPECT_EQ(next.Find(b.ToString())->headless_keep_ms(), 2000);
  ASSERT_TRUE(
      next.Heartbeat({.node = c, .peers_version = held_[c], .send_peers = false, .keep = absl::Seconds(9)})
          .ok());
  EXPECT_EQ(next.Find(c.ToString())->headless_keep_ms(), 9000) << "it may take the new one from this reply";
  NodeId d = *next.Register(Node(0));
  auto run = [&](absl::Duration span) { RunOn(next, heard, d, span); };
  run(absl::Seconds(6));  // b: 2 s + 4 s after the recovery
  EXPECT_EQ(Sorted(heard.events), Sorted({Silent(a), Silent(b), Silent(c), Dead(b)}))
      << "a and c may still apply 9 s";
  run(absl::Milliseconds(6500));
  EXPECT_TRUE(heard.events.empty()) << "12.5 s";
  run(absl::Milliseconds(500));
  EXPECT_EQ(Sorted(heard.events), Sorted({Dead(a), Dead(c)})) << "9 s + 4 s after the recovery";
}

TEST_F(KeepLimitTest, AWorkerOnTheSameMachineFindingASilentNodesProcessGoneMakesItsDeathCertain) {
  NodeId a = JoinKeeping("boot-1/ns-1", 100), b = JoinKeeping("boot-1/ns-1", 200),
         c = JoinKeeping("boot-2/ns-1", 300), d = JoinKeeping("boot-1/ns-1", 400);
  for (int i = 0; i < 2; ++i)
    for (NodeId id : {a, b, c, d}) BeatKeeping(id);
  EXPECT_TRUE(BeatReporting(b).empty()) << "every node heard";
  RunKeeping(absl::Milliseconds(2500), {b, c, d});
  const std::vector<ProcessCheck> asked = BeatReporting(b);
  ASSERT_EQ(asked.size(), 1u) << "a, unheard for two periods, in b's space";
  EXPECT_EQ(asked[0].node, a);
  EXPECT_EQ(asked[0].pid, 100);
  EXPECT_EQ(asked[0].start_ticks, 1100);
  EXPECT_TRUE(BeatReporting(c).empty()) << "another machine's pids say nothing of a";
  // Reports that prove nothing: from another space, of another start, of a heard node.
  BeatReporting(c, {{a, 100, 1100}});
  BeatReporting(b, {{a, 100, 1101}});
  BeatReporting(b, {{d, 400, 1400}});
  EXPECT_TRUE(RunKeeping(absl::Milliseconds(500), {b, c, d}).empty());
  // A report is undone by a heartbeat of the node: heard, it was not its process.
  BeatReporting(b, {{a, 100, 1100}});
  BeatKeeping(a);
  EXPECT_TRUE(RunKeeping(absl::Milliseconds(500), {a, b, c, d}).empty());
  RunKeeping(absl::Milliseconds(2500), {b, c, d});
  BeatReporting(b, {{a, 100, 1100}});
  listener_.events.clear();
  keeping_.CheckLiveness();
  EXPECT_EQ(listener_.events, std::vector<std::string>{Dead(a)})
      << "2.5 s after it was last heard, before the 4 s threshold: certain, no peers needed";
  EXPECT_NE(keeping_.Find(a.ToString())->death_reason().find("pid 100"), std::string::npos)
      << keeping_.Find(a.ToString())->death_reason();
  EXPECT_FALSE(keeping_.DeathUnconfirmed(a.ToString()));
}

TEST_F(KeepLimitTest, AReportOfAGoneProcessConfirmsADeathThatWaitsForItsPeers) {
  NodeId a = JoinKeeping("boot-1/ns-1", 100), b = JoinKeeping("boot-1/ns-1", 200), c = JoinKeeping();
  for (int i = 0; i < 2; ++i)
    for (NodeId id : {a, b, c}) BeatKeeping(id);
  EXPECT_EQ(RunKeeping(absl::Milliseconds(4500), {b, c}), std::vector<std::string>{Silent(a)});
  ASSERT_EQ(BeatReporting(b).size(), 1u);
  BeatReporting(b, {{a, 100, 1100}});
  EXPECT_EQ(RunKeeping(absl::Milliseconds(500), {b, c}), std::vector<std::string>{Dead(a)});
  EXPECT_TRUE(BeatReporting(b).empty()) << "confirmed: nothing left to ask";
}

TEST_F(ConfirmedDeathTest, AHeadThatDoesNotAskWorkersToFenceConfirmsAtOnce) {
  NodeManager three(store_, clock_, {absl::Seconds(1), 3});  // fewer than 4 misses: no fencing
  RecordingListener heard;
  three.SetListener(&heard);
  NodeId a = *three.Register(Node(0)), b = *three.Register(Node(0));
  PeerList peers;
  ASSERT_TRUE(SendHeartbeat(three, a, 0, &peers).ok());
  ASSERT_TRUE(SendHeartbeat(three, a, peers.version, &peers).ok());
  for (int i = 0; i < 8; ++i) {
    clock_.Advance(absl::Milliseconds(500));
    ASSERT_TRUE(SendHeartbeat(three, b).ok());
    three.CheckLiveness();
  }
  EXPECT_NE(std::find(heard.events.begin(), heard.events.end(), Dead(a)), heard.events.end());
}

// The node table owns the scheduler's view of the nodes: a node is placeable exactly while
// the table holds it ALIVE and announced, and a listener hears of a change only once the
// view has followed it.
class PlacementViewListener final : public NodeListener {
 public:
  explicit PlacementViewListener(ResourceTracker& resources) : resources_(resources) {}
  void OnNodeAlive(const v1::NodeInfo& node) override { Note("alive", node.node_id(), {}); }
  void OnNodeSilent(const NodeId& node, Displaced d) override { Note("silent", node.ToString(), d); }
  void OnNodeDead(const NodeId& node, const std::string&, Displaced d) override {
    Note("dead", node.ToString(), d);
  }
  std::vector<std::string> events;  // "<event>, placeable|unplaceable, <actors displaced>"

 private:
  void Note(const std::string& what, const std::string& node, const Displaced& d) {
    const bool placeable = resources_.With([&](const scheduler::Cluster& c) { return c.HasNode(node); });
    events.push_back(absl::StrCat(what, placeable ? ", placeable, " : ", unplaceable, ", d.actors.size()));
  }
  ResourceTracker& resources_;
};

TEST(NodeTableTest, TheSchedulersViewChangesWithTheTable) {
  store::MemoryStore store;
  FakeClock clock;
  ResourceTracker resources;
  NodeManager nodes(store, clock, {.heartbeat_period = absl::Seconds(1), .heartbeat_misses = 4}, nullptr,
                    &resources);
  PlacementViewListener heard(resources);
  nodes.SetListener(&heard);
  auto placeable = [&](const NodeId& id) {
    return resources.With([&](const scheduler::Cluster& c) { return c.HasNode(id.ToString()); });
  };
  const NodeId a = *nodes.Register(Node(2)), b = *nodes.Register(Node(2)), c = *nodes.Register(Node(2));
  EXPECT_EQ(heard.events, std::vector<std::string>(3, "alive, placeable, 0"));
  ASSERT_TRUE(resources
                  .With([&](scheduler::Cluster& cluster) {
                    return cluster.AllocateActor("actor-1", *ResourceSet::FromMap({{"GPU", 1}}),
                                                 scheduler::Slot{a.ToString(), {0}});
                  })
                  .ok());
  std::map<NodeId, uint64_t> held;
  auto beat = [&](const NodeId& id) {
    absl::StatusOr<HeartbeatOut> out = nodes.Heartbeat({.node = id, .peers_version = held[id]});
    ASSERT_TRUE(out.ok()) << out.status();
    held[id] = out->peers.version;
  };
  for (int i = 0; i < 2; ++i)
    for (const NodeId& id : {a, b, c}) beat(id);  // each holds a list with the others

  // a falls silent: declared dead, out of the view (with its actor) before anyone hears it.
  heard.events.clear();
  for (int i = 0; i < 9; ++i) {
    clock.Advance(absl::Milliseconds(500));
    beat(b), beat(c);
    nodes.CheckLiveness();
  }
  ASSERT_TRUE(nodes.DeathUnconfirmed(a.ToString()));
  EXPECT_EQ(heard.events, std::vector<std::string>{"silent, unplaceable, 1"});
  EXPECT_FALSE(placeable(a));

  // Back before its death is confirmed: ALIVE in the table, not placeable until it has
  // stopped its old actors (its first heartbeat) and the death is confirmed.
  heard.events.clear();
  v1::NodeInfo again = Node(2);
  again.set_node_id(a.ToString());
  bool was_dead = false;
  ASSERT_TRUE(nodes.Register(again, &was_dead).ok());
  EXPECT_TRUE(was_dead);
  EXPECT_EQ(nodes.Find(a.ToString())->state(), v1::NODE_ALIVE);
  EXPECT_FALSE(placeable(a));
  held[a] = 0;
  beat(a);
  nodes.CheckLiveness();
  // (The death confirmed is of what it ran before; the node itself is back by then.)
  EXPECT_EQ(heard.events, (std::vector<std::string>{"dead, placeable, 0", "alive, placeable, 0"}));
  EXPECT_TRUE(placeable(a));

  // b leaves: out of the view in the same step.
  heard.events.clear();
  ASSERT_TRUE(nodes.Unregister(b, "drained").ok());
  EXPECT_EQ(heard.events, std::vector<std::string>{"dead, unplaceable, 0"});

  // A head restart: the recovered table fills a fresh view with the ALIVE nodes.
  ResourceTracker recovered;
  NodeManager next(store, clock, {.heartbeat_period = absl::Seconds(1), .heartbeat_misses = 4}, nullptr,
                   &recovered);
  ASSERT_TRUE(next.Recover().ok());
  std::vector<std::string> expected = {a.ToString(), c.ToString()};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(recovered.With([](const scheduler::Cluster& cl) { return cl.NodeIds(); }), expected);
}

}  // namespace
}  // namespace skyrl::head
