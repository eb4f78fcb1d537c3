#include "runtime/head/death_quorum.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace skyrl::head {
namespace {

using Why = DeathQuorum::Why;
constexpr absl::Duration kLimit = absl::Seconds(5);  // the longest death threshold

// A quorum over `n` ALIVE nodes (in id order), each heard once holding the current list.
class DeathQuorumTest : public ::testing::Test {
 protected:
  void Join(size_t n) {
    for (size_t i = 0; i < n; ++i) ids_.push_back(NodeId::Random());
    std::sort(ids_.begin(), ids_.end());
    for (const NodeId& id : ids_) {
      q_.Registered(id, 0);
      q_.Changed(id, /*alive=*/true);
    }
    for (const NodeId& id : ids_) HoldCurrent(id);
  }
  // Heard holding the current list (it had it in its last reply).
  void HoldCurrent(const NodeId& id, std::vector<PeerSupport> supports = {}) {
    q_.Heard(id, 0, /*sent=*/true, {}, now_, kLimit);
    q_.Heard(id, q_.version(), /*sent=*/false, supports, now_, kLimit);
  }
  // Declared DEAD by silence now, waiting for its peers (as NodeManager does).
  DeathQuorum::Pending Declare(const NodeId& id, DeathQuorum::Deadlines deadlines = {}) {
    DeathQuorum::Pending p = q_.Declare(id, now_, deadlines, /*confirm=*/true, kLimit);
    q_.Changed(id, /*alive=*/false);
    if (DeathQuorum::Waits(p)) q_.Await(id, p);
    return p;
  }
  std::vector<DeathQuorum::Confirmed> Ready(absl::Time steady_now = absl::UnixEpoch()) {
    return q_.Ready(now_, steady_now, [&](const NodeId& id) { return gone_.contains(id); });
  }

  absl::Time now_ = absl::FromUnixSeconds(1'000'000);
  DeathQuorum q_{uint64_t(absl::ToUnixNanos(now_)) | 1};
  std::vector<NodeId> ids_;
  std::set<NodeId> gone_;
};

TEST_F(DeathQuorumTest, AListIsTheRingNeighboursAndEveryoneIsOnTheirNeighboursLists) {
  Join(40);
  for (size_t i = 0; i < ids_.size(); ++i) {
    std::vector<NodeId> peers = q_.PeersOf(ids_[i]);
    ASSERT_EQ(peers.size(), 2 * DeathQuorum::kPeersEachSide);
    std::set<NodeId> got(peers.begin(), peers.end()), want;
    for (size_t k = 1; k <= DeathQuorum::kPeersEachSide; ++k) {
      want.insert(ids_[(i + k) % ids_.size()]);
      want.insert(ids_[(i + ids_.size() - k) % ids_.size()]);
    }
    EXPECT_EQ(got, want) << "node " << i;
    for (const NodeId& peer : peers) {
      std::vector<NodeId> theirs = q_.PeersOf(peer);
      EXPECT_NE(std::find(theirs.begin(), theirs.end(), ids_[i]), theirs.end()) << "symmetric";
    }
  }
  // In a cluster of 17 or fewer, a list is every other node.
  DeathQuorum small(7);
  for (size_t i = 0; i < 17; ++i) small.Changed(ids_[i], true);
  EXPECT_EQ(small.PeersOf(ids_[0]).size(), 16u);
}

TEST_F(DeathQuorumTest, TheVersionMovesWithEveryChangeAndTheAliveSetWithStateChanges) {
  Join(3);
  const uint64_t v = q_.version();
  q_.Changed(ids_[0], /*alive=*/true);  // an address changed
  EXPECT_EQ(q_.version(), v + 1);
  EXPECT_EQ(q_.alive_count(), 3u);
  q_.Changed(ids_[0], /*alive=*/false);
  EXPECT_EQ(q_.version(), v + 2);
  EXPECT_EQ(q_.alive_count(), 2u);
  EXPECT_EQ(q_.PeersOf(ids_[1]), std::vector<NodeId>{ids_[2]});
}

// One of five needs three of its four peers (half its list of five, rounded up), each heard
// holding a list without it.
TEST_F(DeathQuorumTest, ASilentNodeIsConfirmedOnceHalfItsListHoldsAListWithoutIt) {
  Join(5);
  const NodeId dead = ids_[2];
  DeathQuorum::Pending p = Declare(dead);
  EXPECT_EQ(p.needed, 3u);
  EXPECT_EQ(p.eligible.size(), 4u);
  EXPECT_EQ(q_.Find(dead)->version, q_.version()) << "lists from the one without it on";
  // Heard, but still holding the list with it: nothing.
  const uint64_t old = q_.version() - 1;
  q_.Heard(ids_[0], old, false, {}, now_, kLimit);
  EXPECT_TRUE(Ready().empty());
  HoldCurrent(ids_[0]);
  HoldCurrent(ids_[1]);
  EXPECT_TRUE(Ready().empty()) << "two of three";
  HoldCurrent(ids_[3]);
  std::vector<DeathQuorum::Confirmed> ready = Ready();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].node, dead);
  EXPECT_EQ(ready[0].why, Why::kPeers);
  EXPECT_EQ(ready[0].peers, 3u);
  EXPECT_TRUE(q_.pending(dead)) << "Ready does not forget: the owner stores the confirmation first";
  q_.Forget(dead);
  EXPECT_TRUE(Ready().empty());
}

