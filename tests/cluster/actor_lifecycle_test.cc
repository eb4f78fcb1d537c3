// Actors through the head: placement, restarts, deaths and their reasons, the client.
#include "tests/cluster/cluster_fixture.h"

#include <filesystem>
#include <iterator>

#include "runtime/store/store.h"

namespace skyrl::testing {
namespace {

TEST_F(ActorLifecycleTest, CrashedActorRestartsUntilItsRestartsAreSpent) {
  Subprocess head = StartHead();
  Subprocess w1 = StartWorker("w1", "CPU=4");
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 1; }));
  grpc::Status s;
  v1::ActorInfo a = Create("crash", 1, &s);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(a.state(), v1::ACTOR_ALIVE) << a.ShortDebugString();
  std::string out;
  ASSERT_TRUE(CallActor(a, "ping", "", &out).ok());

  EXPECT_FALSE(CallActor(a, "crash", "signal 9").ok()) << "the call in flight fails";
  v1::ActorInfo restarted = WaitActor(
      a.actor_id(), [](const auto& x) { return x.state() == v1::ACTOR_ALIVE && x.restarts() == 1; });
  EXPECT_NE(restarted.death_reason().find("killed by signal 9"), std::string::npos)
      << restarted.death_reason();
  ASSERT_TRUE(CallActor(restarted, "ping", "", &out).ok()) << "calls after the restart succeed";

  EXPECT_FALSE(CallActor(restarted, "crash", "exit 4").ok());
  v1::ActorInfo dead = WaitActor(a.actor_id(), [](const auto& x) { return x.state() == v1::ACTOR_DEAD; });
  EXPECT_NE(dead.death_reason().find("exit code 4"), std::string::npos) << dead.death_reason();
  EXPECT_NE(dead.death_reason().find("no restarts left"), std::string::npos) << dead.death_reason();
  EXPECT_NE(dead.death_reason().find("exiting with code 4 on request"), std::string::npos)
      << "the death reason carries the last log lines: " << dead.death_reason();
}

TEST_F(ActorLifecycleTest, ActorsOfAKilledWorkerRestartOnAnotherNode) {
  Subprocess head = StartHead();
  Subprocess w1 = StartWorker("w1", "CPU=4");
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 1; }));
  grpc::Status s;
  v1::ActorInfo a = Create("echo", 3, &s);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(a.state(), v1::ACTOR_ALIVE);
  Subprocess w2 = StartWorker("w2", "CPU=4");
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 2; }));
  w1.Signal(SIGKILL).IgnoreError();
  w1.Wait();
  v1::ActorInfo moved = WaitActor(a.actor_id(), [&](const auto& x) {
    return x.state() == v1::ACTOR_ALIVE && x.node_id() != a.node_id();
  });
  EXPECT_EQ(moved.restarts(), 1);
  EXPECT_NE(moved.death_reason().find("node lost"), std::string::npos) << moved.death_reason();
  std::string out;
  EXPECT_TRUE(CallActor(moved, "echo", "hi", &out).ok());
  EXPECT_EQ(out, "hi");
}

TEST_F(ActorLifecycleTest, ARestartWaitsForANodeWithRoom) {
  Subprocess head = StartHead();
  Subprocess w1 = StartWorker("w1", "CPU=1");
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 1; }));
  grpc::Status s;
  v1::ActorInfo a = Create("echo", 2, &s);
  ASSERT_TRUE(s.ok()) << s.error_message();
  w1.Signal(SIGKILL).IgnoreError();
  w1.Wait();
  v1::ActorInfo waiting =
      WaitActor(a.actor_id(), [](const auto& x) { return x.state() == v1::ACTOR_RESTARTING; });
  EXPECT_NE(waiting.death_reason().find("node lost"), std::string::npos) << waiting.death_reason();
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_EQ(Get(a.actor_id()).state(), v1::ACTOR_RESTARTING) << "no node has room: it waits";
  Subprocess w2 = StartWorker("w2", "CPU=1");
  v1::ActorInfo back = WaitActor(a.actor_id(), [](const auto& x) { return x.state() == v1::ACTOR_ALIVE; });
  EXPECT_NE(back.node_id(), a.node_id());
  std::string out;
  EXPECT_TRUE(CallActor(back, "echo", "again", &out).ok());
  EXPECT_EQ(out, "again");
}

