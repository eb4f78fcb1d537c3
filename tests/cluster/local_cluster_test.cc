// A real local cluster: skyrl-head and two skyrl-worker processes, driven through gRPC and the
// skyrl CLI, and killed with real signals.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/client/client.h"
#include "runtime/common/ids.h"
#include "runtime/common/subprocess.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"
#include "runtime/rpc/status.h"
#include "skyrl/actor.grpc.pb.h"
#include "skyrl/actor_directory.grpc.pb.h"
#include "skyrl/kv.grpc.pb.h"
#include "skyrl/worker.grpc.pb.h"
#include "skyrl/node.grpc.pb.h"
#include <sys/stat.h>
#include "tests/util/paths.h"
#include "tests/util/redis_server.h"

namespace skyrl {
namespace {

class LocalClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("cluster");
    auto port = PickFreePort();
    ASSERT_TRUE(port.ok());
    address_ = absl::StrCat("127.0.0.1:", *port);
  }

  Subprocess StartHead(const std::string& store = "memory") {
    SpawnOptions o;
    o.argv = {testing::BinDir() + "/skyrl-head", "--port", address_.substr(address_.rfind(':') + 1),
              "--store", store, "--heartbeat-period-ms", "100", "--heartbeat-misses", "5"};
    o.log_path = dir_ + "/head.log";
    o.env_set = Env();
    auto p = Subprocess::Start(o);
    EXPECT_TRUE(p.ok()) << p.status();
    // The head writes the cluster token before it serves; callers need it.
    for (int i = 0; i < 200 && Token().empty(); ++i) absl::SleepFor(absl::Milliseconds(25));
    EXPECT_FALSE(Token().empty()) << "the head wrote no token";
    return std::move(*p);
  }

  Subprocess StartWorker(const std::string& name, const std::string& resources) {
    SpawnOptions o;
    o.argv = {testing::BinDir() + "/skyrl-worker", "--head", address_, "--resources", resources,
              "--labels", "name=" + name};
    o.log_path = dir_ + "/" + name + ".log";
    o.env_set = Env();
    auto p = Subprocess::Start(o);
    EXPECT_TRUE(p.ok()) << p.status();
    return std::move(*p);
  }

  // Every process of this cluster gets the test's folder as HOME, so the head's generated token
  // lands in dir_/.skyrl/token and never touches the real home.
  std::map<std::string, std::string> Env() const {
    return {{"HOME", dir_}, {"SKYRL_TOKEN", ""}};
  }

  std::string Token() const {
    std::ifstream in(dir_ + "/.skyrl/token");
    std::string token;
    in >> token;
    return token;
  }

  std::vector<v1::NodeInfo> ListNodes() {
    auto stub = v1::NodeService::NewStub(rpc::MakeChannel(address_));
    grpc::ClientContext ctx;
    rpc::AttachToken(&ctx, Token());
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    v1::ListNodesReply reply;
    if (!stub->ListNodes(&ctx, {}, &reply).ok()) return {};
    return {reply.nodes().begin(), reply.nodes().end()};
  }

  // Polls until `pred` holds for the node list, up to `timeout`.
  bool WaitFor(const std::function<bool(const std::vector<v1::NodeInfo>&)>& pred,
               absl::Duration timeout = absl::Seconds(15)) {
    absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      if (pred(ListNodes())) return true;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return false;
  }

  // Runs one RPC with the cluster token and a deadline: `fn(ClientContext*)`.
  template <typename F>
  grpc::Status Authed(F fn, absl::Duration deadline = absl::Seconds(30)) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    rpc::AttachToken(&ctx, Token());
    return fn(&ctx);
  }

  // The first node's WorkerService, once exactly one node is alive.
  std::unique_ptr<v1::WorkerService::Stub> WorkerOfTheOnlyNode() {
    EXPECT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 1; }));
    std::vector<v1::NodeInfo> nodes = ListNodes();
    EXPECT_FALSE(nodes.empty());
    if (nodes.empty()) return nullptr;
    EXPECT_NE(nodes[0].address().find(':'), std::string::npos) << nodes[0].address();
    return v1::WorkerService::NewStub(rpc::MakeChannel(nodes[0].address()));
  }

  static int Count(const std::vector<v1::NodeInfo>& nodes, v1::NodeState state) {
    int n = 0;
    for (const auto& node : nodes) n += node.state() == state;
    return n;
  }

  std::string RunCli(const std::vector<std::string>& args, int* exit_code) {
    SpawnOptions o;
    o.argv = {testing::BinDir() + "/skyrl", "--address", address_};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    std::string out = dir_ + "/cli.out";
    std::remove(out.c_str());
    o.log_path = out;
    o.env_set = Env();
    auto p = Subprocess::Start(o);
    EXPECT_TRUE(p.ok());
    *exit_code = p->Wait().exit_code;
    std::ifstream in(out);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  std::string dir_, address_;
};

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

