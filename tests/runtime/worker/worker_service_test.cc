// worker::WorkerServiceImpl over a real gRPC server in this process: the checks a start and a
// peer's question pass before anything is launched.
#include "runtime/worker/worker_service.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "runtime/common/actor_env.h"
#include "runtime/common/ids.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"
#include "runtime/rpc/server.h"
#include "tests/util/paths.h"

namespace skyrl::worker {
namespace {

constexpr char kToken[] = "worker-service-test-token";

class WorkerServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("worker-service");
    absl::StatusOr<std::unique_ptr<LeaseWriter>> lease = LeaseWriter::Create(dir_ + "/actor-lease");
    ASSERT_TRUE(lease.ok()) << lease.status();
    lease_ = std::move(*lease);
    service_ = std::make_unique<WorkerServiceImpl>(
        WorkerServiceOptions{
            .actor_host = dir_ + "/no-such-actor-host",
            .log_dir = dir_,
            .bind_host = "127.0.0.1",
            .actor_lease = lease_.get(),
            .head_contact = [this](const std::string& asker) -> absl::StatusOr<v1::HeadContactReply> {
              ++contacts_;
              {
                absl::MutexLock lock(&mu_);
                last_asker_ = asker;
              }
              if (head_renews_) lease_->ExtendFor(absl::Seconds(30));
              return v1::HeadContactReply{};
            }},
        auth_);
    absl::StatusOr<rpc::ListeningServer> server = rpc::StartServer("127.0.0.1", 0, {service_.get()});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    stub_ = v1::WorkerService::NewStub(rpc::MakeChannel(absl::StrCat("127.0.0.1:", server_.port)));
  }
  void TearDown() override {
    server_.server->Shutdown();
    service_.reset();
    std::filesystem::remove_all(dir_);
  }
  grpc::Status Start() {
    v1::StartActorRequest req;
    req.set_actor_id(ActorId::Random().ToString());
    req.mutable_spec()->set_class_name("echo");
    grpc::ClientContext ctx;
    rpc::PrepareCall(&ctx, kToken, absl::Seconds(30));
    v1::StartActorReply reply;
    return stub_->StartActor(&ctx, req, &reply);
  }
  grpc::Status StartAs(const ActorId& id, int64_t incarnation) {
    v1::StartActorRequest req;
    req.set_actor_id(id.ToString());
    req.mutable_spec()->set_class_name("echo");
    req.set_incarnation(incarnation);
    grpc::ClientContext ctx;
    rpc::PrepareCall(&ctx, kToken, absl::Seconds(30));
    v1::StartActorReply reply;
    return stub_->StartActor(&ctx, req, &reply);
  }
  grpc::Status StartSpec(const v1::ActorSpec& spec) {
    v1::StartActorRequest req;
    req.set_actor_id(ActorId::Random().ToString());
    *req.mutable_spec() = spec;
    grpc::ClientContext ctx;
    rpc::PrepareCall(&ctx, kToken, absl::Seconds(30));
    v1::StartActorReply reply;
    return stub_->StartActor(&ctx, req, &reply);
  }
  // An actor host that writes what it was started with to `out` (its class, concurrency,
  // job and variable A), serves at once (it writes a port) and then sleeps.
  void InstallRecordingHost(const std::string& out) {
    const std::string path = dir_ + "/no-such-actor-host";
    std::ofstream(path)
        << "#!/bin/sh\n"
           "while [ $# -gt 0 ]; do\n"
           "  case \"$1\" in --port-file) echo 1 > \"$2\";; --class) c=$2;; --max-concurrency) m=$2;; esac\n"
           "  shift\n"
           "done\n"
           "echo \"class=$c concurrency=$m job=$SKYRL_JOB_ID a=$A\" >> "
        << out
        << "\n"
           "exec sleep 60\n";
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  }
  // An actor host that serves at once (it writes a port) and ignores SIGTERM.
  void InstallStubbornHost() {
    const std::string path = dir_ + "/no-such-actor-host";
    std::ofstream(path) << "#!/bin/sh\n"
                           "while [ $# -gt 0 ]; do [ \"$1\" = --port-file ] && echo 1 > \"$2\"; shift; done\n"
                           "trap '' TERM\n"
                           "exec sleep 60\n";
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  }
  grpc::Status Contact(const std::string& asker) {
    v1::HeadContactRequest req;
    req.set_asker_node_id(asker);
    grpc::ClientContext ctx;
    rpc::PrepareCall(&ctx, kToken, absl::Seconds(30));
    v1::HeadContactReply reply;
    return stub_->HeadContact(&ctx, req, &reply);
  }

  std::string dir_;
  rpc::TokenAuth auth_{kToken};
  std::unique_ptr<LeaseWriter> lease_;
  std::atomic<int> contacts_{0};
  std::atomic<bool> head_renews_{false};
  absl::Mutex mu_;
  std::string last_asker_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<WorkerServiceImpl> service_;
  rpc::ListeningServer server_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
};

TEST_F(WorkerServiceTest, OnAnOverdueLeaseAStartReachesTheHeadFirstAndIsRefusedIfThatFails) {
  lease_->ExtendFor(absl::ZeroDuration());  // the worker was frozen, say: the lease ran out
  grpc::Status s = Start();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_NE(s.error_message().find("lease"), std::string::npos) << s.error_message();
  EXPECT_EQ(contacts_.load(), 1) << "it tried the head before refusing";

  head_renews_ = true;  // the head answers: the lease is renewed
  s = Start();
  EXPECT_EQ(contacts_.load(), 2);
  EXPECT_NE(s.error_code(), grpc::StatusCode::UNAVAILABLE)
      << "renewed, the start goes on (and fails later: there is no actor host here): " << s.error_message();

  const int before = contacts_.load();
  s = Start();
  EXPECT_EQ(contacts_.load(), before) << "a lease that holds needs no contact";
}

