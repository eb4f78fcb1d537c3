// worker::HeadLink against a fake head, fake peers and fake actors, on a fake clock: the
// worker's protocol with the head and its fencing rule, without a cluster or sleeping.
#include "runtime/worker/head_link.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "absl/strings/str_cat.h"

namespace skyrl::worker {
namespace {

constexpr char kSelf[] = "node-000000000000000000000007";

// The node id the fake head lists beside a peer's address: "peer-a:1" -> node-...0a.
std::string PeerId(const std::string& address) {
  return absl::StrCat("node-00000000000000000000000", absl::string_view(address).substr(5, 1));
}

class FakeHead final : public HeadApi {
 public:
  absl::StatusOr<v1::RegisterNodeReply> RegisterNode(const v1::RegisterNodeRequest& req,
                                                     absl::Duration) override {
    ++registers;
    registered_with = req.node();
    if (!down.ok()) return down;
    v1::RegisterNodeReply r;
    r.set_node_id("node-000000000000000000000007");
    r.set_heartbeat_period_ms(500);
    r.set_heartbeat_misses(misses);
    r.set_headless_keep_ms(keep_ms);
    r.set_was_dead(was_dead);
    return r;
  }
  absl::StatusOr<v1::HeartbeatReply> Heartbeat(const v1::HeartbeatRequest& req,
                                               absl::Duration timeout) override {
    ++heartbeats;
    last_timeout = timeout;
    last_peers_version = req.peers_version();
    last_request = req;
    if (!down.ok()) return down;
    if (forget) return absl::NotFoundError("node is dead: register again");
    v1::HeartbeatReply r;
    if (req.peers_version() != 42) {
      r.set_peers_changed(true);
      r.set_peers_version(42);
      for (const std::string& p : peers) {
        r.add_peer_addresses(p);
        r.add_peer_node_ids(PeerId(p));
      }
    }
    for (const v1::ActorStart& a : stop) *r.add_stop() = a;
    for (const v1::ProcessCheck& c : check) *r.add_check() = c;
    r.set_headless_keep_ms(keep_ms);
    r.set_heartbeat_period_ms(period_ms);
    return r;
  }
  void Reconnect() override {
    ++reconnects;
    if (fresh_connection_works) down = absl::OkStatus();
  }
  absl::Status down;                    // what every call answers while not OK
  bool fresh_connection_works = false;  // Reconnect() ends `down` (a connection in backoff)
  int reconnects = 0;
  bool forget = false, was_dead = false;
  int misses = 4;  // dead after 2 s; fencing after 1 s
  std::vector<std::string> peers = {"peer-a:1", "peer-b:1"};
  std::vector<v1::ActorStart> stop;     // asked in every heartbeat reply
  std::vector<v1::ProcessCheck> check;  // likewise
  int64_t keep_ms = 0;                  // RegisterNodeReply.headless_keep_ms (0: no limit)
  int64_t period_ms = 0;                // HeartbeatReply.heartbeat_period_ms (0: not said)
  int registers = 0, heartbeats = 0;
  uint64_t last_peers_version = 0;
  v1::HeartbeatRequest last_request;
  absl::Duration last_timeout;
  v1::NodeInfo registered_with;
};

class FakePeers final : public PeerApi {
 public:
  absl::StatusOr<v1::HeadContactReply> HeadContact(const std::string& address, const std::string& asker,
                                                   absl::Duration timeout) override {
    absl::MutexLock lock(&mu);  // asked from several threads at once
    ++asked;
    last_timeout = timeout;
    last_asker = asker;
    auto it = reaches.find(address);
    if (it == reaches.end()) return absl::UnavailableError("connection refused");
    v1::HeadContactReply r;
    r.set_reaches_head(it->second);
    r.set_knows_asker(!forgot_asker.contains(address));
    return r;
  }
  absl::Mutex mu;
  std::map<std::string, bool> reaches;  // whether each peer reaches the head; absent: unreachable
  std::set<std::string> forgot_asker;   // peers whose list no longer has the asker
  std::string last_asker;
  int asked = 0;
  absl::Duration last_timeout;
};

class FakeActors final : public LocalActors {
 public:
  std::vector<ActorId> Running() const override { return running; }
  void Stop(const std::vector<ActorId>& ids) override {
    stopped.insert(stopped.end(), ids.begin(), ids.end());
  }
  // Records the fences that killed something (calls with nothing running kill nothing).
  int Fence(const std::string& reason) override {
    int killed = int(running.size());
    if (killed > 0) fences.push_back(reason);
    running.clear();
    return killed;
  }
  bool StopStart(const ActorId& id, int64_t incarnation) override {
    stop_starts.emplace_back(id, incarnation);
    return stop_works;
  }
  void Lease(absl::Duration valid_for) override { leases.push_back(valid_for); }
  std::vector<ActorId> running = {ActorId::Random()};
  std::vector<std::pair<ActorId, int64_t>> stop_starts;
  bool stop_works = true;
  std::vector<ActorId> stopped;
  std::vector<std::string> fences;
  std::vector<absl::Duration> leases;  // every renewal, in order
};

class HeadLinkTest : public ::testing::Test {
 protected:
  HeadLinkTest() {
    node_.set_address("10.0.0.1:7000");
    (*node_.mutable_resources_total())["CPU"] = 4;
  }
  HeadLink& Link() {
    if (!link_)
      link_.emplace(node_, head_, probe_, peers_, actors_, clock_,
                    HeadLinkOptions{"head:7420", absl::Seconds(300), [this](int pid, int64_t start) {
                                      return gone_.contains({pid, start});
                                    }});
    return *link_;
  }
  // Registers, then one heartbeat (which brings the peer list).
  void Connect() {
    EXPECT_FALSE(Link().Round().exit_code);
    EXPECT_FALSE(Link().Round().exit_code);
    ASSERT_EQ(Link().node_id(), "node-000000000000000000000007");
  }
  // Rounds every `step` (the round's wait while the head is away) with the head down, for `d`.
  void Down(absl::Duration d, absl::Duration step = absl::Milliseconds(200)) {
    head_.down = absl::UnavailableError("connection refused");
    for (absl::Duration t; t < d; t += step) {
      clock_.Advance(step);
      EXPECT_FALSE(Link().Round().exit_code);
    }
  }