TEST_F(ActorLifecycleTest, ConstructorErrorsInfeasibleRequestsAndKillsAreReported) {
  Subprocess head = StartHead();
  Subprocess w1 = StartWorker("w1", "CPU=2,GPU=0");
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 1; }));
  grpc::Status s;
  v1::ActorInfo bad = Create("crash", 5, &s, "fail");
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(bad.state(), v1::ACTOR_DEAD);
  EXPECT_NE(bad.death_reason().find("told to fail in its constructor"), std::string::npos)
      << bad.death_reason();

  Create("echo", 0, &s, "", "1");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("needs CPU=1,GPU=1"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("free"), std::string::npos) << s.error_message();

  v1::ActorInfo a = Create("echo", 3, &s);
  ASSERT_TRUE(s.ok());
  auto dir = v1::ActorDirectory::NewStub(rpc::MakeChannel(address_));
  v1::KillActorByIdRequest kill;
  kill.set_actor_id(a.actor_id());
  v1::KillActorByIdReply killed;
  ASSERT_TRUE(Authed([&](grpc::ClientContext* c) { return dir->KillActor(c, kill, &killed); }).ok());
  v1::ActorInfo dead = Get(a.actor_id());
  EXPECT_EQ(dead.state(), v1::ACTOR_DEAD);
  EXPECT_EQ(dead.death_reason(), "killed by the user");
  grpc::Status after;
  for (int i = 0; i < 100 && (after = CallActor(a, "echo", "x")).ok(); ++i)
    absl::SleepFor(absl::Milliseconds(20));
  EXPECT_FALSE(after.ok());
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(Get(a.actor_id()).state(), v1::ACTOR_DEAD) << "a killed actor is not restarted";
  int code = -1;
  std::string status = RunCli({"status"}, &code);
  EXPECT_EQ(code, 0) << status;
  EXPECT_NE(status.find("Actors: 2 (DEAD 2)"), std::string::npos) << status;
  EXPECT_NE(status.find("told to fail in its constructor"), std::string::npos) << status;
  EXPECT_NE(status.find("killed by the user"), std::string::npos) << status;
  std::string json = RunCli({"list", "actors", "--json"}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_NE(json.find("\"class\": \"echo\""), std::string::npos) << json;
}

TEST_F(ActorLifecycleTest, ActorsKeepServingThroughAHeadRestartOnRedis) {
  auto redis = testing::RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  Subprocess head = StartHead((*redis)->url());
  Subprocess w1 = StartWorker("w1", "CPU=2");
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 1; }));
  grpc::Status s;
  v1::ActorInfo a = Create("counter", 0, &s);
  ASSERT_TRUE(s.ok()) << s.error_message();
  std::string out;
  ASSERT_TRUE(CallActor(a, "add", "1", &out).ok());
  int code = -1;
  std::string status = RunCli({"status"}, &code);
  EXPECT_NE(status.find("Actors: 1 (ALIVE 1)"), std::string::npos) << status;
  EXPECT_NE(status.find("CPU=1"), std::string::npos) << "the USED column: " << status;
  head.Signal(SIGKILL).IgnoreError();
  head.Wait();
  // With no head at all, the actor still answers: calls never go through the head.
  ASSERT_TRUE(CallActor(a, "add", "1", &out).ok());
  EXPECT_EQ(out, "2");
  Subprocess restarted = StartHead((*redis)->url());
  v1::ActorInfo back = WaitActor(a.actor_id(), [](const auto& x) { return x.state() == v1::ACTOR_ALIVE; });
  EXPECT_EQ(back.address(), a.address());
  ASSERT_TRUE(CallActor(back, "add", "1", &out).ok());
  EXPECT_EQ(out, "3") << "the same process, with its state, kept running";
}

