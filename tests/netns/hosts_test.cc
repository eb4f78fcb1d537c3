// Partitions between real hosts: a head and three workers, each in its own network namespace
// (tests/util/netns.h), with the test process as a fifth host. Links are cut and healed while
// clients call an actor, and the tests check what the fencing rule promises
// (worker::HeadLink, head::NodeManager's isolation guard):
//   - a worker cut off from the head stops its actors before the head restarts them
//     elsewhere: no client, not even one beside the old incarnation, gets an answer from it
//     once the new incarnation is ALIVE; after healing the node rejoins with nothing left over;
//   - a head cut off from every worker loses nothing: actors keep serving throughout, and
//     after healing every node and actor is as it was;
//   - two workers cut off together from the head and the third keep their actors, which the
//     head (hearing one of three) does not restart elsewhere: at no time do two incarnations
//     run; after healing the nodes rejoin and the actor runs once.
//   - a worker the head cannot reach but that reaches the head (a one-way partition) gets a
//     kill through its heartbeat replies;
//   - with a short keep limit, two workers cut off together stop their actor past it, and
//     the head restarts it elsewhere only after that, with nobody left to confirm.
// And the RL job across hosts: weight sync between namespaces takes the TCP path, and the CLI
// and a job submission work from another host.
// Skipped, saying why, where network namespaces cannot be made (not root).
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "runtime/client/client.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"
#include "skyrl/node.grpc.pb.h"
#include "tests/util/netns.h"
#include "tests/util/paths.h"
#include "tests/util/processes.h"

namespace skyrl::testing {
namespace {

// The head declares a node dead after 200 ms x 10 = 2 s without a heartbeat.
constexpr int kHeartbeatMs = 200, kMisses = 10;
constexpr absl::Duration kDeathThreshold = absl::Milliseconds(kHeartbeatMs * kMisses);
constexpr int kHeadPort = 7420;

// One line of skyrl-call-probe's output.
struct Answer {
  int64_t unix_ms = 0;
  bool ok = false;
  std::string result;  // the pid that answered, when ok
};

std::vector<Answer> ProbeAnswers(const std::string& log) {
  std::vector<Answer> out;
  for (absl::string_view line : absl::StrSplit(ReadFileOrEmpty(log), '\n')) {
    std::vector<std::string> w = absl::StrSplit(line, absl::MaxSplits(' ', 2));
    Answer a;
    if (w.size() < 3 || !absl::SimpleAtoi(w[0], &a.unix_ms)) continue;
    a.ok = w[1] == "ok";
    a.result = w[2];
    out.push_back(a);
  }
  return out;
}

class PartitionTest : public ::testing::Test {
 protected:
  virtual std::string WorkerResources() const { return "CPU=1"; }
  // skyrl-head --headless-keep-ms; 0: the head's default.
  virtual int HeadKeepMs() const { return 0; }
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<NetnsLab>> lab = NetnsLab::Create(4);
    if (!lab.ok()) GTEST_SKIP() << "skipped: " << lab.status().message();
    lab_ = std::move(*lab);
    dir_ = MakeTempDir("partition");
    head_address_ = absl::StrCat(lab_->Address(0), ":", kHeadPort);
    SpawnOptions head;
    head.argv = {BinDir() + "/skyrl-head",
                 "--bind",
                 lab_->Address(0),
                 "--port",
                 std::to_string(kHeadPort),
                 "--heartbeat-period-ms",
                 std::to_string(kHeartbeatMs),
                 "--heartbeat-misses",
                 std::to_string(kMisses)};
    if (HeadKeepMs() > 0)
      head.argv.insert(head.argv.end(), {"--headless-keep-ms", std::to_string(HeadKeepMs())});
    head.log_path = dir_ + "/head.log";
    head.env_set = Env();
    absl::StatusOr<Subprocess> h = lab_->Start(0, head);
    ASSERT_TRUE(h.ok()) << h.status();
    processes_.push_back(std::move(*h));
    for (int i = 0; i < 200 && Token().empty(); ++i) absl::SleepFor(absl::Milliseconds(25));
    ASSERT_FALSE(Token().empty()) << "the head wrote no token; see " << head.log_path;
    for (int host = 1; host <= 3; ++host) {
      SpawnOptions w;
      w.argv = {BinDir() + "/skyrl-worker",
                "--head",
                head_address_,
                "--bind",
                lab_->Address(host),
                "--node-ip",
                lab_->Address(host),
                "--resources",
                WorkerResources(),
                "--labels",
                absl::StrCat("name=w", host)};
      w.log_path = WorkerLog(host);
      w.env_set = Env();
      absl::StatusOr<Subprocess> p = lab_->Start(host, w);
      ASSERT_TRUE(p.ok()) << p.status();
      processes_.push_back(std::move(*p));
    }
    ASSERT_TRUE(WaitForAliveNodes(3, absl::Seconds(30))) << "the workers did not register; logs in " << dir_;
    // A few heartbeats, so that every worker holds the list of its peers.
    absl::SleepFor(absl::Milliseconds(kHeartbeatMs * 3));
    ClientOptions o;
    o.call_timeout = absl::Seconds(1);
    o.restart_wait = absl::Seconds(1);
    absl::StatusOr<std::unique_ptr<Client>> c = Client::Connect(head_address_, Token(), o);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
  }

