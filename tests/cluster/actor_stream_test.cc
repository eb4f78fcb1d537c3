// Client::CallAsync over the actor's CallStream, against real processes: a head, a worker and
// actor hosts started by it.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <atomic>
#include <thread>

#include "absl/strings/str_split.h"
#include "tests/cluster/cluster_fixture.h"

namespace skyrl::testing {
namespace {

using Future = std::future<absl::StatusOr<std::string>>;

class ActorStreamTest : public ActorLifecycleTest {
 protected:
  void SetUp() override {
    ActorLifecycleTest::SetUp();
    head_.emplace(StartHead());
    worker_.emplace(StartWorker("w1", "CPU=8"));
    ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 1; }));
  }

  std::unique_ptr<Client> Connect(ClientOptions options = {}) {
    auto client = Client::Connect(address_, Token(), options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }

  // Waits for a future, failing the test (instead of hanging) after `limit`.
  static absl::StatusOr<std::string> Get(Future& f, absl::Duration limit = absl::Seconds(30)) {
    if (f.wait_for(absl::ToChronoSeconds(limit)) != std::future_status::ready)
      return absl::InternalError("test: no result within the limit (the call hangs)");
    return f.get();
  }

  std::optional<Subprocess> head_, worker_;  // the worker stops first
};

TEST_F(ActorStreamTest, ManyCallsInFlightCompleteWithTheirOwnResults) {
  auto client = Connect();
  auto echo = client->CreateActor("echo");
  ASSERT_TRUE(echo.ok()) << echo.status();
  std::vector<Future> inflight;
  for (int i = 0; i < 5000; ++i)
    inflight.push_back(client->CallAsync(*echo, "echo", absl::StrCat("call-", i, std::string(i % 200, 'x'))));
  for (int i = 0; i < 5000; ++i) {
    auto r = Get(inflight[i]);
    ASSERT_TRUE(r.ok()) << i << ": " << r.status();
    ASSERT_EQ(*r, absl::StrCat("call-", i, std::string(i % 200, 'x')));
  }

  // Streamed and unary calls of one client share the actor's state and its order.
  auto counter = client->CreateActor("counter");
  ASSERT_TRUE(counter.ok()) << counter.status();
  inflight.clear();
  for (int i = 0; i < 2000; ++i) {
    inflight.push_back(client->CallAsync(*counter, "add", "1"));
    if (i == 999) {
      auto mid = client->Call(*counter, "add", "1000");
      ASSERT_TRUE(mid.ok()) << mid.status();
      EXPECT_EQ(*mid, "2000") << "the sync call runs after the 1000 async calls made before it";
    }
  }
  for (auto& f : inflight) ASSERT_TRUE(Get(f).ok());
  EXPECT_EQ(*client->Call(*counter, "get", ""), "3000");

  // A method error is that call's result; its neighbours are unaffected, and a call refused
  // before running (no such method) still takes its turn in the caller's order.
  absl::Time t0 = absl::Now();
  Future bad = client->CallAsync(*counter, "add", "x");
  Future nope = client->CallAsync(*counter, "no-such-method", "");
  Future good = client->CallAsync(*counter, "add", "1");
  auto b = Get(bad);
  EXPECT_TRUE(absl::IsInvalidArgument(b.status())) << b.status();
  EXPECT_NE(b.status().message().find("not an integer"), std::string::npos) << b.status();
  auto n = Get(nope);
  EXPECT_TRUE(absl::IsUnimplemented(n.status())) << n.status();
  EXPECT_NE(n.status().message().find("it has: add, get"), std::string::npos) << n.status();
  auto g = Get(good);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(*g, "3001");
  EXPECT_LT(absl::Now() - t0, absl::Seconds(3)) << "a refused call held its successors in line";
  auto unary_nope = client->Call(*counter, "no-such-method", "");
  EXPECT_TRUE(absl::IsUnimplemented(unary_nope.status())) << unary_nope.status();
  t0 = absl::Now();
  EXPECT_EQ(*client->Call(*counter, "get", ""), "3001");
  EXPECT_LT(absl::Now() - t0, absl::Seconds(3)) << "a refused unary call held its successors in line";
}