  v1::NodeInfo node_;
  FakeHead head_, probe_;  // the Round thread's connection, and the one that answers peers
  FakeClock clock_;
  FakePeers peers_;
  FakeActors actors_;
  std::set<std::pair<int, int64_t>> gone_;  // processes the fake machine no longer runs
  std::optional<HeadLink> link_;
};

// A heartbeat reply may ask for a longer period (a large cluster): the link heartbeats at it,
// says in its rounds which it applies, and its death threshold (so T/10, the request timeout)
// grows with it. A peer's question (Contact) says none: only rounds adopt a period.
TEST_F(HeadLinkTest, AdoptsThePeriodAHeartbeatReplyAsksForAndSaysWhichItApplies) {
  Link().Round();  // registers: 500 ms
  head_.period_ms = 1500;
  EXPECT_EQ(Link().Round().wait, absl::Milliseconds(1500)) << "from this reply on";
  EXPECT_EQ(head_.last_request.period_ms(), 500) << "it applied 500 ms when it sent that heartbeat";
  Link().Round();
  EXPECT_EQ(head_.last_request.period_ms(), 1500);
  EXPECT_EQ(head_.last_timeout, absl::Milliseconds(600)) << "T/10 of 4 x 1.5 s";
  Link().Contact();
  EXPECT_EQ(probe_.last_request.period_ms(), 0);
}

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

TEST_F(HeadLinkTest, ANotFoundAnswerRenewsNothingAndTheNewRegistrationDropsTheOldList) {
  Connect();
  const size_t leases = actors_.leases.size();
  head_.forget = true;
  clock_.Advance(absl::Milliseconds(500));
  Link().Round();
  EXPECT_EQ(actors_.leases.size(), leases) << "the head may be waiting to restart these actors elsewhere";
  head_.forget = false;
  Link().Round();  // registers again
  Link().Round();
  EXPECT_EQ(head_.last_peers_version, 0u) << "the list from before is dropped; the head sends a fresh one";
}

// A one-way partition: the head cannot reach this worker to kill a start it lost track of,
// but the worker's heartbeats reach the head, and the reply asks.
TEST_F(HeadLinkTest, AStopAskedInAHeartbeatReplyIsMadeAndReportedWhileTheHeadStillAsks) {
  Connect();
  const ActorId actor = ActorId::Random();
  v1::ActorStart start;
  start.set_actor_id(actor.ToString());
  start.set_incarnation(3);
  v1::ActorStart bad;  // nonsense from the head is skipped, not obeyed
  bad.set_actor_id("not-an-actor");
  bad.set_incarnation(1);
  head_.stop = {start, bad};
  actors_.stop_works = false;  // still running after the try: not reported, asked again
  EXPECT_FALSE(Link().Round().exit_code);
  ASSERT_EQ(actors_.stop_starts.size(), 1u);
  EXPECT_EQ(actors_.stop_starts[0], std::make_pair(actor, int64_t{3}));
  EXPECT_FALSE(Link().Round().exit_code);
  EXPECT_EQ(head_.last_request.stopped_size(), 0);
  EXPECT_EQ(actors_.stop_starts.size(), 2u) << "tried again on the next reply";
  actors_.stop_works = true;
  EXPECT_FALSE(Link().Round().exit_code);  // stopped now
  EXPECT_FALSE(Link().Round().exit_code);  // reports it
  ASSERT_EQ(head_.last_request.stopped_size(), 1);
  EXPECT_EQ(head_.last_request.stopped(0).actor_id(), actor.ToString());
  EXPECT_EQ(head_.last_request.stopped(0).incarnation(), 3);
  EXPECT_EQ(actors_.stop_starts.size(), 3u) << "a start reported stopped is not stopped again";
  head_.stop.clear();                      // the head took note
  EXPECT_FALSE(Link().Round().exit_code);  // still reported: the reply had not come yet
  EXPECT_EQ(head_.last_request.stopped_size(), 1);
  EXPECT_FALSE(Link().Round().exit_code);
  EXPECT_EQ(head_.last_request.stopped_size(), 0) << "reported until the head stops asking";
}

TEST_F(HeadLinkTest, CutOffBeforeAnyListCameItFences) {
  EXPECT_FALSE(Link().Round().exit_code);  // registered; no heartbeat yet, so no list
  peers_.reaches = {{"peer-a:1", false}, {"peer-b:1", false}};
  Down(absl::Seconds(1));
  ASSERT_EQ(actors_.fences.size(), 1u) << "it cannot know who would support it";
  EXPECT_NE(actors_.fences[0].find("no peer list"), std::string::npos) << actors_.fences[0];
}

TEST_F(HeadLinkTest, ARegistrationRetriedAfterALostReplyStopsOnlyTheActorsFromBefore) {
  Connect();
  const std::vector<ActorId> old_actors = actors_.running;
  head_.forget = true;
  Link().Round();  // NotFound: the head declared the node dead
  head_.down = absl::DeadlineExceededError("the reply was lost");
  Link().Round();  // the head registered the node, the reply never came; it starts a new actor here
  actors_.running.push_back(ActorId::Random());
  head_.down = absl::OkStatus();
  head_.forget = false;
  head_.was_dead = true;  // the head says so again (no heartbeat since)
  Link().Round();
  EXPECT_EQ(actors_.stopped, old_actors)
      << "the actor started after the head said it did not know the node stays";
}

TEST_F(HeadLinkTest, ARefusedNodeExitsAndAnUnreachableHeadEndsTheWorkerAfterTheRetryWindow) {
  head_.down = absl::UnauthenticatedError("bad token");
  EXPECT_EQ(Link().Round().exit_code, 2);

  HeadLink patient(node_, head_, probe_, peers_, actors_, clock_,
                   HeadLinkOptions{"head:7420", absl::Seconds(300)});
  head_.down = absl::UnavailableError("connection refused");
  clock_.Advance(absl::Seconds(299));
  EXPECT_FALSE(patient.Round().exit_code);
  clock_.Advance(absl::Seconds(2));
  EXPECT_EQ(patient.Round().exit_code, 1);
}

TEST_F(HeadLinkTest, EachAnswerRenewsTheLeaseForNineTenthsOfTheDeathThreshold) {
  Connect();
  ASSERT_EQ(actors_.leases.size(), 2u) << "the registration and the heartbeat";
  EXPECT_EQ(actors_.leases.back(), absl::Milliseconds(1800)) << "0.9 of 2 s: before the head's threshold";
  clock_.Advance(absl::Milliseconds(500));
  Link().Round();
  EXPECT_EQ(actors_.leases.size(), 3u);
  EXPECT_EQ(actors_.leases.back(), absl::Milliseconds(1800));
  // A peer's question answered through the probe connection renews it too.
  clock_.Advance(absl::Milliseconds(100));
  Link().Contact();
  EXPECT_EQ(actors_.leases.size(), 4u);
  // Silent: no renewal, so the actors stop themselves 1.8 s after the last request answered,
  // even if this worker is frozen and cannot fence them.
  head_.down = absl::UnavailableError("connection refused");
  peers_.reaches = {{"peer-a:1", true}};
  clock_.Advance(absl::Milliseconds(200));
  Link().Round();
  EXPECT_EQ(actors_.leases.size(), 4u);
}

TEST_F(HeadLinkTest, WhileNoPeerReachesTheHeadEachRoundRenewsTheLease) {
  Connect();
  const size_t before = actors_.leases.size();
  peers_.reaches = {{"peer-a:1", false}, {"peer-b:1", false}};
  Down(absl::Milliseconds(1400));  // rounds at 1.0, 1.2 and 1.4 s ask the peers
  EXPECT_TRUE(actors_.fences.empty());
  ASSERT_EQ(actors_.leases.size(), before + 3);
  EXPECT_EQ(actors_.leases.back(), absl::Milliseconds(1800));
  // Once a peer reaches the head again the node fences, and renews nothing while fenced.
  peers_.reaches["peer-b:1"] = true;
  Down(absl::Milliseconds(600));
  EXPECT_EQ(actors_.fences.size(), 1u);
  EXPECT_EQ(actors_.leases.size(), before + 3);
  head_.down = absl::OkStatus();
  clock_.Advance(absl::Milliseconds(200));
  Link().Round();
  EXPECT_EQ(actors_.leases.size(), before + 4) << "the head answers: renewed again";
  EXPECT_EQ(actors_.leases.back(), absl::Milliseconds(1800));
}

TEST_F(HeadLinkTest, ALoneNodeRenewsItsLeaseWhileTheHeadIsAway) {
  head_.peers.clear();
  Connect();
  const size_t before = actors_.leases.size();
  Down(absl::Milliseconds(1000));
  EXPECT_TRUE(actors_.fences.empty());
  EXPECT_EQ(actors_.leases.size(), before + 1) << "renewed by the round at 1 s";
  EXPECT_EQ(actors_.leases.back(), absl::Milliseconds(1800));
}

TEST_F(HeadLinkTest, APeerMajorityKeepsTheActorsOnlyUntilTheHeadsKeepLimit) {
  head_.keep_ms = 1500;  // T = 2 s: no lease runs past 1.5 + 1.8 s after the last answer's request
  Connect();
  const absl::Time last_answered = clock_.Now();
  const size_t before = actors_.leases.size();
  peers_.reaches = {{"peer-a:1", false}, {"peer-b:1", false}};
  Down(absl::Milliseconds(1400));  // rounds at 1.0, 1.2 and 1.4 s keep the actors
  EXPECT_TRUE(actors_.fences.empty());
  ASSERT_EQ(actors_.leases.size(), before + 3);
  EXPECT_LE(clock_.Now() + actors_.leases.back(), last_answered + absl::Milliseconds(1500 + 1800));
  Down(absl::Milliseconds(400));  // 1.6 and 1.8 s: past the limit, whatever the peers say
  EXPECT_EQ(actors_.leases.size(), before + 3) << "renewed no more: the actors stop by 1.4 + 1.8 s";
  EXPECT_TRUE(actors_.fences.empty()) << "a head back before then finds them serving";
  peers_.reaches["peer-a:1"] = true;
  Down(absl::Milliseconds(200));
  EXPECT_EQ(actors_.fences.size(), 1u) << "a peer reaches the head: fenced at once, as always";
  head_.down = absl::OkStatus();
  clock_.Advance(absl::Milliseconds(200));
  Link().Round();
  EXPECT_EQ(actors_.leases.back(), absl::Milliseconds(1800)) << "the head answers: renewed again";
  EXPECT_FALSE(Link().fenced());
}

TEST_F(HeadLinkTest, TakesTheKeepLimitFromHeartbeatRepliesAndSaysWhichItApplies) {
  Connect();  // registered with a head that gave no limit
  EXPECT_EQ(head_.last_request.keep_ms(), 0);
  head_.keep_ms = 1500;  // a head restarted with a limit: the worker does not register again
  clock_.Advance(absl::Milliseconds(500));
  Link().Round();
  clock_.Advance(absl::Milliseconds(500));
  Link().Round();
  EXPECT_EQ(head_.last_request.keep_ms(), 1500) << "reported in the heartbeat after the one that brought it";
  head_.keep_ms = 0;  // a heartbeat reply without the field (or from a head that does not fence)
  clock_.Advance(absl::Milliseconds(500));
  Link().Round();
  clock_.Advance(absl::Milliseconds(500));
  Link().Round();
  EXPECT_EQ(head_.last_request.keep_ms(), 1500) << "a 0 in a heartbeat reply says nothing";
  peers_.reaches = {{"peer-a:1", false}, {"peer-b:1", false}};
  const size_t before = actors_.leases.size();
  Down(absl::Milliseconds(1400));
  EXPECT_EQ(actors_.leases.size(), before + 3);
  Down(absl::Milliseconds(200));
  EXPECT_EQ(actors_.leases.size(), before + 3) << "1.6 s after the last answer, past 1.5 s";
  // Registering again, it says the limit it applies until the reply brings the head's.
  head_.down = absl::OkStatus();
  head_.forget = true;
  clock_.Advance(absl::Milliseconds(200));
  Link().Round();  // NOT_FOUND: register again
  head_.forget = false;
  Link().Round();
  EXPECT_EQ(head_.registered_with.headless_keep_ms(), 1500);
}

TEST_F(HeadLinkTest, ALoneNodeKeepsItsActorsOnlyUntilTheKeepLimitToo) {
  head_.peers.clear();
  head_.keep_ms = 1100;
  Connect();
  const size_t before = actors_.leases.size();
  Down(absl::Milliseconds(1000));
  EXPECT_EQ(actors_.leases.size(), before + 1) << "renewed at 1 s";
  Down(absl::Milliseconds(400));
  EXPECT_EQ(actors_.leases.size(), before + 1) << "1.2 and 1.4 s after the last answer, past 1.1 s";
  EXPECT_TRUE(actors_.fences.empty());
}

TEST_F(HeadLinkTest, ReportsTheWorkerProcessesTheHeadAsksAboutThatAreGone) {
  Connect();
  v1::ProcessCheck dead, alive;
  dead.set_node_id("node-000000000000000000000003");
  dead.set_pid(41);
  dead.set_start_ticks(1000);
  alive = dead;
  alive.set_node_id("node-000000000000000000000004");
  alive.set_pid(42);
  gone_ = {{41, 1000}, {42, 999}};  // 42 runs, started at another time than 999
  head_.check = {dead, alive};
  clock_.Advance(absl::Milliseconds(500));
  Link().Round();
  EXPECT_EQ(head_.last_request.gone_size(), 0) << "checked when asked, reported in the next heartbeat";
  clock_.Advance(absl::Milliseconds(500));
  Link().Round();
  ASSERT_EQ(head_.last_request.gone_size(), 1);
  EXPECT_EQ(head_.last_request.gone(0).node_id(), dead.node_id());
  EXPECT_EQ(head_.last_request.gone(0).pid(), 41);
  EXPECT_EQ(head_.last_request.gone(0).start_ticks(), 1000);
  head_.check.clear();  // the head took note
  clock_.Advance(absl::Milliseconds(500));
  Link().Round();
  clock_.Advance(absl::Milliseconds(500));
  Link().Round();
  EXPECT_EQ(head_.last_request.gone_size(), 0) << "no longer asked: no longer reported";
}

TEST_F(HeadLinkTest, WithoutFencingTheLeaseHasNoLimit) {
  head_.misses = 0;  // a head with fewer than 4 misses does not ask nodes to fence
  Connect();
  ASSERT_FALSE(actors_.leases.empty());
  EXPECT_EQ(actors_.leases.back(), absl::InfiniteDuration());
}

TEST_F(HeadLinkTest, NoQuestionsBeforeFourTenthsOfTheDeathThreshold) {
  Connect();
  peers_.reaches = {{"peer-a:1", true}, {"peer-b:1", true}};
  Down(absl::Milliseconds(800));  // exactly 0.4 of 2 s
  EXPECT_EQ(peers_.asked, 0);
  EXPECT_TRUE(actors_.fences.empty());
}

TEST_F(HeadLinkTest, FencesWhenAPeerReachesTheHead) {
  Connect();
  peers_.reaches = {{"peer-a:1", false}, {"peer-b:1", true}};
  Down(absl::Seconds(1));
  ASSERT_EQ(actors_.fences.size(), 1u);
  EXPECT_NE(actors_.fences[0].find("peer peer-b:1 reaches it"), std::string::npos) << actors_.fences[0];
  EXPECT_NE(actors_.fences[0].find("node-000000000000000000000007"), std::string::npos);
  EXPECT_TRUE(Link().fenced());
  EXPECT_EQ(head_.reconnects, 1) << "the head was tried once more on a fresh connection first";
  EXPECT_EQ(head_.last_timeout, absl::Milliseconds(200)) << "requests to the head take at most T/10";
  EXPECT_EQ(peers_.last_timeout, absl::Milliseconds(400))
      << "a peer's answer (its own heartbeat) at most T/5";
  Down(absl::Seconds(5));
  EXPECT_EQ(actors_.fences.size(), 1u) << "nothing more to fence";
  actors_.running.push_back(ActorId::Random());  // a start that was on its way
  Down(absl::Milliseconds(200));
  EXPECT_EQ(actors_.fences.size(), 2u) << "an actor started while fenced is fenced too";
  head_.down = absl::OkStatus();
  Link().Round();
  EXPECT_FALSE(Link().fenced()) << "the head answers again";
}

TEST_F(HeadLinkTest, APeersWordIsCheckedOnAFreshConnectionBeforeFencing) {
  Connect();
  // The head restarted; peer-b is back with it, this node's connection is still in backoff.
  head_.fresh_connection_works = true;
  peers_.reaches = {{"peer-a:1", false}, {"peer-b:1", true}};
  Down(absl::Seconds(1));
  EXPECT_TRUE(actors_.fences.empty()) << "the head answers on a fresh connection";
  EXPECT_EQ(head_.reconnects, 1);
  EXPECT_FALSE(Link().fenced());
}

TEST_F(HeadLinkTest, WithoutTheHeadRoundsComeEveryTenthOfTheThreshold) {
  Connect();
  head_.down = absl::UnavailableError("connection refused");
  EXPECT_EQ(Link().Round().wait, absl::Milliseconds(200))
      << "not the 500 ms period: the fencing decision must "
         "not slip past the threshold";
}

TEST_F(HeadLinkTest, KeepsItsActorsWhileNoPeerReachesTheHeadAndFencesWhenOneDoes) {
  Connect();
  peers_.reaches = {{"peer-a:1", false}, {"peer-b:1", false}};
  Down(absl::Seconds(3));
  EXPECT_GT(peers_.asked, 0);
  EXPECT_TRUE(actors_.fences.empty()) << "the head is cut off from everyone: it declares nobody dead";
  peers_.reaches["peer-a:1"] = true;  // peer-a reaches the head again; this node does not
  Down(absl::Milliseconds(200));
  ASSERT_EQ(actors_.fences.size(), 1u);
  EXPECT_NE(actors_.fences[0].find("peer-a:1"), std::string::npos) << actors_.fences[0];
}

TEST_F(HeadLinkTest, KeepsItsActorsWithAMajorityBehindItAndFencesWithout) {
  Connect();
  peers_.reaches = {{"peer-a:1", false}};  // peer-b is unreachable (dead, or cut off)
  Down(absl::Seconds(3));
  EXPECT_TRUE(actors_.fences.empty()) << "2 of 3 nodes: the head cannot gather the 2 it needs";
  EXPECT_EQ(peers_.last_asker, kSelf) << "peers are told who asks";
  peers_.reaches.clear();
  Down(absl::Milliseconds(200));
  ASSERT_EQ(actors_.fences.size(), 1u) << "cut off from everything: the head may hear the other two";
  EXPECT_NE(actors_.fences[0].find("only 1 of the 3 nodes"), std::string::npos) << actors_.fences[0];
}

TEST_F(HeadLinkTest, TwoCutOffTogetherOutOfFiveFence) {
  // Five nodes: this one and peer-a cut off from the head, which hears the three others.
  head_.peers = {"peer-a:1", "peer-b:1", "peer-c:1", "peer-d:1"};
  Connect();
  peers_.reaches = {{"peer-a:1", false}};
  Down(absl::Seconds(1));
  ASSERT_EQ(actors_.fences.size(), 1u) << "2 of 5 is no majority: the head hears 3 and restarts them";
  EXPECT_NE(actors_.fences[0].find("only 2 of the 5 nodes"), std::string::npos) << actors_.fences[0];
}

TEST_F(HeadLinkTest, ThreeCutOffTogetherOutOfFiveKeepTheirActors) {
  head_.peers = {"peer-a:1", "peer-b:1", "peer-c:1", "peer-d:1"};
  Connect();
  peers_.reaches = {{"peer-a:1", false}, {"peer-b:1", false}};
  Down(absl::Seconds(3));
  EXPECT_TRUE(actors_.fences.empty()) << "3 of 5: the head, hearing 2, can confirm no death";
}

TEST_F(HeadLinkTest, APeerThatNoLongerListsThisNodeDoesNotCount) {
  Connect();
  // peer-a heard from the head that this node is dead: it will confirm the death, not support.
  peers_.reaches = {{"peer-a:1", false}, {"peer-b:1", false}};
  peers_.forgot_asker = {"peer-a:1"};
  Down(absl::Seconds(1));
  EXPECT_TRUE(actors_.fences.empty()) << "peer-b's support and its own: 2 of 3";
  peers_.forgot_asker.insert("peer-b:1");
  Down(absl::Milliseconds(200));
  EXPECT_EQ(actors_.fences.size(), 1u) << "1 of 3";
}

TEST_F(HeadLinkTest, ACutOffNodeThatCountsTheAskerAliveSaysSoAndTellsTheHeadForAThreshold) {
  Connect();
  EXPECT_TRUE(Link().Contact(PeerId("peer-a:1")).knows_asker());
  EXPECT_FALSE(Link().Contact("node-0000000000000000000000ff").knows_asker()) << "not on its list";
  Link().Round();
  EXPECT_EQ(head_.last_request.supports_size(), 0) << "it reached the head: no support given";

  probe_.down = absl::UnavailableError("connection refused");
  v1::HeadContactReply r = Link().Contact(PeerId("peer-a:1"));
  EXPECT_FALSE(r.reaches_head());
  EXPECT_TRUE(r.knows_asker());
  clock_.Advance(absl::Milliseconds(300));
  Link().Round();
  ASSERT_EQ(head_.last_request.supports_size(), 1) << "the support is reported with the next heartbeat";
  EXPECT_EQ(head_.last_request.supports(0).node_id(), PeerId("peer-a:1"));
  EXPECT_EQ(head_.last_request.supports(0).since_ms(), 300);
  clock_.Advance(absl::Milliseconds(1800));
  Link().Round();
  EXPECT_EQ(head_.last_request.supports_size(), 0) << "older than the death threshold (2 s): dropped";
}

TEST_F(HeadLinkTest, AskedByAPeerItSendsTheHeadAHeartbeatThereAndThen) {
  EXPECT_FALSE(Link().Contact().reaches_head()) << "not registered yet";
  Connect();
  const int before = probe_.heartbeats;
  EXPECT_TRUE(Link().Contact().reaches_head());
  EXPECT_EQ(probe_.heartbeats, before + 1) << "on its own connection, not the Round thread's";
  probe_.down = absl::UnavailableError("connection refused");
  clock_.Advance(absl::Milliseconds(300));
  v1::HeadContactReply r = Link().Contact();
  EXPECT_FALSE(r.reaches_head());
  EXPECT_EQ(r.since_head_contact_ms(), 300);
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
  HeadLink old(node_, head_, probe_, peers_, actors_, clock_,
               HeadLinkOptions{"head:7420", absl::ZeroDuration()});
  old.Round();
  old.Round();
  Down(absl::Seconds(60));
  for (int i = 0; i < 10; ++i) old.Round();
  EXPECT_TRUE(actors_.fences.empty());
}

}  // namespace
}  // namespace skyrl::worker