  void TearDown() override {
    client_.reset();
    processes_.clear();  // killed (SIGKILL) before their namespaces go
    lab_.reset();
    if (!HasFailure() && !dir_.empty()) std::filesystem::remove_all(dir_);
  }

  std::map<std::string, std::string> Env() const { return {{"HOME", dir_}, {"SKYRL_TOKEN", ""}}; }
  std::string Token() const {
    std::ifstream in(dir_ + "/.skyrl/token");
    std::string token;
    in >> token;
    return token;
  }
  std::string WorkerLog(int host) const { return absl::StrCat(dir_, "/w", host, ".log"); }

  bool WaitForAliveNodes(int n, absl::Duration timeout) {
    auto stub = v1::NodeService::NewStub(rpc::MakeChannel(head_address_));
    for (absl::Time deadline = absl::Now() + timeout; absl::Now() < deadline;
         absl::SleepFor(absl::Milliseconds(100))) {
      grpc::ClientContext ctx;
      rpc::PrepareCall(&ctx, Token(), absl::Seconds(1));
      v1::ListNodesReply reply;
      if (!stub->ListNodes(&ctx, {}, &reply).ok()) continue;
      int alive = 0;
      for (const v1::NodeInfo& node : reply.nodes()) alive += node.state() == v1::NODE_ALIVE;
      if (alive == n) return true;
    }
    return false;
  }

  // The host (1-3) whose address the actor's address starts with.
  int HostOf(const v1::ActorInfo& a) const {
    for (int host = 1; host <= 3; ++host)
      if (a.address().rfind(lab_->Address(host) + ":", 0) == 0) return host;
    return -1;
  }

  // An echo actor (CPU=1, restarts forever), where it runs and which process answers it.
  struct Echo {
    ActorHandle actor;
    v1::ActorInfo info;
    int host = -1;
    std::string pid;
  };
  void StartEcho(Echo* echo);

  // Cuts the host of a new actor off from the head: from everything, or from the head alone
  // (it still reaches its peers, which still reach the head); checks that no client, not even
  // one beside the old incarnation, is answered by it once the new one is ALIVE elsewhere, and
  // that after healing only the new one runs. `worker_log`: the cut-off worker's log.
  void CutAndCheck(bool head_only, std::string* worker_log);