// A peer that counted the silent node alive (a support) holds it until a threshold after.
TEST_F(DeathQuorumTest, ASupportDelaysTheConfirmationByTheLongestThreshold) {
  Join(3);
  const NodeId dead = ids_[0];
  Declare(dead);
  HoldCurrent(ids_[1], {{dead, absl::Seconds(1)}});  // it supported `dead` a second ago
  HoldCurrent(ids_[2]);
  EXPECT_TRUE(Ready().empty());
  now_ += kLimit - absl::Seconds(1) - absl::Milliseconds(1);
  EXPECT_TRUE(Ready().empty());
  now_ += absl::Milliseconds(1);
  ASSERT_EQ(Ready().size(), 1u);
}

// A peer that leaves supports no one once the supports it may have given run out: it counts
// as confirming, then.
TEST_F(DeathQuorumTest, APeerThatLeftConfirmsOnceItsSupportsRunOut) {
  Join(4);
  const NodeId dead = ids_[0];
  EXPECT_EQ(Declare(dead).needed, 2u);
  q_.Left(ids_[1], now_, kLimit);
  q_.Changed(ids_[1], false);
  HoldCurrent(ids_[2]);
  EXPECT_TRUE(Ready().empty()) << "the supports it may have given run out first";
  now_ += kLimit;
  std::vector<DeathQuorum::Confirmed> ready = Ready();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].peers, 2u);
}

// One that left before the death counts too, if it is on a list the dead node may hold.
TEST_F(DeathQuorumTest, APeerThatLeftBeforeTheDeathCountsAsConfirming) {
  Join(3);
  const absl::Time left_at = now_;
  q_.Left(ids_[1], left_at, kLimit);
  q_.Changed(ids_[1], false);  // the others still hold the list with it
  now_ += absl::Seconds(1);
  DeathQuorum::Pending p = Declare(ids_[0]);
  EXPECT_TRUE(p.confirmed.contains(ids_[1]));
  EXPECT_EQ(p.not_before, left_at + kLimit);
  HoldCurrent(ids_[2]);
  EXPECT_TRUE(Ready().empty());
  now_ = left_at + kLimit;
  EXPECT_EQ(Ready().size(), 1u);
}

TEST_F(DeathQuorumTest, ALoneNodeOrOneThatMayHoldNoListIsCertainAtOnce) {
  Join(1);
  EXPECT_FALSE(DeathQuorum::Waits(Declare(ids_[0]))) << "a list of itself alone";
  DeathQuorum fresh(3);
  const NodeId a = NodeId::Random(), b = NodeId::Random();
  fresh.Changed(a, true);
  fresh.Changed(b, true);
  fresh.Registered(a, 0);  // registered; never heard: it holds no list, so it fences
  EXPECT_FALSE(DeathQuorum::Waits(fresh.Declare(a, now_, {}, true, kLimit)));
  // Workers that do not fence: certain at once, whatever the lists.
  Join(4);
  EXPECT_FALSE(DeathQuorum::Waits(q_.Declare(ids_[1], now_, {}, /*confirm=*/false, kLimit)));
}

// Back (registered again while its death is pending): peers no longer confirm it; its own
// heartbeat holding no list does, since a worker stops its old actors before that.
TEST_F(DeathQuorumTest, ANodeBackIsConfirmedByItsOwnHeartbeatHoldingNoList) {
  Join(3);
  const NodeId dead = ids_[0];
  Declare(dead);
  EXPECT_TRUE(q_.Registered(dead, /*holds=*/0));
  q_.Changed(dead, true);
  HoldCurrent(ids_[1]);
  HoldCurrent(ids_[2]);
  EXPECT_TRUE(Ready().empty()) << "its peers' lists have it again";
  q_.Heard(dead, q_.version(), false, {}, now_, kLimit);  // a heartbeat sent before it stopped
  EXPECT_TRUE(Ready().empty());
  q_.Heard(dead, 0, true, {}, now_, kLimit);
  std::vector<DeathQuorum::Confirmed> ready = Ready();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].why, Why::kStopped);
}

