// worker::HeadLink against a fake head, fake peers and fake actors, on a fake clock: the
// worker's protocol with the head and its fencing rule, without a cluster or sleeping.
#include "runtime/worker/head_link.h"

#include <gtest/gtest.h>

#include <map>

namespace skyrl::worker {
namespace {

class FakeHead final : public HeadApi {
 public:
  absl::StatusOr<v1::RegisterNodeReply> RegisterNode(const v1::RegisterNodeRequest& req, absl::Duration) override {
    ++registers;
    registered_with = req.node();
    if (!down.ok()) return down;
    v1::RegisterNodeReply r;
    r.set_node_id("node-000000000000000000000007");
    r.set_heartbeat_period_ms(500);
    r.set_heartbeat_misses(misses);
    r.set_was_dead(was_dead);
    return r;
  }
  absl::StatusOr<v1::HeartbeatReply> Heartbeat(const v1::HeartbeatRequest& req, absl::Duration timeout) override {
    ++heartbeats;
    last_timeout = timeout;
    last_peers_version = req.peers_version();
    if (!down.ok()) return down;
    if (forget) return absl::NotFoundError("node is dead: register again");
    v1::HeartbeatReply r;
    if (req.peers_version() != 42) {
      r.set_peers_changed(true);
      r.set_peers_version(42);
      for (const std::string& p : peers) r.add_peer_addresses(p);
    }
    return r;
  }
  absl::Status down;  // what every call answers while not OK
  bool forget = false, was_dead = false;
  int misses = 4;     // dead after 2 s; fencing after 1 s
  std::vector<std::string> peers = {"peer-a:1", "peer-b:1"};
  int registers = 0, heartbeats = 0;
  uint64_t last_peers_version = 0;
  absl::Duration last_timeout;
  v1::NodeInfo registered_with;
};

class FakePeers final : public PeerApi {
 public:
  explicit FakePeers(const Clock& clock) : clock_(clock) {}
  absl::StatusOr<v1::HeadContactReply> HeadContact(const std::string& address, absl::Duration timeout) override {
    absl::MutexLock lock(&mu);  // asked from several threads at once
    ++asked;
    last_timeout = timeout;
    auto it = contact.find(address);
    if (it == contact.end()) return absl::UnavailableError("connection refused");
    v1::HeadContactReply r;
    r.set_since_head_contact_ms(absl::ToInt64Milliseconds(clock_.Now() - it->second));
    return r;
  }
  absl::Mutex mu;
  std::map<std::string, absl::Time> contact;  // when each peer last reached the head; absent: unreachable
  int asked = 0;
  absl::Duration last_timeout;

 private:
  const Clock& clock_;
};

class FakeActors final : public LocalActors {
 public:
  std::vector<ActorId> Running() const override { return running; }
  void Stop(const std::vector<ActorId>& ids) override { stopped.insert(stopped.end(), ids.begin(), ids.end()); }
  int Fence(const std::string& reason) override {
    fences.push_back(reason);
    return int(running.size());
  }
  std::vector<ActorId> running = {ActorId::Random()};
  std::vector<ActorId> stopped;
  std::vector<std::string> fences;
};

class HeadLinkTest : public ::testing::Test {
 protected:
  HeadLinkTest() {
    node_.set_address("10.0.0.1:7000");
    (*node_.mutable_resources_total())["CPU"] = 4;
  }
  HeadLink& Link() {
    if (!link_) link_.emplace(node_, head_, peers_, actors_, clock_, HeadLinkOptions{"head:7420", absl::Seconds(300)});
    return *link_;
  }
  // Registers, then one heartbeat (which brings the peer list).
  void Connect() {
    EXPECT_FALSE(Link().Round().exit_code);
    EXPECT_FALSE(Link().Round().exit_code);
    ASSERT_EQ(Link().node_id(), "node-000000000000000000000007");
  }
  // Rounds every `step` with the head down, for `d`.
  void Down(absl::Duration d, absl::Duration step = absl::Milliseconds(500)) {
    head_.down = absl::UnavailableError("connection refused");
    for (absl::Duration t; t < d; t += step) {
      clock_.Advance(step);
      EXPECT_FALSE(Link().Round().exit_code);
    }
  }