TEST_F(ActorStreamTest, OneCallersOrderHoldsAcrossBatchesWithMaxConcurrencyOne) {
  auto client = Connect();
  auto log = client->CreateActor("echo");
  ASSERT_TRUE(log.ok()) << log.status();
  // Bursts with pauses between them: the calls travel in many batches of varying size.
  std::vector<Future> inflight;
  std::string expected;
  for (int burst = 0, i = 0; burst < 40; ++burst) {
    for (int k = 0; k < 1 + burst * 3; ++k, ++i) {
      inflight.push_back(client->CallAsync(*log, "log", std::to_string(i)));
      absl::StrAppend(&expected, i ? "," : "", i);
    }
    absl::SleepFor(absl::Microseconds(200 * (burst % 4)));
  }
  for (auto& f : inflight) ASSERT_TRUE(Get(f).ok());
  auto history = client->Call(*log, "history", "");
  ASSERT_TRUE(history.ok()) << history.status();
  EXPECT_EQ(*history, expected);

  // Four threads of one client: each thread's calls run in the order that thread made them.
  auto log2 = client->CreateActor("echo");
  ASSERT_TRUE(log2.ok()) << log2.status();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::vector<Future> mine;
      for (int i = 0; i < 300; ++i) mine.push_back(client->CallAsync(*log2, "log", absl::StrCat(t, ".", i)));
      for (auto& f : mine) EXPECT_TRUE(Get(f).ok());
    });
  for (auto& th : threads) th.join();
  auto all = client->Call(*log2, "history", "");
  ASSERT_TRUE(all.ok()) << all.status();
  std::vector<int> next(4, 0);
  int seen = 0;
  for (absl::string_view entry : absl::StrSplit(*all, ',')) {
    int t = entry[0] - '0';
    ASSERT_GE(t, 0);
    ASSERT_LT(t, 4);
    ASSERT_EQ(entry, absl::StrCat(t, ".", next[t])) << "thread " << t << " out of order";
    ++next[t];
    ++seen;
  }
  EXPECT_EQ(seen, 1200);
}

TEST_F(ActorStreamTest, ACallPastItsDeadlineFailsWhileTheStreamGoesOn) {
  auto client = Connect();
  v1::ActorSpec two = ActorSpecFor("sleep");
  two.set_max_concurrency(2);
  auto sleeper = client->CreateActor(two);
  ASSERT_TRUE(sleeper.ok()) << sleeper.status();
  Future warm = client->CallAsync(*sleeper, "sleep", "1");
  ASSERT_TRUE(Get(warm).ok());
  absl::Time t0 = absl::Now();
  Future slow = client->CallAsync(*sleeper, "sleep", "3000", absl::Milliseconds(300));
  Future other = client->CallAsync(*sleeper, "sleep", "1000", absl::Seconds(30));
  auto s = Get(slow);
  absl::Duration waited = absl::Now() - t0;
  EXPECT_TRUE(absl::IsDeadlineExceeded(s.status())) << s.status();
  EXPECT_NE(s.status().message().find("call to \"sleep\" got no result within 300ms"), std::string::npos)
      << s.status();
  EXPECT_GE(waited, absl::Milliseconds(300));
  EXPECT_LT(waited, absl::Milliseconds(2000)) << "the deadline, not the 3 s sleep, ended the call";
  // The call in flight beside it on the same stream still gets its result...
  auto o = Get(other);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(*o, "1000");
  // ... and so do later ones.
  Future after = client->CallAsync(*sleeper, "sleep", "5");
  auto a = Get(after);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, "5");
}

TEST_F(ActorStreamTest, ACrashMidBatchFailsEveryCallInFlightAndLaterCallsFollowTheRestart) {
  auto client = Connect();
  v1::ActorSpec once = ActorSpecFor("crash");
  once.set_max_restarts(1);
  auto actor = client->CreateActor(once);
  ASSERT_TRUE(actor.ok()) << actor.status();
  ASSERT_TRUE(client->Call(*actor, "ping", "").ok());
  // The process SIGKILLs itself in the middle of what the stream carries.
  std::vector<Future> before, after;
  for (int i = 0; i < 300; ++i) before.push_back(client->CallAsync(*actor, "ping", ""));
  Future crash = client->CallAsync(*actor, "crash", "signal 9");
  for (int i = 0; i < 300; ++i) after.push_back(client->CallAsync(*actor, "ping", ""));

  auto c = Get(crash);
  EXPECT_TRUE(absl::IsUnavailable(c.status())) << c.status();
  EXPECT_NE(c.status().message().find("actor died: "), std::string::npos) << c.status();
  EXPECT_NE(c.status().message().find("signal 9"), std::string::npos) << c.status();
  for (auto& f : after) {
    auto r = Get(f);
    ASSERT_FALSE(r.ok()) << "a call behind the crash cannot have run";
    ASSERT_EQ(r.status(), c.status()) << "every call the stream carried gets the same explanation";
  }
  // Calls before the crash ran; their results may have been lost with the process.
  for (auto& f : before) {
    auto r = Get(f);
    if (r.ok()) {
      EXPECT_EQ(*r, "pong");
    } else {
      EXPECT_EQ(r.status(), c.status());
    }
  }
  // After the restart, both paths reach the new process.
  auto pong = client->Call(*actor, "ping", "");
  ASSERT_TRUE(pong.ok()) << pong.status();
  std::vector<Future> again;
  for (int i = 0; i < 100; ++i) again.push_back(client->CallAsync(*actor, "ping", ""));
  for (auto& f : again) {
    auto r = Get(f);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(*r, "pong");
  }
}