// Back, then silent again before its first heartbeat: it may never have had the reply telling
// it to stop its actors, so only its deadlines end the wait.
TEST_F(DeathQuorumTest, ANodeBackAndSilentAgainWaitsForItsDeadlines) {
  Join(3);
  const NodeId dead = ids_[0];
  Declare(dead);
  q_.Registered(dead, 0);
  q_.Changed(dead, true);
  const absl::Time give_up = now_ + absl::Seconds(30);
  DeathQuorum::Pending again = Declare(dead, {.give_up_at = give_up});
  EXPECT_TRUE(DeathQuorum::Waits(again));
  EXPECT_FALSE(q_.Find(dead)->back);
  HoldCurrent(ids_[1]);
  HoldCurrent(ids_[2]);
  gone_.insert(dead);  // (a process report of the node back counts: it is not back any more)
  ASSERT_EQ(Ready().size(), 1u);
  EXPECT_EQ(Ready()[0].why, Why::kProcessGone);
  gone_.clear();
  EXPECT_TRUE(Ready().empty());
  now_ = give_up;
  ASSERT_EQ(Ready().size(), 1u);
  EXPECT_EQ(Ready()[0].why, Why::kGaveUp);
}

TEST_F(DeathQuorumTest, NoLeaseRunningPastTheHorizonEndsTheWait) {
  Join(3);
  const absl::Time horizon = absl::FromUnixSeconds(500);  // steady clock
  Declare(ids_[0], {.horizon = horizon});
  EXPECT_TRUE(Ready(horizon - absl::Milliseconds(1)).empty());
  std::vector<DeathQuorum::Confirmed> ready = Ready(horizon);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].why, Why::kHorizon);
}

// A node may hold a list sent long ago: the peers that must confirm are those of that list,
// rebuilt from the log of changes, not those of the list now.
TEST_F(DeathQuorumTest, ThePeersOfAnOldListConfirmNotTheNodesThatJoinedSince) {
  Join(3);
  const NodeId dead = ids_[0];
  const std::vector<NodeId> first = ids_;
  q_.Heard(dead, q_.version(), /*sent=*/false, {}, now_, kLimit);  // holds the list of three
  for (int i = 0; i < 5; ++i) q_.Changed(NodeId::Random(), true);  // joined since
  DeathQuorum::Pending p = Declare(dead);
  EXPECT_EQ(p.eligible, (absl::flat_hash_set<NodeId>{first[1], first[2]}));
  EXPECT_EQ(p.needed, 2u);
}

// After a head restart, a list a previous head sent is cut from the nodes recovered.
TEST_F(DeathQuorumTest, AfterARestartAPreviousHeadsListIsCutFromTheNodesRecovered) {
  DeathQuorum q(99);
  std::vector<NodeId> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(NodeId::Random());
  q.Recovered(ids[0], /*alive=*/true, /*on_lists=*/true);
  q.Recovered(ids[1], /*alive=*/true, /*on_lists=*/true);
  q.Recovered(ids[2], /*alive=*/false, /*on_lists=*/true);  // died too recently to have given up
  q.Recovered(ids[3], /*alive=*/false, /*on_lists=*/false);
  q.RecoveredPending(ids[2], /*back=*/false, now_ + kLimit, {}, "node lost");
  const DeathQuorum::Pending* p = q.Find(ids[2]);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->eligible, (absl::flat_hash_set<NodeId>{ids[0], ids[1]}));
  EXPECT_EQ(p->needed, 2u);
  EXPECT_EQ(p->reason, "node lost");
  // A recovered ALIVE node holds a previous head's list until it says otherwise; declared
  // dead, it waits for the recovered nodes.
  DeathQuorum::Pending d = q.Declare(ids[0], now_, {}, true, kLimit);
  EXPECT_EQ(d.eligible, (absl::flat_hash_set<NodeId>{ids[1], ids[2]}));
  // A version this head never sent counts as a previous head's list.
  EXPECT_EQ(q.Heard(ids[1], q.version() + 1000, false, {}, now_, kLimit), DeathQuorum::kPreviousHeadsList);
}

}  // namespace
}  // namespace skyrl::head
