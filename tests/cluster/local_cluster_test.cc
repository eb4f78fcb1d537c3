// A real local cluster: nodes, tokens, KV, the CLI, and workers running actor processes.
#include "tests/cluster/cluster_fixture.h"

#include <filesystem>

namespace skyrl::testing {
namespace {

TEST_F(LocalClusterTest, TwoWorkersRegisterAndStatusShowsThem) {
  Subprocess head = StartHead();
  Subprocess w1 = StartWorker("w1", "CPU=4,GPU=0,memory=8Gi");
  Subprocess w2 = StartWorker("w2", "CPU=2,GPU=0,memory=4Gi,custom=3");
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 2; }));

  int code = -1;
  std::string status = RunCli({"status"}, &code);
  EXPECT_EQ(code, 0) << status;
  EXPECT_NE(status.find("Nodes: 2 alive, 0 dead"), std::string::npos) << status;
  EXPECT_NE(status.find("CPU=6,GPU=0,memory=12Gi,custom=3"), std::string::npos) << status;
  EXPECT_NE(status.find("name=w2"), std::string::npos) << status;

  std::string json = RunCli({"list", "nodes", "--json"}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_NE(json.find("\"resources_text\": \"CPU=4,GPU=0,memory=8Gi\""), std::string::npos) << json;

  // A worker stopped with SIGTERM leaves the cluster at once, saying so.
  w2.Signal(SIGTERM).IgnoreError();
  EXPECT_TRUE(w2.Wait().ok());
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_DEAD) == 1; }));
  status = RunCli({"status"}, &code);
  EXPECT_NE(status.find("worker stopped by signal 15"), std::string::npos) << status;
  EXPECT_TRUE(head.Stop(absl::Seconds(5)).ok()) << "head exits 0 on SIGTERM";
}

// Both workers run on this machine: the survivor finds the killed one's process gone, which
// makes the death certain before the misses run out.
TEST_F(LocalClusterTest, SigkilledWorkerIsDeclaredDeadOnceItsNeighbourFindsItGone) {
  Subprocess head = StartHead();
  Subprocess w1 = StartWorker("w1", "CPU=1");
  Subprocess w2 = StartWorker("w2", "CPU=1");
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 2; }));
  const int pid = w1.pid();
  w1.Signal(SIGKILL).IgnoreError();
  w1.Wait();
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_DEAD) == 1; }));
  for (const auto& n : ListNodes()) {
    if (n.state() != v1::NODE_DEAD) continue;
    EXPECT_EQ(n.labels().at("name"), "w1");
    EXPECT_NE(n.death_reason().find(absl::StrCat("worker process (pid ", pid, ") is gone")),
              std::string::npos)
        << n.death_reason();
    EXPECT_FALSE(n.death_unconfirmed());
  }
  // The survivor stays alive well past the miss window.
  absl::SleepFor(absl::Seconds(1));
  EXPECT_EQ(Count(ListNodes(), v1::NODE_ALIVE), 1);
}

TEST_F(LocalClusterTest, HeadKilledAndRestartedOnRedisKeepsItsNodes) {
  auto redis = testing::RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  Subprocess head = StartHead((*redis)->url());
  Subprocess w1 = StartWorker("w1", "CPU=1");
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 1; }));
  std::string id = ListNodes()[0].node_id();
  head.Signal(SIGKILL).IgnoreError();
  head.Wait();
  Subprocess restarted = StartHead((*redis)->url());
  ASSERT_TRUE(WaitFor([&](const auto& n) {
    return n.size() == 1 && n[0].node_id() == id && n[0].state() == v1::NODE_ALIVE;
  }));
  // The worker's heartbeats keep it alive under the new head.
  absl::SleepFor(absl::Seconds(1));
  auto nodes = ListNodes();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].state(), v1::NODE_ALIVE);
}