TEST_F(ActorStreamTest, KillingTheActorOrDroppingTheClientEndsCallsInFlight) {
  auto client = Connect();
  auto sleeper = client->CreateActor("sleep");
  ASSERT_TRUE(sleeper.ok()) << sleeper.status();
  // The host stops on SIGTERM: the running call and those queued behind it are answered
  // with the reason the head gives.
  std::vector<Future> inflight;
  for (int i = 0; i < 20; ++i) inflight.push_back(client->CallAsync(*sleeper, "sleep", "1000"));
  absl::SleepFor(absl::Milliseconds(200));
  absl::Time t0 = absl::Now();
  ASSERT_TRUE(client->Kill(*sleeper).ok());
  int died = 0;
  for (auto& f : inflight) {
    auto r = Get(f);
    if (r.ok()) continue;  // the call that was running may finish first
    EXPECT_NE(r.status().message().find("killed by the user"), std::string::npos) << r.status();
    ++died;
  }
  EXPECT_GE(died, 18);
  EXPECT_LT(absl::Now() - t0, absl::Seconds(8));

  // Destroying the client fails what it still waits for, at once.
  auto second = client->CreateActor("sleep");
  ASSERT_TRUE(second.ok()) << second.status();
  inflight.clear();
  for (int i = 0; i < 50; ++i) inflight.push_back(client->CallAsync(*second, "sleep", "2000"));
  absl::SleepFor(absl::Milliseconds(100));
  t0 = absl::Now();
  client.reset();
  EXPECT_LT(absl::Now() - t0, absl::Seconds(1)) << "the client waited for its calls";
  for (auto& f : inflight) {
    auto r = Get(f, absl::Seconds(1));
    EXPECT_TRUE(absl::IsCancelled(r.status())) << r.status();
  }
}

// The process of an actor on this machine: the one whose environment names it.
pid_t ActorPid(const std::string& actor_id) {
  const std::string want = "SKYRL_ACTOR_ID=" + actor_id;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::ifstream in(entry.path() / "environ", std::ios::binary);
    std::string var;
    while (std::getline(in, var, '\0'))
      if (var == want) return pid_t(std::atoi(entry.path().filename().c_str()));
  }
  return 0;
}

