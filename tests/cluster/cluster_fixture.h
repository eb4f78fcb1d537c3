// Fixtures for tests of a real local cluster: skyrl-head and skyrl-worker processes started
// in a scratch HOME, driven through gRPC, the client and the skyrl CLI, and killed with real
// signals.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
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
#include "skyrl/node.grpc.pb.h"
#include "skyrl/worker.grpc.pb.h"
#include "tests/util/paths.h"
#include "tests/util/redis_server.h"

namespace skyrl::testing {

class LocalClusterTest : public ::testing::Test {
 protected:
  // The head's heartbeat period (x 10 misses: the death threshold T; a worker cut off from
  // the head for 0.4 T fences its actors). Tests whose own actors load the cores take more.
  int heartbeat_period_ms_ = 100;

  void SetUp() override {
    dir_ = testing::MakeTempDir("cluster");
    auto port = PickFreePort();
    ASSERT_TRUE(port.ok());
    address_ = absl::StrCat("127.0.0.1:", *port);
  }

  Subprocess StartHead(const std::string& store = "memory", const std::vector<std::string>& extra = {}) {
    SpawnOptions o;
    o.argv = {testing::BinDir() + "/skyrl-head",
              "--port",
              address_.substr(address_.rfind(':') + 1),
              "--store",
              store,
              "--heartbeat-period-ms",
              absl::StrCat(heartbeat_period_ms_),
              "--heartbeat-misses",
              "10"};
    o.argv.insert(o.argv.end(), extra.begin(), extra.end());
    o.log_path = dir_ + "/head.log";
    o.env_set = Env();
    auto p = Subprocess::Start(o);
    EXPECT_TRUE(p.ok()) << p.status();
    // The head writes the cluster token before it serves; callers need it.
    for (int i = 0; i < 200 && Token().empty(); ++i) absl::SleepFor(absl::Milliseconds(25));
    EXPECT_FALSE(Token().empty()) << "the head wrote no token";
    return std::move(*p);
  }

  // `extra` adds flags, e.g. {"--gpu-ids", "0,1"}; a "--labels" there replaces name=<name>.
  Subprocess StartWorker(const std::string& name, const std::string& resources,
                         const std::vector<std::string>& extra = {}) {
    SpawnOptions o;
    o.argv = {testing::BinDir() + "/skyrl-worker", "--head", address_, "--resources", resources};
    if (std::find(extra.begin(), extra.end(), "--labels") == extra.end())
      o.argv.insert(o.argv.end(), {"--labels", "name=" + name});
    o.argv.insert(o.argv.end(), extra.begin(), extra.end());
    o.log_path = dir_ + "/" + name + ".log";
    o.env_set = Env();
    auto p = Subprocess::Start(o);
    EXPECT_TRUE(p.ok()) << p.status();
    return std::move(*p);
  }

  // Every process of this cluster gets the test's folder as HOME, so the head's generated token
  // lands in dir_/.skyrl/token and never touches the real home.
  std::map<std::string, std::string> Env() const { return {{"HOME", dir_}, {"SKYRL_TOKEN", ""}}; }

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

  // Polls until the head answers ListNodes (it writes its token a moment before it serves).
  bool WaitServing(absl::Duration timeout = absl::Seconds(30)) {
    auto stub = v1::NodeService::NewStub(rpc::MakeChannel(address_));
    for (absl::Time deadline = absl::Now() + timeout; absl::Now() < deadline;
         absl::SleepFor(absl::Milliseconds(50))) {
      grpc::ClientContext ctx;
      rpc::AttachToken(&ctx, Token());
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
      v1::ListNodesReply reply;
      if (stub->ListNodes(&ctx, {}, &reply).ok()) return true;
    }
    return false;
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

  // Authed, retried for up to about 15 s while the head is still starting (UNAVAILABLE): a
  // loaded CI machine can take seconds to start a head and reconnect a channel.
  template <typename F>
  grpc::Status AuthedOnceUp(F fn, absl::Duration deadline = absl::Seconds(5)) {
    grpc::Status s;
    for (int i = 0; i < 300; ++i) {
      s = Authed(fn, deadline);
      if (s.error_code() != grpc::StatusCode::UNAVAILABLE) break;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return s;
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

  static v1::StartActorRequest StartRequest(const ActorId& id, const std::string& class_name,
                                            const std::string& init_args = "") {
    v1::StartActorRequest req;
    req.set_actor_id(id.ToString());
    req.mutable_spec()->set_class_name(class_name);
    req.mutable_spec()->set_init_args(init_args);
    return req;
  }

  static int Count(const std::vector<v1::NodeInfo>& nodes, v1::NodeState state) {
    int n = 0;
    for (const auto& node : nodes) n += node.state() == state;
    return n;
  }

  // `skyrl ARGS` with this cluster's --address (none when `with_address` is false).
  std::string RunCli(const std::vector<std::string>& args, int* exit_code, bool with_address = true) {
    SpawnOptions o;
    o.argv = {testing::BinDir() + "/skyrl"};
    if (with_address) o.argv.insert(o.argv.end(), {"--address", address_});
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
    grpc::Status s =
        Authed([&](grpc::ClientContext* c) { return stub->Call(c, req, &reply); }, absl::Seconds(5));
    if (result) *result = reply.result();
    return s;
  }
};

}  // namespace skyrl::testing