  v1::NodeInfo node_;
  FakeHead head_;
  FakeClock clock_;
  FakePeers peers_{clock_};
  FakeActors actors_;
  std::optional<HeadLink> link_;
};

TEST_F(HeadLinkTest, RegistersThenHeartbeatsAtTheHeadsPeriodWithThePeerListVersion) {
  HeadLink::Step first = Link().Round();
  EXPECT_EQ(head_.registers, 1);
  EXPECT_EQ(head_.registered_with.address(), "10.0.0.1:7000");
  EXPECT_EQ(first.wait, absl::Milliseconds(500)) << "the period the head asked for";
  EXPECT_EQ(Link().Round().wait, absl::Milliseconds(500));
  EXPECT_EQ(head_.last_peers_version, 0u) << "no list yet";
  Link().Round();
  EXPECT_EQ(head_.last_peers_version, 42u) << "the list held is named, so it is not sent again";
  EXPECT_EQ(head_.registers, 1);
  v1::HeadContactReply c = Link().Contact();
  EXPECT_EQ(c.since_head_contact_ms(), 0);
  EXPECT_FALSE(c.fenced());
}

TEST_F(HeadLinkTest, ANodeTheHeadDeclaredDeadRegistersAgainAndStopsItsActorsFromBefore) {
  Connect();
  head_.forget = true;
  head_.was_dead = true;
  EXPECT_EQ(Link().Round().wait, absl::ZeroDuration()) << "registers again at once";
  head_.forget = false;
  Link().Round();
  EXPECT_EQ(head_.registers, 2);
  EXPECT_EQ(head_.registered_with.node_id(), "node-000000000000000000000007") << "under the same id";
  EXPECT_EQ(actors_.stopped, actors_.running);
  EXPECT_TRUE(actors_.fences.empty());
}

TEST_F(HeadLinkTest, ARefusedNodeExitsAndAnUnreachableHeadEndsTheWorkerAfterTheRetryWindow) {
  head_.down = absl::UnauthenticatedError("bad token");
  EXPECT_EQ(Link().Round().exit_code, 2);

  HeadLink patient(node_, head_, peers_, actors_, clock_, HeadLinkOptions{"head:7420", absl::Seconds(300)});
  head_.down = absl::UnavailableError("connection refused");
  clock_.Advance(absl::Seconds(299));
  EXPECT_FALSE(patient.Round().exit_code);
  clock_.Advance(absl::Seconds(2));
  EXPECT_EQ(patient.Round().exit_code, 1);
}

TEST_F(HeadLinkTest, NoFencingBeforeHalfTheDeathThreshold) {
  Connect();
  const absl::Time t0 = clock_.Now();
  Down(absl::Seconds(1));  // exactly half of 2 s
  peers_.contact = {{"peer-a:1", t0 + absl::Seconds(1)}, {"peer-b:1", t0 + absl::Seconds(1)}};
  EXPECT_EQ(peers_.asked, 0);
  EXPECT_TRUE(actors_.fences.empty());
}

TEST_F(HeadLinkTest, FencesWhenAPeerStillReachesTheHead) {
  Connect();
  const absl::Time t0 = clock_.Now();
  // peer-a lost the head with this node; peer-b still reaches it (every 500 ms).
  peers_.contact = {{"peer-a:1", t0}, {"peer-b:1", t0 + absl::Milliseconds(1000)}};
  Down(absl::Milliseconds(1500));
  ASSERT_EQ(actors_.fences.size(), 1u);
  EXPECT_NE(actors_.fences[0].find("peer peer-b:1 reached it 500 ms ago"), std::string::npos) << actors_.fences[0];
  EXPECT_NE(actors_.fences[0].find("node-000000000000000000000007"), std::string::npos);
  EXPECT_TRUE(Link().Contact().fenced());
  EXPECT_EQ(peers_.last_timeout, absl::Milliseconds(200)) << "peers are asked within a tenth of the threshold";
  EXPECT_EQ(head_.last_timeout, absl::Milliseconds(200)) << "and so is the head";
  Down(absl::Seconds(5));
  EXPECT_EQ(actors_.fences.size(), 1u) << "fenced once per outage";
  head_.down = absl::OkStatus();
  Link().Round();
  EXPECT_FALSE(Link().Contact().fenced()) << "the head answers again";
}

TEST_F(HeadLinkTest, KeepsItsActorsWhileEveryPeerHasLostTheHeadTooAndFencesWhenOneIsBack) {
  Connect();
  const absl::Time t0 = clock_.Now();
  // Both peers lost the head with this node, out of phase (their last answers came a little
  // after this node's).
  peers_.contact = {{"peer-a:1", t0 + absl::Milliseconds(500)}, {"peer-b:1", t0 + absl::Milliseconds(300)}};
  Down(absl::Seconds(3));
  EXPECT_GT(peers_.asked, 0);
  EXPECT_TRUE(actors_.fences.empty()) << "the head is cut off from everyone: it declares nobody dead";
  peers_.contact["peer-a:1"] = clock_.Now();  // peer-a reaches the head again; this node does not
  Down(absl::Milliseconds(500));
  ASSERT_EQ(actors_.fences.size(), 1u);
  EXPECT_NE(actors_.fences[0].find("peer-a:1"), std::string::npos) << actors_.fences[0];
}

TEST_F(HeadLinkTest, FencesWhenNoPeerCanBeAskedAndIgnoresDeadPeersOtherwise) {
  Connect();
  peers_.contact = {{"peer-a:1", clock_.Now()}};  // peer-b is unreachable (dead, or cut off)
  Down(absl::Seconds(3));
  EXPECT_TRUE(actors_.fences.empty()) << "one peer answers, cut off from the head too";
  peers_.contact.clear();
  Down(absl::Milliseconds(500));
  ASSERT_EQ(actors_.fences.size(), 1u) << "cut off from everything";
  EXPECT_NE(actors_.fences[0].find("no peer can be asked"), std::string::npos) << actors_.fences[0];
}

TEST_F(HeadLinkTest, ALoneNodeOrAHeadWithoutTheGuardNeverFences) {
  head_.peers.clear();
  Connect();
  Down(absl::Seconds(60));
  EXPECT_TRUE(actors_.fences.empty()) << "a lone node has nobody to ask";
  EXPECT_EQ(peers_.asked, 0);

  head_.down = absl::OkStatus();
  head_.misses = 0;  // a head that predates fencing
  head_.peers = {"peer-a:1"};
  HeadLink old(node_, head_, peers_, actors_, clock_, HeadLinkOptions{"head:7420", absl::ZeroDuration()});
  old.Round();
  old.Round();
  Down(absl::Seconds(60));
  for (int i = 0; i < 10; ++i) old.Round();
  EXPECT_TRUE(actors_.fences.empty());
}

}  // namespace
}  // namespace skyrl::worker