  // The actor's processes on every host, once there is one (after at most 5 s).
  std::vector<int> SettledProcesses(const std::string& actor_id) {
    std::vector<int> pids;
    for (int i = 0; i < 100; ++i) {
      pids = ActorProcessesWithHome(dir_)[actor_id];
      if (pids.size() == 1) break;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return pids;
  }

  // A probe as below, once it has had its first answer (a failure of the test otherwise).
  Subprocess StartAnsweredProbe(int host, const std::string& actor_id, const std::string& log) {
    Subprocess probe = StartProbe(host, actor_id, log);
    for (int i = 0; i < 200 && ProbeAnswers(log).empty(); ++i) absl::SleepFor(absl::Milliseconds(25));
    EXPECT_FALSE(ProbeAnswers(log).empty()) << "the probe never answered";
    return probe;
  }

  // Cuts (or heals) hosts `a` and `b` off from the head and from `rest`: {a, b} | {head, rest}.
  void SplitPair(int a, int b, int rest, bool heal) {
    for (int side : {a, b})
      for (int other : {0, rest})
        ASSERT_TRUE((heal ? lab_->HealBetween(side, other) : lab_->CutBetween(side, other)).ok());
  }

  // skyrl-call-probe on `host`, calling the actor's "pid".
  Subprocess StartProbe(int host, const std::string& actor_id, const std::string& log) {
    SpawnOptions o;
    o.argv = {BinDir() + "/skyrl-call-probe",
              "--address",
              head_address_,
              "--token",
              Token(),
              "--actor",
              actor_id,
              "--interval-ms",
              "10",
              "--timeout-s",
              "0.5"};
    o.log_path = log;
    absl::StatusOr<Subprocess> p = lab_->Start(host, o);
    EXPECT_TRUE(p.ok()) << p.status();
    return std::move(*p);
  }

  std::unique_ptr<NetnsLab> lab_;
  std::string dir_, head_address_;
  std::vector<Subprocess> processes_;
  std::unique_ptr<Client> client_;
};

TEST_F(PartitionTest, AWorkerCutOffFromTheHeadStopsItsActorsBeforeTheyRestartElsewhere) {
  std::string log;
  CutAndCheck(/*head_only=*/false, &log);
  EXPECT_NE(log.find("only 1 of the 3 nodes"), std::string::npos) << log;
}

TEST_F(PartitionTest, AWorkerThatLostOnlyTheHeadFencesOnItsPeersWord) {
  std::string log;
  CutAndCheck(/*head_only=*/true, &log);
  EXPECT_NE(log.find("reaches it"), std::string::npos) << log;
}

void PartitionTest::StartEcho(Echo* echo) {
  v1::ActorSpec spec = ActorSpecFor("echo");
  spec.set_max_restarts(-1);
  absl::StatusOr<ActorHandle> actor = client_->CreateActor(spec);
  ASSERT_TRUE(actor.ok()) << actor.status();
  echo->actor = *actor;
  absl::StatusOr<v1::ActorInfo> info = client_->Describe(*actor);
  ASSERT_TRUE(info.ok()) << info.status();
  echo->info = *info;
  echo->host = HostOf(*info);
  ASSERT_GE(echo->host, 1) << info->address();
  absl::StatusOr<std::string> pid = client_->Call(*actor, "pid", "");
  ASSERT_TRUE(pid.ok()) << pid.status();
  echo->pid = *pid;
}

void PartitionTest::CutAndCheck(bool head_only, std::string* worker_log) {
  Echo echo;
  ASSERT_NO_FATAL_FAILURE(StartEcho(&echo));
  const std::optional<ActorHandle> actor = echo.actor;
  const std::optional<v1::ActorInfo> before = echo.info;
  const int host = echo.host;
  const std::optional<std::string> old_pid = echo.pid;

  // A client beside the old incarnation, on the host about to be cut off: it can still reach it.
  const std::string probe_log = dir_ + "/probe.log";
  Subprocess probe = StartProbe(host, actor->actor_id, probe_log);
  for (int i = 0; i < 200 && ProbeAnswers(probe_log).empty(); ++i) absl::SleepFor(absl::Milliseconds(25));
  ASSERT_FALSE(ProbeAnswers(probe_log).empty()) << "the probe never answered";

  const absl::Time cut = absl::Now();
  EXPECT_TRUE((head_only ? lab_->CutBetween(host, 0) : lab_->Cut(host)).ok());
  // The head declares the node dead and restarts the actor on another host; this process
  // (a fifth host) watches for the new incarnation.
  absl::Time alive_elsewhere = absl::InfiniteFuture(), answered_elsewhere = absl::InfiniteFuture();
  std::string new_pid;
  for (absl::Time deadline = cut + absl::Seconds(30); absl::Now() < deadline && new_pid.empty();) {
    absl::StatusOr<v1::ActorInfo> now = client_->Describe(*actor);
    if (now.ok() && now->state() == v1::ACTOR_ALIVE && now->node_id() != before->node_id())
      alive_elsewhere = std::min(alive_elsewhere, absl::Now());
    if (alive_elsewhere == absl::InfiniteFuture()) {
      absl::SleepFor(absl::Milliseconds(20));
      continue;
    }
    absl::StatusOr<std::string> pid = client_->Call(*actor, "pid", "");
    if (pid.ok() && *pid != *old_pid) {
      new_pid = *pid;
      answered_elsewhere = absl::Now();
    }
  }
  ASSERT_FALSE(new_pid.empty()) << "the actor never restarted on another host; logs in " << dir_;
  // The client follows it there within about a call timeout (1 s), not once its connection
  // to the cut-off host times out.
  EXPECT_LT(answered_elsewhere - alive_elsewhere, absl::Seconds(4));
  // The head heard the node last up to a period before the cut.
  EXPECT_GE(alive_elsewhere - cut, kDeathThreshold - absl::Milliseconds(kHeartbeatMs))
      << "restarted before the death threshold";
  absl::SleepFor(absl::Seconds(1));
  EXPECT_TRUE((head_only ? lab_->HealBetween(host, 0) : lab_->Heal(host)).ok());
  probe.Signal(SIGTERM).IgnoreError();
  probe.Wait();

  // The old incarnation's last answer came before the new one was ALIVE, and it never
  // answered again.
  int64_t last_old = 0, errors_after = 0;
  for (const Answer& a : ProbeAnswers(probe_log)) {
    if (a.ok && a.result == *old_pid) last_old = a.unix_ms;
    if (!a.ok && a.unix_ms > last_old) ++errors_after;
  }
  ASSERT_GT(last_old, 0);
  EXPECT_LT(absl::FromUnixMillis(last_old), alive_elsewhere)
      << "the old incarnation answered after the new one was ALIVE: two incarnations served at once";
  EXPECT_LT(absl::FromUnixMillis(last_old) - cut, kDeathThreshold) << "fenced only after the death threshold";
  EXPECT_GT(errors_after, 0) << "the probe beside the old incarnation saw it stop";
  std::printf(
      "cut at 0 ms; old incarnation's last answer at %lld ms; new one ALIVE (seen) at %lld ms, answering at "
      "%lld ms\n",
      (long long)absl::ToInt64Milliseconds(absl::FromUnixMillis(last_old) - cut),
      (long long)absl::ToInt64Milliseconds(alive_elsewhere - cut),
      (long long)absl::ToInt64Milliseconds(answered_elsewhere - cut));
  std::string log = ReadFileOrEmpty(WorkerLog(host));
  *worker_log = log;
  EXPECT_NE(log.find("fenced 1 actor(s)"), std::string::npos) << log;

  // Healed: the node is back, and only the new incarnation runs anywhere.
  EXPECT_TRUE(WaitForAliveNodes(3, absl::Seconds(15))) << "the cut-off node did not rejoin";
  const std::vector<int> pids = SettledProcesses(actor->actor_id);
  ASSERT_EQ(pids.size(), 1u);
  EXPECT_EQ(std::to_string(pids[0]), new_pid);
  absl::StatusOr<std::string> after = client_->Call(*actor, "pid", "");
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(*after, new_pid);
}

// A one-way partition: the worker reaches the head, the head cannot reach the worker. A kill
// cannot be sent to it, so the heartbeat replies ask for it.
TEST_F(PartitionTest, AKillReachesAWorkerTheHeadCannotReachThroughItsHeartbeats) {
  Echo echo;
  ASSERT_NO_FATAL_FAILURE(StartEcho(&echo));
  std::string worker_address;
  {
    auto stub = v1::NodeService::NewStub(rpc::MakeChannel(head_address_));
    grpc::ClientContext ctx;
    rpc::PrepareCall(&ctx, Token(), absl::Seconds(5));
    v1::ListNodesReply nodes;
    ASSERT_TRUE(stub->ListNodes(&ctx, {}, &nodes).ok());
    for (const v1::NodeInfo& n : nodes.nodes())
      if (n.node_id() == echo.info.node_id()) worker_address = n.address();
  }
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(worker_address.substr(worker_address.rfind(':') + 1), &port))
      << worker_address;
  ASSERT_TRUE(lab_->DropTcpTo(0, echo.host, port).ok());
  ASSERT_EQ(SettledProcesses(echo.actor.actor_id).size(), 1u);
  // DEAD at once; the head answers once its kill to the worker fails, which may take longer
  // than the client waits.
  absl::Status killed = client_->Kill(echo.actor);
  ASSERT_TRUE(killed.ok() || absl::IsDeadlineExceeded(killed)) << killed;
  std::vector<int> pids = {0};
  for (absl::Time deadline = absl::Now() + absl::Seconds(30); !pids.empty() && absl::Now() < deadline;
       absl::SleepFor(absl::Milliseconds(100)))
    pids = ActorProcessesWithHome(dir_)[echo.actor.actor_id];
  EXPECT_TRUE(pids.empty()) << "the killed actor still runs on the worker the head cannot reach";
  const std::string log = ReadFileOrEmpty(WorkerLog(echo.host));
  EXPECT_NE(log.find("as the head asked in a heartbeat reply"), std::string::npos) << log;
  EXPECT_TRUE(WaitForAliveNodes(3, absl::Seconds(1))) << "the node was never in doubt: it reaches the head";
  EXPECT_TRUE(lab_->UndropTcpTo(0, echo.host, port).ok());
}

TEST_F(PartitionTest, AHeadCutOffFromEveryWorkerLosesNoActor) {
  Echo echo;
  ASSERT_NO_FATAL_FAILURE(StartEcho(&echo));
  const std::optional<ActorHandle> actor = echo.actor;
  const std::optional<v1::ActorInfo> before = echo.info;
  const int host = echo.host;
  const std::optional<std::string> pid = echo.pid;
  // A caller on another worker's host, which keeps reaching the actor while the head is away.
  const int caller = host % 3 + 1;
  const std::string probe_log = dir_ + "/probe.log";
  Subprocess probe = StartProbe(caller, actor->actor_id, probe_log);
  for (int i = 0; i < 200 && ProbeAnswers(probe_log).empty(); ++i) absl::SleepFor(absl::Milliseconds(25));
  ASSERT_FALSE(ProbeAnswers(probe_log).empty());

  const absl::Time cut = absl::Now();
  ASSERT_TRUE(lab_->Cut(0).ok());
  absl::SleepFor(kDeathThreshold * 3);
  ASSERT_TRUE(lab_->Heal(0).ok());
  const absl::Time healed = absl::Now();
  ASSERT_TRUE(WaitForAliveNodes(3, absl::Seconds(15)));
  absl::SleepFor(kDeathThreshold);  // long enough for a wrongly declared death to show
  probe.Signal(SIGTERM).IgnoreError();
  probe.Wait();

  int during = 0;
  for (const Answer& a : ProbeAnswers(probe_log)) {
    EXPECT_TRUE(a.ok && a.result == *pid)
        << "at " << a.unix_ms - absl::ToUnixMillis(cut)
        << " ms after the cut: " << (a.ok ? "answered by pid " : "failed: ") << a.result;
    during += a.ok && absl::FromUnixMillis(a.unix_ms) > cut && absl::FromUnixMillis(a.unix_ms) < healed;
  }
  EXPECT_GT(during, 50) << "the actor kept serving while the head was away";
  absl::StatusOr<v1::ActorInfo> after = client_->Describe(*actor);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->state(), v1::ACTOR_ALIVE);
  EXPECT_EQ(after->restarts(), 0);
  EXPECT_EQ(after->address(), before->address());
  for (int w = 1; w <= 3; ++w)
    EXPECT_EQ(ReadFileOrEmpty(WorkerLog(w)).find("fenced"), std::string::npos) << "worker " << w;
  EXPECT_NE(ReadFileOrEmpty(dir_ + "/head.log").find("may be cut off"), std::string::npos);
  ASSERT_EQ(ActorProcessesWithHome(dir_)[actor->actor_id].size(), 1u);
}