// SIGSTOP takes effect asynchronously, thread by thread: true once every thread of `pid` is
// stopped (state T in /proc/<pid>/task/*/stat), false if that does not happen within `limit`.
bool WaitStopped(pid_t pid, absl::Duration limit) {
  const absl::Time deadline = absl::Now() + limit;
  while (absl::Now() < deadline) {
    bool all = true, any = false;
    std::error_code ec;
    for (const auto& task : std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/task"), ec)) {
      std::ifstream in(task.path() / "stat");
      std::string line;
      std::getline(in, line);
      const size_t close = line.rfind(')');  // the command name may hold spaces and parentheses
      if (close == std::string::npos || close + 2 >= line.size()) continue;
      any = true;
      if (line[close + 2] != 'T' && line[close + 2] != 't') all = false;
    }
    if (any && all) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return false;
}

TEST_F(ActorStreamTest, AFrozenActorFailsCallsInFlightWithoutWaitingForTheirDeadlines) {
  ClientOptions options;
  options.keepalive_time = absl::Seconds(5);
  options.keepalive_timeout = absl::Seconds(1);
  auto client = Connect(options);
  auto echo = client->CreateActor("echo");
  ASSERT_TRUE(echo.ok()) << echo.status();
  Future warm = client->CallAsync(*echo, "echo", "warm");
  ASSERT_TRUE(Get(warm).ok());
  pid_t pid = ActorPid(echo->actor_id);
  ASSERT_GT(pid, 0);
  // A stopped process keeps its socket open (the kernel still acknowledges), as a machine
  // cut off from the network does: only an unanswered HTTP/2 ping tells.
  ASSERT_EQ(kill(pid, SIGSTOP), 0);
  // Calls made before every thread stopped could still be answered (seen once under load).
  ASSERT_TRUE(WaitStopped(pid, absl::Seconds(10))) << "actor process " << pid << " did not stop";
  absl::Time t0 = absl::Now();
  std::vector<Future> inflight;
  for (int i = 0; i < 10; ++i) inflight.push_back(client->CallAsync(*echo, "echo", "x"));
  for (auto& f : inflight) {
    auto r = Get(f, absl::Seconds(40));
    EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
    EXPECT_NE(r.status().message().find("unreachable"), std::string::npos) << r.status();
  }
  EXPECT_LT(absl::Now() - t0, absl::Seconds(20)) << "the calls waited for their 60 s deadlines";
  kill(pid, SIGCONT);
  EXPECT_TRUE(absl::IsInvalidArgument(
      Client::Connect(address_, Token(), {.keepalive_time = absl::Seconds(1)}).status()));
}

TEST_F(ActorStreamTest, LargeArgsGoInPartsAndBigBatchesAreSplit) {
  ClientOptions options;
  options.max_message_bytes = 1 << 20;
  options.max_call_bytes = 8 << 20;
  auto client = Connect(options);
  auto echo = client->CreateActor("echo");
  ASSERT_TRUE(echo.ok()) << echo.status();
  // Args of 2.5 MiB, over a channel that refuses any message above 1 MiB: three parts each,
  // from four threads at once with small calls between; every result equals its args.
  std::vector<std::thread> threads;
  std::atomic<int> equal{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::string big((5 << 20) / 2, char('a' + t));
      big[t] = '!';
      Future large = client->CallAsync(*echo, "echo", big);
      Future small = client->CallAsync(*echo, "echo", std::to_string(t));
      auto l = Get(large);
      auto s = Get(small);
      if (l.ok() && *l == big && s.ok() && *s == std::to_string(t)) ++equal;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(equal.load(), 4);
  // Over max_call_bytes: refused before anything is sent, naming the limit.
  auto over = client->Call(*echo, "echo", std::string((8 << 20) + 1, 'a'));
  EXPECT_TRUE(absl::IsResourceExhausted(over.status())) << over.status();
  EXPECT_NE(over.status().message().find("ClientOptions.max_call_bytes"), std::string::npos) << over.status();
  EXPECT_TRUE(absl::IsInvalidArgument(client->Call(*echo, std::string(1 << 20, 'm'), "").status()));
  // Results: 6 MiB comes back whole (one message from the host), 9 MiB is over this client's
  // limit and fails alone; the stream goes on.
  auto six = client->Call(*echo, "fill", std::to_string(6 << 20));
  ASSERT_TRUE(six.ok()) << six.status();
  EXPECT_EQ(six->size(), size_t{6} << 20);
  auto nine = client->Call(*echo, "fill", std::to_string(9 << 20));
  EXPECT_TRUE(absl::IsResourceExhausted(nine.status())) << nine.status();
  EXPECT_NE(nine.status().message().find("over this client's limit"), std::string::npos) << nine.status();
  auto after = client->Call(*echo, "echo", "after");
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(*after, "after");

  // Eight calls of 400 KB in flight: the channel refuses any message over 1 MiB, so they
  // only arrive if the stream splits them into batches below it.
  std::vector<Future> inflight;
  for (int i = 0; i < 8; ++i)
    inflight.push_back(client->CallAsync(*echo, "echo", std::string(400 << 10, char('a' + i))));
  for (int i = 0; i < 8; ++i) {
    auto r = Get(inflight[i]);
    ASSERT_TRUE(r.ok()) << i << ": " << r.status();
    EXPECT_EQ(*r, std::string(400 << 10, char('a' + i)));
  }
  EXPECT_TRUE(
      absl::IsInvalidArgument(Client::Connect(address_, Token(), {.max_message_bytes = 100}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      Client::Connect(address_, Token(), {.max_message_bytes = 1 << 20, .max_call_bytes = 1000}).status()));
}

}  // namespace
}  // namespace skyrl::testing