TEST_F(LocalClusterTest, SigkilledWorkerIsDeclaredDeadAfterTheMisses) {
  Subprocess head = StartHead();
  Subprocess w1 = StartWorker("w1", "CPU=1");
  Subprocess w2 = StartWorker("w2", "CPU=1");
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 2; }));
  w1.Signal(SIGKILL).IgnoreError();
  w1.Wait();
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_DEAD) == 1; }));
  for (const auto& n : ListNodes()) {
    if (n.state() != v1::NODE_DEAD) continue;
    EXPECT_EQ(n.labels().at("name"), "w1");
    EXPECT_NE(n.death_reason().find("no heartbeat"), std::string::npos) << n.death_reason();
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
  auto call = [&](auto fn) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    rpc::AttachToken(&ctx, Token());
    return fn(&ctx);
  };
  auto kv = v1::KvService::NewStub(rpc::MakeChannel(address_));
  v1::KvPutRequest put;
  put.set_key("nccl/weights/v1");
  put.set_value(std::string("\0id-bytes", 9));
  v1::KvPutReply pr;
  // The head may still be starting: retry the first call briefly.
  grpc::Status first;
  for (int i = 0; i < 100; ++i) {
    first = call([&](grpc::ClientContext* c) { return kv->Put(c, put, &pr); });
    if (first.error_code() != grpc::StatusCode::UNAVAILABLE) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(first.ok()) << first.error_message();
  grpc::Status again = call([&](grpc::ClientContext* c) { return kv->Put(c, put, &pr); });
  EXPECT_EQ(again.error_code(), grpc::StatusCode::ALREADY_EXISTS) << again.error_message();

  head.Signal(SIGKILL).IgnoreError();
  head.Wait();
  Subprocess restarted = StartHead((*redis)->url());
  v1::KvGetRequest get;
  get.set_key("nccl/weights/v1");
  v1::KvGetReply got;
  grpc::Status s;
  for (int i = 0; i < 100; ++i) {
    s = call([&](grpc::ClientContext* c) { return kv->Get(c, get, &got); });
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
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
  v1::StartActorRequest start;
  start.set_actor_id(id.ToString());
  start.set_class_name("counter");
  start.set_init_args("100");
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
  bad.set_init_args("not-a-number");
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
  v1::StartActorRequest start;
  start.set_actor_id(id.ToString());
  start.set_class_name("echo");
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

class ActorLifecycleTest : public LocalClusterTest {
 protected:
  v1::ActorInfo Create(const std::string& cls, int max_restarts, grpc::Status* status,
                       const std::string& init = "", const std::string& resources_gpu = "") {
    auto dir = v1::ActorDirectory::NewStub(rpc::MakeChannel(address_));
    v1::CreateActorRequest req;
    req.mutable_spec()->set_class_name(cls);
    req.mutable_spec()->set_init_args(init);
    req.mutable_spec()->set_max_restarts(max_restarts);
    (*req.mutable_spec()->mutable_resources())["CPU"] = 1;
    if (!resources_gpu.empty()) (*req.mutable_spec()->mutable_resources())["GPU"] = std::stod(resources_gpu);
    v1::CreateActorReply reply;
    *status = Authed([&](grpc::ClientContext* c) { return dir->CreateActor(c, req, &reply); });
    return reply.actor();
  }
  v1::ActorInfo Get(const std::string& id, bool must_answer = true) {
    auto dir = v1::ActorDirectory::NewStub(rpc::MakeChannel(address_));
    v1::GetActorRequest req;
    req.set_actor_id(id);
    v1::GetActorReply reply;
    grpc::Status s = Authed([&](grpc::ClientContext* c) { return dir->GetActor(c, req, &reply); });
    if (must_answer) {
      EXPECT_TRUE(s.ok()) << s.error_message();
    }
    return reply.actor();
  }
  // Polls the head until the actor satisfies `pred`.
  v1::ActorInfo WaitActor(const std::string& id, const std::function<bool(const v1::ActorInfo&)>& pred) {
    v1::ActorInfo a;
    for (int i = 0; i < 300; ++i) {
      a = Get(id, /*must_answer=*/false);  // the head may be restarting
      if (pred(a)) return a;
      absl::SleepFor(absl::Milliseconds(50));
    }
    ADD_FAILURE() << "actor never reached the expected state; last: " << a.ShortDebugString();
    return a;
  }
  grpc::Status CallActor(const v1::ActorInfo& a, const std::string& method, const std::string& args,
                         std::string* result = nullptr) {
    auto stub = v1::ActorService::NewStub(rpc::MakeChannel(a.address()));
    v1::ActorCallRequest req;
    req.set_actor_id(a.actor_id());
    req.set_method(method);
    req.set_args(args);
    v1::ActorCallReply reply;
    grpc::Status s = Authed([&](grpc::ClientContext* c) { return stub->Call(c, req, &reply); },
                            absl::Seconds(5));
    if (result) *result = reply.result();
    return s;
  }
};

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
  v1::ActorInfo restarted = WaitActor(a.actor_id(), [](const auto& x) {
    return x.state() == v1::ACTOR_ALIVE && x.restarts() == 1;
  });
  EXPECT_NE(restarted.death_reason().find("killed by signal 9"), std::string::npos) << restarted.death_reason();
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

TEST_F(ActorLifecycleTest, ConstructorErrorsInfeasibleRequestsAndKillsAreReported) {
  Subprocess head = StartHead();
  Subprocess w1 = StartWorker("w1", "CPU=2,GPU=0");
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 1; }));
  grpc::Status s;
  v1::ActorInfo bad = Create("crash", 5, &s, "fail");
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(bad.state(), v1::ACTOR_DEAD);
  EXPECT_NE(bad.death_reason().find("told to fail in its constructor"), std::string::npos) << bad.death_reason();

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
  for (int i = 0; i < 100 && (after = CallActor(a, "echo", "x")).ok(); ++i) absl::SleepFor(absl::Milliseconds(20));
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
  auto counter = (*client)->CreateActor("counter", {.name = "tally"});
  ASSERT_TRUE(counter.ok()) << counter.status();
  auto found = (*client)->GetActor("tally");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->actor_id, counter->actor_id);
  EXPECT_TRUE(absl::IsAlreadyExists((*client)->CreateActor("counter", {.name = "tally"}).status()));

  auto one = (*client)->Call(*counter, "add", "1");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(*one, "1");
  std::vector<std::future<absl::StatusOr<std::string>>> inflight;
  for (int i = 0; i < 1000; ++i) inflight.push_back((*client)->CallAsync(*counter, "add", "1"));
  for (auto& f : inflight) ASSERT_TRUE(f.get().ok());
  EXPECT_EQ(*(*client)->Call(*counter, "get", ""), "1001");

  // Calls from one caller to a max_concurrency-1 actor run in the order they were made.
  auto log = (*client)->CreateActor("echo", {});
  ASSERT_TRUE(log.ok()) << log.status();
  std::vector<std::future<absl::StatusOr<std::string>>> ordered;
  std::string expected;
  for (int i = 0; i < 300; ++i) {
    ordered.push_back((*client)->CallAsync(*log, "log", std::to_string(i)));
    absl::StrAppend(&expected, i ? "," : "", i);
  }
  for (auto& f : ordered) ASSERT_TRUE(f.get().ok());
  EXPECT_EQ(*(*client)->Call(*log, "history", ""), expected);

  auto ctor = (*client)->CreateActor("counter", {.init_args = "nope"});
  EXPECT_TRUE(absl::IsFailedPrecondition(ctor.status())) << ctor.status();
  EXPECT_NE(ctor.status().message().find("is not an integer"), std::string::npos) << ctor.status();

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
  auto actor = (*client)->CreateActor("crash", {.max_restarts = 1});
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

TEST_F(LocalClusterTest, OversizedAndMalformedRequestsGetClearErrors) {
  Subprocess head = StartHead();
  auto kv = v1::KvService::NewStub(rpc::MakeChannel(address_));
  v1::KvPutRequest big;
  big.set_key("big");
  big.set_value(std::string(65 << 20, 'x'));  // over the store's 64 MiB value limit
  v1::KvPutReply reply;
  grpc::Status s;
  for (int i = 0; i < 100; ++i) {
    s = Authed([&](grpc::ClientContext* c) { return kv->Put(c, big, &reply); });
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
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
}  // namespace skyrl