TEST_F(PartitionTest, TwoWorkersCutOffTogetherKeepTheirActorsAndTheHeadRestartsNone) {
  Echo echo;
  ASSERT_NO_FATAL_FAILURE(StartEcho(&echo));
  const std::optional<ActorHandle> actor = echo.actor;
  const std::optional<v1::ActorInfo> before = echo.info;
  const std::optional<std::string> pid = echo.pid;
  // {host, partner} | {head, rest}: the head hears one worker of three.
  const int host = echo.host, partner = host % 3 + 1, rest = partner % 3 + 1;
  const std::string probe_log = dir_ + "/probe.log";
  Subprocess probe = StartAnsweredProbe(partner, actor->actor_id, probe_log);
  ASSERT_FALSE(HasFailure());

  const absl::Time cut = absl::Now();
  ASSERT_NO_FATAL_FAILURE(SplitPair(host, partner, rest, /*heal=*/false));
  // Long enough for the head to declare both dead; it must restart the actor nowhere.
  int most_processes = 0;
  for (absl::Time until = cut + kDeathThreshold * 4; absl::Now() < until;
       absl::SleepFor(absl::Milliseconds(50))) {
    most_processes = std::max<int>(most_processes, ActorProcessesWithHome(dir_)[actor->actor_id].size());
    absl::StatusOr<v1::ActorInfo> now = client_->Describe(*actor);
    ASSERT_TRUE(now.ok()) << now.status();
    EXPECT_EQ(now->restarts(), 0) << "restarted while its old incarnation may still serve";
    EXPECT_EQ(now->node_id(), before->node_id());
  }
  EXPECT_EQ(most_processes, 1) << "two incarnations ran at once";
  const std::string head_log = ReadFileOrEmpty(dir_ + "/head.log");
  EXPECT_NE(head_log.find("once 2 of the 2 peers it knows of have heard so"), std::string::npos) << head_log;
  const std::string worker_log = ReadFileOrEmpty(WorkerLog(host));
  EXPECT_NE(worker_log.find("keeping this node's actors"), std::string::npos) << worker_log;
  EXPECT_EQ(worker_log.find("fenced"), std::string::npos) << worker_log;
  const absl::Time healed = absl::Now();
  ASSERT_NO_FATAL_FAILURE(SplitPair(host, partner, rest, /*heal=*/true));

  // Healed: the nodes register again (their deaths are confirmed: the old actors stop and
  // restart through the head), and the actor runs once.
  EXPECT_TRUE(WaitForAliveNodes(3, absl::Seconds(15))) << "the cut-off nodes did not rejoin";
  std::string after_pid;
  for (absl::Time deadline = absl::Now() + absl::Seconds(15); absl::Now() < deadline && after_pid.empty();) {
    absl::StatusOr<std::string> p = client_->Call(*actor, "pid", "");
    if (p.ok()) after_pid = *p;
  }
  ASSERT_FALSE(after_pid.empty()) << "the actor does not answer after healing; logs in " << dir_;
  const std::vector<int> pids = SettledProcesses(actor->actor_id);
  ASSERT_EQ(pids.size(), 1u);
  EXPECT_EQ(std::to_string(pids[0]), after_pid);
  probe.Signal(SIGTERM).IgnoreError();
  probe.Wait();
  // The partner, beside it on the same side, was answered by the old incarnation throughout.
  int during = 0;
  for (const Answer& a : ProbeAnswers(probe_log)) {
    const absl::Time at = absl::FromUnixMillis(a.unix_ms);
    if (at > cut && at < healed) {
      EXPECT_TRUE(a.ok && a.result == *pid)
          << "at " << absl::ToInt64Milliseconds(at - cut) << " ms: " << a.result;
      ++during;
    }
  }
  EXPECT_GT(during, 50) << "the actor kept serving its side";
}