TEST_F(LocalClusterTest, BadFlagsFailWithAClearMessage) {
  SpawnOptions o;
  o.argv = {testing::BinDir() + "/skyrl-worker", "--head", address_, "--resources", "CPU=-1"};
  o.log_path = dir_ + "/bad.log";
  o.env_set = Env();
  auto p = Subprocess::Start(o);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->Wait().exit_code, 2);
  std::ifstream in(o.log_path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("--resources: resource CPU"), std::string::npos) << text.str();
  int code = -1;
  SpawnOptions cli;
  cli.argv = {testing::BinDir() + "/skyrl", "--address", "nonsense", "status"};
  cli.log_path = dir_ + "/cli-bad.log";
  cli.env_set = Env();
  auto c = Subprocess::Start(cli);
  ASSERT_TRUE(c.ok());
  code = c->Wait().exit_code;
  EXPECT_EQ(code, 2);
  // A flag value outside a fixed list is bad input too (exit 2, naming the flag), not CLI11's
  // own exit code.
  SpawnOptions plan;
  plan.argv = {testing::BinDir() + "/skyrl", "plan", "--model", "Qwen3-8B", "--optimizer-state", "fp4"};
  plan.log_path = dir_ + "/plan-bad.log";
  plan.env_set = Env();
  auto pc = Subprocess::Start(plan);
  ASSERT_TRUE(pc.ok());
  EXPECT_EQ(pc->Wait().exit_code, 2);
  std::ifstream plan_in(plan.log_path);
  std::stringstream plan_text;
  plan_text << plan_in.rdbuf();
  EXPECT_NE(plan_text.str().find("--optimizer-state"), std::string::npos) << plan_text.str();
}

