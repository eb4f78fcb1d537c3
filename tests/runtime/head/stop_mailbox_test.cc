#include "runtime/head/stop_mailbox.h"

#include <gtest/gtest.h>

namespace skyrl::head {
namespace {

using Starts = std::vector<ActorStart>;

// A start the head cannot reach the worker to stop is asked in that node's heartbeat replies
// until the worker reports it stopped; a report of anything not asked counts for nothing.
TEST(StopMailboxTest, AStopIsAskedUntilTheWorkerReportsIt) {
  StopMailbox stops;
  const NodeId a = NodeId::Random(), b = NodeId::Random();
  const ActorStart start{ActorId::Random().ToString(), 2};
  stops.Request(a, start);
  EXPECT_TRUE(stops.Exchange(b, {}).empty()) << "asked only of its own node";
  EXPECT_EQ(stops.Exchange(a, {}), Starts{start});
  EXPECT_EQ(stops.Exchange(a, {}), Starts{start}) << "asked again in every reply";
  // Another node's report, or one of another start, ends nothing.
  EXPECT_TRUE(stops.Exchange(b, {start}).empty());
  EXPECT_EQ(stops.Exchange(a, {{start.actor_id, 1}}), Starts{start});
  EXPECT_FALSE(stops.Reported(a, start));
  EXPECT_TRUE(stops.Exchange(a, {start}).empty()) << "no longer asked once reported";
  EXPECT_TRUE(stops.Reported(a, start));
  EXPECT_FALSE(stops.Reported(b, start));
  stops.Request(a, start);  // asked again after the report: already done
  EXPECT_TRUE(stops.Exchange(a, {}).empty());
  stops.Forget(a, start);
  EXPECT_FALSE(stops.Reported(a, start));
  // Forgotten before any report: no longer asked.
  stops.Request(b, start);
  stops.Forget(b, start);
  EXPECT_TRUE(stops.Exchange(b, {}).empty());
}

// A stop nobody waits for (a kill's) ends with its node: gone for good, its worker stopped
// its actors. One that is awaited stays until its waiter forgets it.
TEST(StopMailboxTest, AnUnawaitedStopEndsWithItsNode) {
  StopMailbox stops;
  const NodeId node = NodeId::Random();
  const ActorStart killed{ActorId::Random().ToString(), 5}, restarting{ActorId::Random().ToString(), 1};
  stops.Request(node, killed, /*awaited=*/false);
  stops.Request(node, restarting);
  EXPECT_EQ(stops.Exchange(node, {}).size(), 2u);
  stops.NodeGone(node);
  EXPECT_EQ(stops.Exchange(node, {}), Starts{restarting});
  // Gone, it takes no new request, until it is back.
  stops.Request(node, killed, /*awaited=*/false);
  EXPECT_EQ(stops.Exchange(node, {}), Starts{restarting});
  stops.Forget(node, restarting);
  stops.NodeBack(node);
  stops.Request(node, killed, /*awaited=*/false);
  EXPECT_EQ(stops.Exchange(node, {}), Starts{killed});
  // Reported, a stop nobody waits for leaves no trace.
  EXPECT_TRUE(stops.Exchange(node, {killed}).empty());
  EXPECT_FALSE(stops.Reported(node, killed));
}

// Requested twice, once awaited: the report is kept for the waiter.
TEST(StopMailboxTest, AnAwaitedRequestWinsOverAnUnawaitedOne) {
  StopMailbox stops;
  const NodeId node = NodeId::Random();
  const ActorStart start{ActorId::Random().ToString(), 3};
  stops.Request(node, start, /*awaited=*/false);
  stops.Request(node, start, /*awaited=*/true);
  stops.Request(node, start, /*awaited=*/false);
  stops.NodeGone(node);
  EXPECT_EQ(stops.Exchange(node, {start}), Starts{});
  EXPECT_TRUE(stops.Reported(node, start));
}

// Only the last keep_gone nodes gone are remembered: churn does not grow the mailbox, and a
// node that came back and went again counts from its latest departure.
TEST(StopMailboxTest, OnlyTheLastNodesGoneAreRemembered) {
  StopMailbox stops(/*keep_gone=*/2);
  const NodeId a = NodeId::Random(), b = NodeId::Random(), c = NodeId::Random();
  const ActorStart start{ActorId::Random().ToString(), 1};
  stops.NodeGone(a);
  stops.NodeGone(b);
  stops.Request(a, start, /*awaited=*/false);
  EXPECT_TRUE(stops.Exchange(a, {}).empty()) << "a is remembered gone: nothing asked of it";
  // a comes back and goes again: its first departure must not push out its second.
  stops.NodeBack(a);
  stops.NodeGone(a);
  stops.NodeGone(c);  // the oldest entry (a's first departure) is stale; b's goes
  stops.Request(a, start, /*awaited=*/false);
  EXPECT_TRUE(stops.Exchange(a, {}).empty()) << "a's latest departure is still remembered";
  stops.Request(b, start, /*awaited=*/false);
  EXPECT_EQ(stops.Exchange(b, {}), Starts{start}) << "b is forgotten, so asked as a node still there";
  stops.Request(c, start, /*awaited=*/false);
  EXPECT_TRUE(stops.Exchange(c, {}).empty());
  for (int i = 0; i < 1000; ++i) stops.NodeGone(NodeId::Random());
  stops.Request(c, start, /*awaited=*/false);
  EXPECT_EQ(stops.Exchange(c, {}), Starts{start}) << "c was pushed out by the churn";
}

}  // namespace
}  // namespace skyrl::head