TEST_F(ActorLifecycleTest, ClientCreatesFindsCallsAndKillsActors) {
  Subprocess head = StartHead();
  Subprocess w1 = StartWorker("w1", "CPU=4");
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 1; }));
  auto client = Client::Connect(address_, Token());
  ASSERT_TRUE(client.ok()) << client.status();
  v1::ActorSpec tally = ActorSpecFor("counter");
  tally.set_name("tally");
  auto counter = (*client)->CreateActor(tally);
  ASSERT_TRUE(counter.ok()) << counter.status();
  auto found = (*client)->GetActor("tally");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->actor_id, counter->actor_id);
  EXPECT_TRUE(absl::IsAlreadyExists((*client)->CreateActor(tally).status()));

  auto one = (*client)->Call(*counter, "add", "1");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(*one, "1");
  std::vector<std::future<absl::StatusOr<std::string>>> inflight;
  for (int i = 0; i < 1000; ++i) inflight.push_back((*client)->CallAsync(*counter, "add", "1"));
  for (auto& f : inflight) ASSERT_TRUE(f.get().ok());
  EXPECT_EQ(*(*client)->Call(*counter, "get", ""), "1001");

  // Calls from one caller to a max_concurrency-1 actor run in the order they were made.
  auto log = (*client)->CreateActor("echo");
  ASSERT_TRUE(log.ok()) << log.status();
  std::vector<std::future<absl::StatusOr<std::string>>> ordered;
  std::string expected;
  for (int i = 0; i < 300; ++i) {
    ordered.push_back((*client)->CallAsync(*log, "log", std::to_string(i)));
    absl::StrAppend(&expected, i ? "," : "", i);
  }
  for (auto& f : ordered) ASSERT_TRUE(f.get().ok());
  EXPECT_EQ(*(*client)->Call(*log, "history", ""), expected);

  v1::ActorSpec bad_args = ActorSpecFor("counter");
  bad_args.set_init_args("nope");
  auto ctor = (*client)->CreateActor(bad_args);
  EXPECT_TRUE(absl::IsFailedPrecondition(ctor.status())) << ctor.status();
  EXPECT_NE(ctor.status().message().find("is not an integer"), std::string::npos) << ctor.status();

  // Protobuf messages as arguments and results.
  v1::KvPutRequest message;
  message.set_key("k");
  message.set_value(std::string("\0v", 2));
  auto echoed = (*client)->CallProto<v1::KvPutRequest>(*log, "echo", message);
  ASSERT_TRUE(echoed.ok()) << echoed.status();
  EXPECT_EQ(echoed->value(), std::string("\0v", 2));

  ASSERT_TRUE((*client)->Kill(*counter).ok());
  auto after = (*client)->Call(*counter, "get", "");
  EXPECT_TRUE(absl::IsFailedPrecondition(after.status())) << after.status();
  EXPECT_NE(after.status().message().find("actor is dead: killed by the user"), std::string::npos)
      << after.status();
}

TEST_F(ActorLifecycleTest, ClientSaysWhyACallFailedAndFollowsTheRestart) {
  Subprocess head = StartHead();
  Subprocess w1 = StartWorker("w1", "CPU=2");
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 1; }));
  auto client = Client::Connect(address_, Token());
  ASSERT_TRUE(client.ok());
  v1::ActorSpec once = ActorSpecFor("crash");
  once.set_max_restarts(1);
  auto actor = (*client)->CreateActor(once);
  ASSERT_TRUE(actor.ok()) << actor.status();
  auto died = (*client)->Call(*actor, "crash", "signal 9");
  EXPECT_TRUE(absl::IsUnavailable(died.status())) << died.status();
  EXPECT_NE(died.status().message().find("actor died: "), std::string::npos) << died.status();
  EXPECT_NE(died.status().message().find("signal 9"), std::string::npos) << died.status();
  auto pong = (*client)->Call(*actor, "ping", "");
  ASSERT_TRUE(pong.ok()) << "the call after the restart succeeds: " << pong.status();
  EXPECT_EQ(*pong, "pong");
  auto again = (*client)->CallAsync(*actor, "crash", "exit 9").get();
  EXPECT_NE(again.status().message().find("actor died: "), std::string::npos) << again.status();
  absl::Time t0 = absl::Now();
  auto dead = (*client)->Call(*actor, "ping", "");
  EXPECT_TRUE(absl::IsFailedPrecondition(dead.status())) << dead.status();
  EXPECT_NE(dead.status().message().find("no restarts left"), std::string::npos) << dead.status();
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5)) << "a call to a dead actor fails at once";
}

TEST_F(ActorLifecycleTest, RedisRestartUnderARunningHeadLosesNothing) {
  auto redis = testing::RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  Subprocess head = StartHead((*redis)->url());
  Subprocess w1 = StartWorker("w1", "CPU=2");
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 1; }));
  (*redis)->Kill(SIGKILL);
  // While Redis is down: reads are served from the head's memory, and writes wait for it.
  EXPECT_EQ(Count(ListNodes(), v1::NODE_ALIVE), 1);
  std::thread restart([&] {
    absl::SleepFor(absl::Milliseconds(700));
    ASSERT_TRUE((*redis)->Restart().ok());
  });
  grpc::Status s;
  v1::ActorInfo a = Create("echo", 0, &s);  // its writes are retried until Redis is back
  restart.join();
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(a.state(), v1::ACTOR_ALIVE);
  // The head caught up: a new head on the same Redis sees the actor created during the outage.
  head.Signal(SIGKILL).IgnoreError();
  head.Wait();
  Subprocess restarted = StartHead((*redis)->url());
  v1::ActorInfo back = WaitActor(a.actor_id(), [](const auto& x) { return x.state() == v1::ACTOR_ALIVE; });
  EXPECT_EQ(back.address(), a.address());
}

