// Real actor processes: skyrl-actor-host started through the worker's ActorProcesses, called
// directly over gRPC, and crashed on demand.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"
#include "runtime/worker/actor_processes.h"
#include "skyrl/actor.grpc.pb.h"
#include "tests/util/paths.h"

namespace skyrl {
namespace {

constexpr char kToken[] = "actor-host-test-token-0123456789";

class ActorHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("actor-host");
    procs_ = std::make_unique<worker::ActorProcesses>(worker::ActorProcessesOptions{
        .log_dir = dir_, .poll_period = absl::Milliseconds(5),
        .on_exit = [this](const worker::ActorExit& e) {
          absl::MutexLock lock(&mu_);
          exits_.push_back(e);
        }});
  }
  void TearDown() override {
    procs_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Starts an actor of `cls` and returns its port (0 if it never became ready).
  int Start(const ActorId& id, const std::string& cls, const std::string& init = "",
            std::vector<std::string> extra = {}) {
    std::string port_file = absl::StrCat(dir_, "/", id.ToString(), ".port");
    worker::ActorLaunch l{id,
                          {testing::BinDir() + "/skyrl-actor-host", "--class", cls,
                           "--init-args", init, "--port-file", port_file},
                          {},
                          {{"SKYRL_TOKEN", kToken}}};
    l.argv.insert(l.argv.end(), extra.begin(), extra.end());
    EXPECT_TRUE(procs_->Launch(l).ok());
    for (int i = 0; i < 400; ++i) {
      int port = 0;
      std::ifstream(port_file) >> port;
      if (port > 0) return port;
      {
        absl::MutexLock lock(&mu_);
        for (const auto& e : exits_)
          if (e.actor_id == id) return 0;
      }
      absl::SleepFor(absl::Milliseconds(25));
    }
    return 0;
  }

  grpc::Status Call(int port, const ActorId& id, const std::string& method,
                    const std::string& args, std::string* result,
                    const std::string& token = kToken) {
    auto stub = v1::ActorService::NewStub(rpc::MakeChannel(absl::StrCat("127.0.0.1:", port)));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!token.empty()) rpc::AttachToken(&ctx, token);
    v1::ActorCallRequest req;
    req.set_actor_id(id.ToString());
    req.set_method(method);
    req.set_args(args);
    v1::ActorCallReply reply;
    grpc::Status s = stub->Call(&ctx, req, &reply);
    if (result) *result = reply.result();
    return s;
  }

  std::optional<worker::ActorExit> WaitExit(const ActorId& id) {
    for (int i = 0; i < 400; ++i) {
      {
        absl::MutexLock lock(&mu_);
        for (const auto& e : exits_)
          if (e.actor_id == id) return e;
      }
      absl::SleepFor(absl::Milliseconds(25));
    }
    return std::nullopt;
  }

  std::string dir_;
  std::unique_ptr<worker::ActorProcesses> procs_;
  absl::Mutex mu_;
  std::vector<worker::ActorExit> exits_;
};

TEST_F(ActorHostTest, CounterKeepsStateAcrossCallsInOrder) {
  ActorId id = ActorId::Random();
  int port = Start(id, "counter", "10");
  ASSERT_GT(port, 0);
  std::string result;
  for (int i = 1; i <= 5; ++i) {
    ASSERT_TRUE(Call(port, id, "add", "1", &result).ok());
    EXPECT_EQ(result, absl::StrCat(10 + i));
  }
  grpc::Status bad = Call(port, id, "add", "x", &result);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(bad.error_message().find("not an integer"), std::string::npos);
}

TEST_F(ActorHostTest, WrongTokenMethodOrActorIdAreClearErrors) {
  ActorId id = ActorId::Random();
  int port = Start(id, "echo");
  ASSERT_GT(port, 0);
  std::string result;
  ASSERT_TRUE(Call(port, id, "echo", std::string("a\0b", 3), &result).ok());
  EXPECT_EQ(result, std::string("a\0b", 3));
  EXPECT_EQ(Call(port, id, "echo", "x", &result, "").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Call(port, id, "echo", "x", &result, "wrong-token-0123456789").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  grpc::Status missing = Call(port, id, "nope", "", &result);
  EXPECT_EQ(missing.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_NE(missing.error_message().find("it has: echo"), std::string::npos) << missing.error_message();
  EXPECT_EQ(Call(port, ActorId::Random(), "echo", "", &result).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ActorHostTest, CrashOnDemandIsReportedWithTheSignalAndTheLastLines) {
  ActorId id = ActorId::Random();
  int port = Start(id, "crash");
  ASSERT_GT(port, 0);
  std::string result;
  grpc::Status s = Call(port, id, "crash", "signal 11", &result);
  EXPECT_FALSE(s.ok()) << "the call in flight fails when the actor dies";
  auto e = WaitExit(id);
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(e->exit.signaled);
  EXPECT_EQ(e->exit.signal, SIGSEGV);
  EXPECT_NE(e->Describe().find("raising signal 11 on request"), std::string::npos) << e->Describe();
}

TEST_F(ActorHostTest, ExitCodeAndConstructorErrorAreReported) {
  ActorId id = ActorId::Random();
  int port = Start(id, "crash");
  ASSERT_GT(port, 0);
  std::string result;
  (void)Call(port, id, "crash", "exit 7", &result);
  auto e = WaitExit(id);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->exit.exit_code, 7);

  ActorId bad = ActorId::Random();
  EXPECT_EQ(Start(bad, "crash", "fail"), 0);
  auto ctor = WaitExit(bad);
  ASSERT_TRUE(ctor.has_value());
  EXPECT_EQ(ctor->exit.exit_code, 3);
  ASSERT_FALSE(ctor->last_lines.empty());
  EXPECT_NE(ctor->last_lines.back().find("told to fail in its constructor"), std::string::npos)
      << ctor->Describe();

  ActorId unknown = ActorId::Random();
  EXPECT_EQ(Start(unknown, "no-such-class"), 0);
  auto u = WaitExit(unknown);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->exit.exit_code, 2);
  EXPECT_NE(u->Describe().find("no actor class \"no-such-class\""), std::string::npos) << u->Describe();
}

TEST_F(ActorHostTest, MaxConcurrencyOneRunsCallsOneAtATime) {
  ActorId serial = ActorId::Random(), parallel = ActorId::Random();
  int p1 = Start(serial, "sleep");
  int p2 = Start(parallel, "sleep", "", {"--max-concurrency", "4"});
  ASSERT_GT(p1, 0);
  ASSERT_GT(p2, 0);
  // Four calls in flight at once; the actor records how many ever ran together.
  auto peak_of_4 = [&](int port, const ActorId& id) {
    std::vector<std::thread> threads;
    for (int i = 0; i < 4; ++i)
      threads.emplace_back([&] { EXPECT_TRUE(Call(port, id, "sleep", "300", nullptr).ok()); });
    for (auto& t : threads) t.join();
    std::string peak;
    EXPECT_TRUE(Call(port, id, "peak", "", &peak).ok());
    return std::stoi(peak);
  };
  EXPECT_EQ(peak_of_4(p1, serial), 1);
  EXPECT_GT(peak_of_4(p2, parallel), 1);
}

TEST_F(ActorHostTest, SigtermStopsTheHostCleanly) {
  ActorId id = ActorId::Random();
  ASSERT_GT(Start(id, "echo"), 0);
  ASSERT_TRUE(procs_->Kill(id, absl::Seconds(5)).ok());
  auto e = WaitExit(id);
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(e->exit.ok()) << e->Describe();
  EXPECT_TRUE(e->killed_by_request);
}

}  // namespace
}  // namespace skyrl