TEST_F(WorkerServiceTest, APeersQuestionNamesTheAskerOrIsRefused) {
  const std::string peer = NodeId::Random().ToString();
  grpc::Status s = Contact(peer);
  ASSERT_TRUE(s.ok()) << s.error_message();
  {
    absl::MutexLock lock(&mu_);
    EXPECT_EQ(last_asker_, peer);
  }
  s = Contact("not-a-node");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("asker_node_id"), std::string::npos) << s.error_message();
  EXPECT_EQ(contacts_.load(), 1) << "a bad question reaches no further";
}

TEST_F(WorkerServiceTest, ANewerStartStopsTheOlderAndStopReturnsOnceActorsAreGone) {
  InstallStubbornHost();
  const ActorId id = ActorId::Random();
  grpc::Status s = StartAs(id, 1);
  ASSERT_TRUE(s.ok()) << s.error_message();
  // The head moved on (start 2) while start 1 still runs here: it goes first, not "already
  // runs", and its exit names start 1.
  s = StartAs(id, 2);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(service_->Running(), std::vector<ActorId>{id});
  v1::ListWorkerActorsReply listed;
  {
    grpc::ClientContext ctx;
    rpc::PrepareCall(&ctx, kToken, absl::Seconds(30));
    ASSERT_TRUE(stub_->ListActors(&ctx, {}, &listed).ok());
  }
  ASSERT_EQ(listed.recent_exits_size(), 1);
  EXPECT_EQ(listed.recent_exits(0).incarnation(), 1);
  EXPECT_TRUE(listed.recent_exits(0).killed_by_request());
  // The head declared the node dead: its actors are gone when Stop returns (SIGTERM is
  // ignored here), before the next heartbeat lets the head restart them elsewhere.
  service_->Stop({id});
  EXPECT_TRUE(service_->Running().empty());
}

// The head asks (in a heartbeat reply, or with a kill) that a start not run here: one that
// runs is stopped, a newer one is left alone, and one that has not arrived yet is refused
// when it does.
TEST_F(WorkerServiceTest, AStoppedStartIsGoneAndOneThatHadNotArrivedIsRefusedLater) {
  InstallStubbornHost();
  const ActorId id = ActorId::Random();
  ASSERT_TRUE(StartAs(id, 1).ok());
  EXPECT_TRUE(service_->StopStart(id, 1));
  EXPECT_TRUE(service_->Running().empty()) << "gone when it returns (SIGTERM is ignored here)";
  ASSERT_TRUE(StartAs(id, 3).ok());
  EXPECT_TRUE(service_->StopStart(id, 2)) << "start 2 does not run here";
  EXPECT_EQ(service_->Running(), std::vector<ActorId>{id}) << "the newer start 3 is left alone";

  const ActorId late = ActorId::Random();
  EXPECT_TRUE(service_->StopStart(late, 4));
  for (int64_t incarnation : {4, 2}) {
    grpc::Status s = StartAs(late, incarnation);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::ABORTED) << incarnation << ": " << s.error_message();
  }
  // The same for a kill that came before its start.
  const ActorId killed = ActorId::Random();
  {
    v1::KillActorRequest kill;
    kill.set_actor_id(killed.ToString());
    kill.set_incarnation(1);
    grpc::ClientContext ctx;
    rpc::PrepareCall(&ctx, kToken, absl::Seconds(30));
    v1::KillActorReply reply;
    EXPECT_EQ(stub_->KillActor(&ctx, kill, &reply).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  EXPECT_EQ(StartAs(killed, 1).error_code(), grpc::StatusCode::ABORTED);
  // Later starts go on.
  grpc::Status s = StartAs(late, 5);
  EXPECT_TRUE(s.ok()) << s.error_message();
  s = StartAs(killed, 2);
  EXPECT_TRUE(s.ok()) << s.error_message();
}

// The start carries the actor's spec whole; the worker takes from it what it launches with,
// and a detached actor gets no job (it outlives the one that made it).
TEST_F(WorkerServiceTest, AStartLaunchesFromTheSpecItCarries) {
  const std::string out = dir_ + "/started.txt";
  InstallRecordingHost(out);
  v1::ActorSpec spec;
  spec.set_class_name("counter");
  spec.set_max_concurrency(3);
  spec.set_job_id("job-7");
  (*spec.mutable_env())["A"] = "1";
  grpc::Status s = StartSpec(spec);
  ASSERT_TRUE(s.ok()) << s.error_message();
  spec.set_detached(true);
  s = StartSpec(spec);
  ASSERT_TRUE(s.ok()) << s.error_message();
  std::ifstream in(out);
  std::string first, second;
  std::getline(in, first);
  std::getline(in, second);
  EXPECT_EQ(first, "class=counter concurrency=3 job=job-7 a=1");
  EXPECT_EQ(second, "class=counter concurrency=3 job= a=1");
  service_->Stop(service_->Running());

  // What it uses is checked, naming the spec's field; nothing is launched.
  v1::ActorSpec bad = spec;
  (*bad.mutable_env())[actor_env::kToken] = "mine";
  s = StartSpec(bad);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("spec.env"), std::string::npos) << s.error_message();
  bad = spec;
  bad.set_class_name("no spaces allowed");
  s = StartSpec(bad);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("spec.class_name"), std::string::npos) << s.error_message();
  bad = spec;
  bad.set_max_concurrency(-1);
  s = StartSpec(bad);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("spec.max_concurrency"), std::string::npos) << s.error_message();
}

}  // namespace
}  // namespace skyrl::worker