// With a keep limit of two thresholds: two workers cut off together keep their actor on each
// other's word only until K after their last answer, then stop it; the head, which can never
// gather the confirmations it would need, restarts it on the third host once no lease can
// run (K + T after it last heard them), and the old incarnation never answers after that.
class KeepLimitPartitionTest : public PartitionTest {
 protected:
  int HeadKeepMs() const override { return 2 * kHeartbeatMs * kMisses; }
};

TEST_F(KeepLimitPartitionTest, TwoWorkersCutOffTogetherStopTheirActorBeforeTheHeadRestartsItElsewhere) {
  Echo echo;
  ASSERT_NO_FATAL_FAILURE(StartEcho(&echo));
  const std::optional<ActorHandle> actor = echo.actor;
  const std::optional<v1::ActorInfo> before = echo.info;
  const std::optional<std::string> old_pid = echo.pid;
  const int host = echo.host, partner = host % 3 + 1, rest = partner % 3 + 1;
  const std::string probe_log = dir_ + "/probe.log";
  Subprocess probe = StartAnsweredProbe(partner, actor->actor_id, probe_log);
  ASSERT_FALSE(HasFailure());

  const absl::Time cut = absl::Now();
  ASSERT_NO_FATAL_FAILURE(SplitPair(host, partner, rest, /*heal=*/false));
  absl::Time alive_elsewhere = absl::InfiniteFuture();
  for (absl::Time deadline = cut + absl::Seconds(30); absl::Now() < deadline;
       absl::SleepFor(absl::Milliseconds(20))) {
    absl::StatusOr<v1::ActorInfo> now = client_->Describe(*actor);
    if (now.ok() && now->state() == v1::ACTOR_ALIVE && now->node_id() != before->node_id()) {
      alive_elsewhere = absl::Now();
      break;
    }
  }
  ASSERT_NE(alive_elsewhere, absl::InfiniteFuture()) << "never restarted elsewhere; logs in " << dir_;
  // Heard last up to a period before the cut: K + T after that at the earliest.
  const absl::Duration keep = absl::Milliseconds(HeadKeepMs());
  EXPECT_GE(alive_elsewhere - cut, keep + kDeathThreshold - absl::Milliseconds(kHeartbeatMs));
  EXPECT_LT(alive_elsewhere - cut, keep + kDeathThreshold + absl::Seconds(3)) << "not the retry window";
  absl::SleepFor(absl::Seconds(1));
  probe.Signal(SIGTERM).IgnoreError();
  probe.Wait();
  int64_t last_old = 0;
  for (const Answer& a : ProbeAnswers(probe_log))
    if (a.ok && a.result == *old_pid) last_old = std::max(last_old, a.unix_ms);
  ASSERT_GT(last_old, 0);
  EXPECT_LT(absl::FromUnixMillis(last_old), alive_elsewhere)
      << "the old incarnation answered after the new one was ALIVE: two incarnations served at once";
  EXPECT_GT(absl::FromUnixMillis(last_old) - cut, kDeathThreshold)
      << "kept on its partner's word past the death threshold, until the keep limit";
  std::printf("cut at 0 ms; old incarnation's last answer at %lld ms; new one ALIVE (seen) at %lld ms\n",
              (long long)absl::ToInt64Milliseconds(absl::FromUnixMillis(last_old) - cut),
              (long long)absl::ToInt64Milliseconds(alive_elsewhere - cut));
  EXPECT_NE(ReadFileOrEmpty(WorkerLog(host)).find("--headless-keep-ms"), std::string::npos);
  EXPECT_NE(ReadFileOrEmpty(dir_ + "/head.log").find("no lease its worker renewed"), std::string::npos);

  ASSERT_NO_FATAL_FAILURE(SplitPair(host, partner, rest, /*heal=*/true));
  EXPECT_TRUE(WaitForAliveNodes(3, absl::Seconds(15))) << "the cut-off nodes did not rejoin";
  // The client still knows the old address: its first calls fail over to the new one.
  std::string after_pid;
  for (absl::Time deadline = absl::Now() + absl::Seconds(15); absl::Now() < deadline && after_pid.empty();) {
    absl::StatusOr<std::string> p = client_->Call(*actor, "pid", "");
    if (p.ok()) after_pid = *p;
  }
  const std::vector<int> pids = SettledProcesses(actor->actor_id);
  ASSERT_EQ(pids.size(), 1u);
  EXPECT_EQ(std::to_string(pids[0]), after_pid);
}