TEST_F(LocalClusterTest, EveryCallNeedsTheTokenAndTheHeadCreatesItPrivately) {
  Subprocess head = StartHead();
  Subprocess w1 = StartWorker("w1", "CPU=1");
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 1; }));
  struct stat st {};
  ASSERT_EQ(::stat((dir_ + "/.skyrl/token").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::string token = Token();
  ASSERT_GE(token.size(), 32u);

  auto channel = rpc::MakeChannel(address_);
  auto nodes = v1::NodeService::NewStub(channel);
  auto kv = v1::KvService::NewStub(channel);
  for (std::string given : {std::string(), std::string("wrong-token-0123456789"), token}) {
    grpc::ClientContext a, b;
    if (!given.empty()) {
      rpc::AttachToken(&a, given);
      rpc::AttachToken(&b, given);
    }
    v1::ListNodesReply list;
    grpc::Status s1 = nodes->ListNodes(&a, {}, &list);
    v1::KvPutRequest put;
    put.set_key("k");
    put.set_value("v");
    v1::KvPutReply put_reply;
    grpc::Status s2 = kv->Put(&b, put, &put_reply);
    auto expected = given == token ? grpc::StatusCode::OK : grpc::StatusCode::UNAUTHENTICATED;
    EXPECT_EQ(s1.error_code(), expected) << "token '" << given << "': " << s1.error_message();
    EXPECT_EQ(s2.error_code(), expected) << "token '" << given << "': " << s2.error_message();
  }
  // The rejections are logged without the token.
  head.Stop(absl::Seconds(5));
  std::ifstream in(dir_ + "/head.log");
  std::stringstream log;
  log << in.rdbuf();
  EXPECT_NE(log.str().find("wrong token"), std::string::npos) << log.str();
  EXPECT_EQ(log.str().find(token), std::string::npos) << "the token leaked into the log";
  EXPECT_EQ(log.str().find("wrong-token-0123456789"), std::string::npos);
}

TEST_F(LocalClusterTest, KvSurvivesAHeadRestartOnRedis) {
  auto redis = testing::RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  Subprocess head = StartHead((*redis)->url());
  auto call = [&](auto fn) { return Authed(fn, absl::Seconds(5)); };
  auto kv = v1::KvService::NewStub(rpc::MakeChannel(address_));
  v1::KvPutRequest put;
  put.set_key("nccl/weights/v1");
  put.set_value(std::string("\0id-bytes", 9));
  v1::KvPutReply pr;
  grpc::Status first = AuthedOnceUp([&](grpc::ClientContext* c) { return kv->Put(c, put, &pr); });
  ASSERT_TRUE(first.ok()) << first.error_message();
  grpc::Status again = call([&](grpc::ClientContext* c) { return kv->Put(c, put, &pr); });
  EXPECT_EQ(again.error_code(), grpc::StatusCode::ALREADY_EXISTS) << again.error_message();

  head.Signal(SIGKILL).IgnoreError();
  head.Wait();
  Subprocess restarted = StartHead((*redis)->url());
  v1::KvGetRequest get;
  get.set_key("nccl/weights/v1");
  v1::KvGetReply got;
  grpc::Status s = AuthedOnceUp([&](grpc::ClientContext* c) { return kv->Get(c, get, &got); });
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(got.value(), std::string("\0id-bytes", 9));
  v1::KvListRequest list;
  list.set_prefix("nccl/");
  v1::KvListReply keys;
  ASSERT_TRUE(call([&](grpc::ClientContext* c) { return kv->List(c, list, &keys); }).ok());
  ASSERT_EQ(keys.keys_size(), 1);
  v1::KvGetRequest missing;
  missing.set_key("absent");
  EXPECT_EQ(call([&](grpc::ClientContext* c) { return kv->Get(c, missing, &got); }).error_code(),
            grpc::StatusCode::NOT_FOUND);
  v1::KvPutRequest bad;
  bad.set_key("");
  EXPECT_EQ(call([&](grpc::ClientContext* c) { return kv->Put(c, bad, &pr); }).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(LocalClusterTest, SkyrlStartAndStopRunDaemonsLikeRayStart) {
  std::string port = address_.substr(address_.rfind(':') + 1);
  int code = -1;
  std::string out = RunCli({"start", "--head", "--port", port}, &code);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("skyrl-head started at " + address_), std::string::npos) << out;
  out = RunCli({"start", "--resources", "CPU=2", "--labels", "pool=a"}, &code);  // --address from the fixture
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("skyrl-worker joined"), std::string::npos) << out;
  EXPECT_EQ(Count(ListNodes(), v1::NODE_ALIVE), 1);
  // Without --address, skyrl finds the head it started here, on whatever port.
  out = RunCli({"status"}, &code, /*with_address=*/false);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("pool=a"), std::string::npos) << "the started head's node: " << out;

  // A second head on the same machine is refused, naming the running one.
  out = RunCli({"start", "--head", "--port", port}, &code);
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find("already runs here"), std::string::npos) << out;

  out = RunCli({"stop", "--grace", "5"}, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("head: stopped pid"), std::string::npos) << out;
  EXPECT_LT(out.find("worker-"), out.find("head:")) << "workers stop before the head";
  out = RunCli({"status"}, &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("cannot reach the head"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/.skyrl/run/head.address")) << "stop forgets its address";
  out = RunCli({"stop"}, &code);
  EXPECT_NE(out.find("no skyrl daemons"), std::string::npos) << out;
}

TEST_F(LocalClusterTest, WorkerRunsActorsOnRequestAndTheyDieWithIt) {
  Subprocess head = StartHead();
  Subprocess w1 = StartWorker("w1", "CPU=2");
  auto worker = WorkerOfTheOnlyNode();
  ASSERT_TRUE(worker);
  auto call = [&](auto fn) { return Authed(fn); };

  ActorId id = ActorId::Random();
  v1::StartActorRequest start = StartRequest(id, "counter", "100");
  v1::StartActorReply started;
  grpc::Status s = call([&](grpc::ClientContext* c) { return worker->StartActor(c, start, &started); });
  ASSERT_TRUE(s.ok()) << s.error_message();

  // The call goes straight to the actor's process.
  auto actor = v1::ActorService::NewStub(rpc::MakeChannel(started.address()));
  v1::ActorCallRequest add;
  add.set_actor_id(id.ToString());
  add.set_method("add");
  add.set_args("5");
  v1::ActorCallReply result;
  ASSERT_TRUE(call([&](grpc::ClientContext* c) { return actor->Call(c, add, &result); }).ok());
  EXPECT_EQ(result.result(), "105");

  // A constructor error comes back from StartActor itself.
  v1::StartActorRequest bad = start;
  bad.set_actor_id(ActorId::Random().ToString());
  bad.mutable_spec()->set_init_args("not-a-number");
  s = call([&](grpc::ClientContext* c) { return worker->StartActor(c, bad, &started); });
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("is not an integer"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("exit code 3"), std::string::npos) << s.error_message();

  // Without the token the worker refuses.
  grpc::ClientContext anon;
  EXPECT_EQ(worker->StartActor(&anon, start, &started).error_code(), grpc::StatusCode::UNAUTHENTICATED);

  // SIGKILL the worker: its actor must not outlive it.
  w1.Signal(SIGKILL).IgnoreError();
  w1.Wait();
  grpc::Status after;
  for (int i = 0; i < 100; ++i) {
    after = call([&](grpc::ClientContext* c) {
      c->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
      return actor->Call(c, add, &result);
    });
    if (!after.ok()) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_FALSE(after.ok()) << "the actor kept serving after its worker was killed";
}

TEST_F(LocalClusterTest, WorkerKillsActorsAndReportsHowTheyEnded) {
  Subprocess head = StartHead();
  Subprocess w1 = StartWorker("w1", "CPU=2");
  auto worker = WorkerOfTheOnlyNode();
  ASSERT_TRUE(worker);
  auto call = [&](auto fn) { return Authed(fn); };
  ActorId id = ActorId::Random();
  v1::StartActorRequest start = StartRequest(id, "echo");
  v1::StartActorReply started;
  ASSERT_TRUE(call([&](grpc::ClientContext* c) { return worker->StartActor(c, start, &started); }).ok());
  v1::KillActorRequest kill;
  kill.set_actor_id(id.ToString());
  v1::KillActorReply killed;
  ASSERT_TRUE(call([&](grpc::ClientContext* c) { return worker->KillActor(c, kill, &killed); }).ok());
  v1::ListWorkerActorsReply list;
  for (int i = 0; i < 200; ++i) {
    list.Clear();
    ASSERT_TRUE(call([&](grpc::ClientContext* c) { return worker->ListActors(c, {}, &list); }).ok());
    if (list.recent_exits_size() > 0) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_EQ(list.recent_exits_size(), 1);
  EXPECT_EQ(list.recent_exits(0).actor_id(), id.ToString());
  EXPECT_TRUE(list.recent_exits(0).killed_by_request());
  EXPECT_EQ(list.running_size(), 0);
  EXPECT_EQ(call([&](grpc::ClientContext* c) { return worker->KillActor(c, kill, &killed); }).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(LocalClusterTest, OversizedAndMalformedRequestsGetClearErrors) {
  Subprocess head = StartHead();
  auto kv = v1::KvService::NewStub(rpc::MakeChannel(address_));
  v1::KvPutRequest big;
  big.set_key("big");
  big.set_value(std::string(65 << 20, 'x'));  // over the store's 64 MiB value limit
  v1::KvPutReply reply;
  grpc::Status s =
      AuthedOnceUp([&](grpc::ClientContext* c) { return kv->Put(c, big, &reply); }, absl::Seconds(30));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("exceeds the limit"), std::string::npos) << s.error_message();
  auto nodes = v1::NodeService::NewStub(rpc::MakeChannel(address_));
  v1::HeartbeatRequest hb;
  hb.set_node_id("not-an-id");
  v1::HeartbeatReply hb_reply;
  s = Authed([&](grpc::ClientContext* c) { return nodes->Heartbeat(c, hb, &hb_reply); });
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("node id"), std::string::npos) << s.error_message();
  EXPECT_TRUE(head.running()) << "the head survived";
}

TEST_F(LocalClusterTest, WorkerGivesUpOnAHeadGoneLongerThanItsWindow) {
  Subprocess head = StartHead();
  // The worker's window is 1 s: started once the head serves (a slow start, under a sanitizer
  // say, would otherwise use the window up before the head is killed).
  ASSERT_TRUE(WaitServing());
  SpawnOptions o;
  o.argv = {BinDir() + "/skyrl-worker", "--head", address_, "--resources", "CPU=1",
            "--head-retry-window-s",    "1"};
  o.env_set = Env();
  o.log_path = dir_ + "/window.log";
  auto w = Subprocess::Start(o);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 1; }));
  head.Signal(SIGKILL).IgnoreError();
  head.Wait();
  auto exit = w->WaitFor(absl::Seconds(15));
  ASSERT_TRUE(exit.has_value()) << "the worker kept waiting past its window";
  EXPECT_EQ(exit->exit_code, 1);
  std::ifstream in(o.log_path);
  std::stringstream log;
  log << in.rdbuf();
  EXPECT_NE(log.str().find("unreachable for 1 s"), std::string::npos) << log.str();
}

TEST(SecondHeadTest, CannotShareThePortOfARunningHead) {
  // gRPC's default SO_REUSEPORT would let two heads bind one port; ours refuses.
  std::string dir = testing::MakeTempDir("two-heads");
  auto port = PickFreePort();
  ASSERT_TRUE(port.ok());
  auto start = [&](const std::string& log) {
    SpawnOptions o;
    o.argv = {testing::BinDir() + "/skyrl-head", "--port", std::to_string(*port)};
    o.env_set = {{"HOME", dir}};
    o.log_path = dir + "/" + log;
    return Subprocess::Start(o);
  };
  auto first = start("first.log");
  ASSERT_TRUE(first.ok());
  absl::SleepFor(absl::Milliseconds(500));
  auto second = start("second.log");
  ASSERT_TRUE(second.ok());
  auto exit = second->WaitFor(absl::Seconds(10));
  ASSERT_TRUE(exit.has_value()) << "the second head kept running on a taken port";
  EXPECT_EQ(exit->exit_code, 1);
  EXPECT_TRUE(first->running());
}

}  // namespace
}  // namespace skyrl::testing