// Working directories: stored on the head by content (the KV refuses a key that lies about
// it), named in the spec; a malformed name is refused by the head, one never uploaded fails
// the actor's start saying so.
TEST_F(ActorLifecycleTest, WorkingDirsAreStoredByContentAndCheckedAtEveryStep) {
  Subprocess head = StartHead();
  Subprocess w1 = StartWorker("w1", "CPU=2");
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 1; }));
  auto client = Client::Connect(address_, Token());
  ASSERT_TRUE(client.ok()) << client.status();
  std::string src = MakeTempDir("wd-src");
  std::ofstream(src + "/data.txt") << "payload";
  absl::StatusOr<std::string> digest = (*client)->UploadWorkingDir(src);
  ASSERT_TRUE(digest.ok()) << digest.status();
  EXPECT_TRUE(ValidateWorkingDirDigest("digest", *digest).ok()) << *digest;
  absl::StatusOr<std::string> again = (*client)->UploadWorkingDir(src);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *digest) << "the same content, stored once";
  EXPECT_TRUE(absl::IsInvalidArgument((*client)->UploadWorkingDir(src + "/data.txt").status()));

  auto kv = v1::KvService::NewStub(rpc::MakeChannel(address_));
  v1::KvPutRequest lie;
  lie.set_key(std::string(kWorkingDirKeyPrefix) + "sha256:" + std::string(64, 'a'));
  lie.set_value("not that");
  v1::KvPutReply reply;
  grpc::Status refused = Authed([&](grpc::ClientContext* c) { return kv->Put(c, lie, &reply); });
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << refused.error_message();

  v1::ActorSpec o = ActorSpecFor("echo");
  o.set_working_dir(*digest);
  auto ok = (*client)->CreateActor(o);
  ASSERT_TRUE(ok.ok()) << ok.status();
  o.set_working_dir("sha256:nope");
  auto bad = (*client)->CreateActor(o);
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
  EXPECT_NE(bad.status().message().find("spec.working_dir"), std::string::npos) << bad.status();
  o.set_working_dir("sha256:" + std::string(64, 'b'));
  auto missing = (*client)->CreateActor(o);
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("the head has no such archive"), std::string::npos)
      << missing.status();
  std::filesystem::remove_all(src);
}

}  // namespace
TEST_F(ActorLifecycleTest, AHeadOutlivesALongRedisOutageAndCatchesUp) {
  auto redis = testing::RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  Subprocess head = StartHead((*redis)->url(), {"--store-retry-window-s", "0.5"});
  Subprocess w1 = StartWorker("w1", "CPU=2");
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 1; }));
  auto kv = v1::KvService::NewStub(rpc::MakeChannel(address_));
  auto put = [&](const std::string& key) {
    v1::KvPutRequest req;
    req.set_key(key);
    req.set_value("value-of-" + key);
    req.set_overwrite(true);
    v1::KvPutReply reply;
    return Authed([&](grpc::ClientContext* c) { return kv->Put(c, req, &reply); }, absl::Seconds(20));
  };
  ASSERT_TRUE(put("before").ok());

  (*redis)->Kill(SIGKILL);
  // Longer than the head's retry window: it goes on from memory.
  grpc::Status during = put("during");
  ASSERT_TRUE(during.ok()) << during.error_message();
  grpc::Status created;
  v1::ActorInfo a = Create("counter", 0, &created);
  ASSERT_TRUE(created.ok()) << created.error_message();
  EXPECT_EQ(a.state(), v1::ACTOR_ALIVE);
  absl::SleepFor(absl::Seconds(1));
  ASSERT_TRUE(put("later").ok());

  ASSERT_TRUE((*redis)->Restart().ok());
  // The queued writes reach Redis: a second reader of the same namespace sees them.
  bool caught_up = false;
  for (int i = 0; i < 300 && !caught_up; ++i) {
    auto reader = store::OpenStore((*redis)->url(), "default", absl::Seconds(1));
    if (reader.ok()) {
      auto later = (*reader)->Get("kv", "later");
      auto actor = (*reader)->Get("actors", a.actor_id());
      caught_up = later.ok() && *later == "value-of-later" && actor.ok();
    }
    if (!caught_up) absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(caught_up) << "the head never replayed its writes into Redis";

  // A new head on the same Redis finds everything the old one acknowledged.
  head.Signal(SIGKILL).IgnoreError();
  head.Wait();
  Subprocess again = StartHead((*redis)->url());
  v1::ActorInfo back = WaitActor(a.actor_id(), [](const auto& x) { return x.state() == v1::ACTOR_ALIVE; });
  EXPECT_EQ(back.address(), a.address());
  v1::KvGetRequest get;
  get.set_key("during");
  v1::KvGetReply got;
  grpc::Status s = AuthedOnceUp([&](grpc::ClientContext* c) { return kv->Get(c, get, &got); });
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(got.value(), "value-of-during");
}