// The RL job with its actors spread over three hosts (2 CPUs each for 5 one-CPU bundles),
// submitted with the CLI from this process's host.
class HostsGrpoTest : public PartitionTest {
 protected:
  std::string WorkerResources() const override { return "CPU=2"; }

  std::string Cli(const std::vector<std::string>& args, int* exit_code) {
    SpawnOptions o;
    o.argv = {BinDir() + "/skyrl", "--address", head_address_};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.log_path = dir_ + "/cli.out";
    std::remove(o.log_path.c_str());
    o.env_set = Env();
    absl::StatusOr<Subprocess> p = Subprocess::Start(o);
    EXPECT_TRUE(p.ok()) << p.status();
    std::optional<ExitInfo> e = p->WaitFor(absl::Minutes(3));
    *exit_code = e ? e->exit_code : -1;
    return ReadFileOrEmpty(o.log_path);
  }
};

TEST_F(HostsGrpoTest, TheJobRunsAcrossHostsAndSyncsWeightsOverTcp) {
  int code = -1;
  std::string status = Cli({"status"}, &code);
  EXPECT_EQ(code, 0) << status;
  EXPECT_NE(status.find("Nodes: 3 alive"), std::string::npos) << status;

  std::string config =
      ReadFileOrEmpty(std::string(SKYRL_SOURCE_DIR) + "/examples/grpo_copy_distributed.yaml");
  ASSERT_FALSE(config.empty());
  std::ofstream(dir_ + "/grpo.yaml") << config;
  std::string out = Cli({"job", "submit", "--", BinDir() + "/skyrl-grpo", "--config", dir_ + "/grpo.yaml",
                         "--steps", "4", "--output-dir", dir_ + "/grpo-out"},
                        &code);
  ASSERT_EQ(code, 0) << out;
  // Trainer shards and engines sit on different hosts (network namespaces): every weight-sync
  // connection is TCP, none the same-host Unix socket, and nothing is written directly. Each
  // bucket's checksum is verified by the receiver, so a step that synced delivered the bytes.
  EXPECT_NE(out.find("weight sync connections: "), std::string::npos) << out;
  EXPECT_NE(out.find(" over TCP, 0 over Unix sockets (same host), 0 bytes written"), std::string::npos)
      << out;
  EXPECT_EQ(out.find("weight sync connections: 0 over TCP"), std::string::npos) << out;
  EXPECT_NE(out.find("0 weight-sync fallbacks"), std::string::npos) << out;
}

}  // namespace
}  // namespace skyrl::testing