TEST_F(ActorLifecycleTest, ANodeDeclaredDeadStopsItsOldActorsWhenItComesBack) {
  Subprocess head = StartHead();
  Subprocess w1 = StartWorker("w1", "CPU=1");
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 1; }));
  grpc::Status s;
  v1::ActorInfo a = Create("counter", 1, &s);
  ASSERT_TRUE(s.ok()) << s.error_message();
  Subprocess w2 = StartWorker("w2", "CPU=1");
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 2; }));
  std::string out;
  ASSERT_TRUE(CallActor(a, "add", "1", &out).ok());
  // Freeze w1 (and so its heartbeats) past the miss window: the head declares it dead and
  // restarts the actor on w2. The frozen worker cannot fence, but its actor stops itself when
  // the worker's lease runs out (0.9 of the head's threshold), so by the time the new
  // incarnation is ALIVE the old one no longer answers: never two at once.
  ASSERT_TRUE(w1.Signal(SIGSTOP).ok());
  v1::ActorInfo moved = WaitActor(a.actor_id(), [&](const auto& x) {
    return x.state() == v1::ACTOR_ALIVE && x.node_id() != a.node_id();
  });
  EXPECT_EQ(moved.restarts(), 1);
  EXPECT_FALSE(CallActor(a, "add", "1", &out).ok()) << "the old process answers while the new one serves";
  std::ifstream old_log(a.log_path());
  std::string old_text((std::istreambuf_iterator<char>(old_log)), std::istreambuf_iterator<char>());
  EXPECT_NE(old_text.find("fenced: this node's worker has not renewed its lease"), std::string::npos)
      << "the old process says why it stopped, in " << a.log_path() << ":\n"
      << old_text;
  ASSERT_TRUE(w1.Signal(SIGCONT).ok());
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 2; })) << "w1 is back";
  absl::SleepFor(absl::Milliseconds(500));
  v1::ActorInfo still = Get(a.actor_id());
  EXPECT_EQ(still.state(), v1::ACTOR_ALIVE) << "the stale process's exit must not kill the new one";
  EXPECT_EQ(still.node_id(), moved.node_id());
  EXPECT_EQ(still.restarts(), 1);
  ASSERT_TRUE(CallActor(still, "add", "1", &out).ok());
}

TEST_F(ActorLifecycleTest, ARestartWaitingForRoomResumesAfterAHeadRestart) {
  auto redis = testing::RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  Subprocess head = StartHead((*redis)->url());
  Subprocess w1 = StartWorker("w1", "CPU=1");
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 1; }));
  grpc::Status s;
  v1::ActorInfo a = Create("echo", 3, &s);
  ASSERT_TRUE(s.ok()) << s.error_message();
  w1.Signal(SIGKILL).IgnoreError();
  w1.Wait();
  WaitActor(a.actor_id(), [](const auto& x) { return x.state() == v1::ACTOR_RESTARTING; });
  head.Signal(SIGTERM).IgnoreError();  // a graceful stop must not turn waiting restarts DEAD
  head.Wait();
  Subprocess again = StartHead((*redis)->url());
  v1::ActorInfo waiting =
      WaitActor(a.actor_id(), [](const auto& x) { return x.state() != v1::ACTOR_STATE_UNSPECIFIED; });
  EXPECT_EQ(waiting.state(), v1::ACTOR_RESTARTING) << waiting.ShortDebugString();
  Subprocess w2 = StartWorker("w2", "CPU=1");
  v1::ActorInfo back = WaitActor(a.actor_id(), [](const auto& x) { return x.state() == v1::ACTOR_ALIVE; });
  std::string out;
  ASSERT_TRUE(CallActor(back, "echo", "resumed", &out).ok());
  EXPECT_EQ(out, "resumed");
}

}  // namespace skyrl::testing
