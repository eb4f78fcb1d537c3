// Jobs through a real head and worker: logs and exit codes through the CLI, stop (with the
// job's actors), a head restart under a running job, crafted archives and missing tokens.
#include <archive.h>
#include <archive_entry.h>
#include <signal.h>

#include <filesystem>

#include "absl/strings/str_join.h"
#include "skyrl/job.grpc.pb.h"
#include "tests/cluster/cluster_fixture.h"

namespace skyrl::testing {
namespace {
namespace fs = std::filesystem;

class JobTest : public LocalClusterTest {
 protected:
  std::unique_ptr<v1::JobService::Stub> Jobs() { return v1::JobService::NewStub(rpc::MakeChannel(address_)); }
  v1::JobInfo GetJob(const std::string& id, bool must_answer = true) {
    v1::GetJobRequest req;
    req.set_job_id(id);
    v1::GetJobReply reply;
    auto stub = Jobs();
    grpc::Status s = AuthedOnceUp([&](grpc::ClientContext* c) { return stub->GetJob(c, req, &reply); });
    if (must_answer) {
      EXPECT_TRUE(s.ok()) << s.error_message();
    }
    return reply.job();
  }
  // Polls (for up to 15 s: after a head restart gRPC's reconnect backoff can take seconds).
  v1::JobInfo WaitJob(const std::string& id, const std::function<bool(const v1::JobInfo&)>& pred) {
    v1::JobInfo j;
    for (int i = 0; i < 300; ++i) {
      j = GetJob(id, /*must_answer=*/false);
      if (pred(j)) return j;
      absl::SleepFor(absl::Milliseconds(50));
    }
    ADD_FAILURE() << "job never reached the expected state: " << j.ShortDebugString();
    return j;
  }
  std::unique_ptr<Client> Connect() {
    auto c = Client::Connect(address_, Token());
    EXPECT_TRUE(c.ok());
    return std::move(*c);
  }
  std::string ReadFile(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
};

TEST_F(JobTest, SubmitStreamsLogsAndReportsExitCodes) {
  Subprocess head = StartHead();
  ASSERT_TRUE(WaitFor([](const auto&) { return true; }));
  fs::create_directories(dir_ + "/wd/sub");
  std::ofstream(dir_ + "/wd/sub/hello.txt") << "hello from the working dir\n";
  int code = -1;
  std::string out = RunCli(
      {"job", "submit", "--working-dir", dir_ + "/wd", "--env", "GREETING=hi", "--submission-id", "ok-job",
       "--", "sh", "-c", "cat sub/hello.txt; echo greeting=$GREETING; echo id=$SKYRL_JOB_ID"},
      &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("hello from the working dir"), std::string::npos) << out;
  EXPECT_NE(out.find("greeting=hi"), std::string::npos) << out;
  EXPECT_NE(out.find("id=ok-job"), std::string::npos) << out;
  EXPECT_NE(out.find("job ok-job SUCCEEDED"), std::string::npos) << out;

  out = RunCli(
      {"job", "submit", "--submission-id", "bad-job", "--", "sh", "-c", "echo about to fail; exit 3"}, &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("about to fail"), std::string::npos) << out;
  v1::JobInfo bad = GetJob("bad-job");
  EXPECT_EQ(bad.state(), v1::JOB_FAILED);
  EXPECT_EQ(bad.exit_code(), 3);
  EXPECT_EQ(bad.message(), "exit code 3");
  std::string logs = RunCli({"job", "logs", "bad-job"}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(logs, "about to fail\n");
  std::string list = RunCli({"job", "list", "--json"}, &code);
  EXPECT_NE(list.find("\"state\": \"SUCCEEDED\""), std::string::npos) << list;
  EXPECT_NE(list.find("\"state\": \"FAILED\""), std::string::npos) << list;
  // Audit: one line per submission, with who and what, never the token.
  std::string audit = ReadFile(dir_ + "/.skyrl/jobs/audit.log");
  EXPECT_NE(audit.find("\"job_id\":\"ok-job\""), std::string::npos) << audit;
  EXPECT_NE(audit.find("\"env_names\":[\"GREETING\"]"), std::string::npos) << audit;
  EXPECT_NE(audit.find("\"submitter\""), std::string::npos) << audit;
  EXPECT_EQ(audit.find(Token()), std::string::npos) << "the token is never written to the audit log";
  EXPECT_EQ(std::count(audit.begin(), audit.end(), '\n'), 2);
  // Delete removes the record and files of an ended job only.
  EXPECT_EQ(RunCli({"job", "delete", "bad-job"}, &code), "deleted bad-job\n");
  EXPECT_FALSE(fs::exists(dir_ + "/.skyrl/jobs/bad-job"));
}

TEST_F(JobTest, StopEndsTheDriverAndItsActorsButNotDetachedOnes) {
  Subprocess head = StartHead();
  Subprocess w1 = StartWorker("w1", "CPU=4");
  ASSERT_TRUE(WaitFor([](const auto& n) { return Count(n, v1::NODE_ALIVE) == 1; }));
  int code = -1;
  std::string out = RunCli({"job", "submit", "--no-wait", "--submission-id", "driver", "--",
                            testing::BinDir() + "/skyrl-test-driver"},
                           &code);
  ASSERT_EQ(code, 0) << out;
  auto client = Connect();
  absl::StatusOr<ActorHandle> attached, detached;
  for (int i = 0; i < 200 && !(attached.ok() && detached.ok()); ++i) {
    attached = client->GetActor("attached");
    detached = client->GetActor("detached");
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(attached.ok() && detached.ok()) << ReadFile(GetJob("driver").log_path());
  EXPECT_EQ(client->Describe(*attached)->spec().job_id(), "driver");
  out = RunCli({"job", "stop", "driver", "--grace", "2"}, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("driver STOPPED: stopped by the user"), std::string::npos) << out;
  v1::JobInfo j = GetJob("driver");
  EXPECT_EQ(j.state(), v1::JOB_STOPPED);
  EXPECT_EQ(kill(j.pid() > 0 ? j.pid() : 999999, 0), -1) << "the driver is gone";
  absl::StatusOr<v1::ActorInfo> a = client->Describe(*attached);
  ASSERT_TRUE(a.ok());
  for (int i = 0; i < 100 && a->state() != v1::ACTOR_DEAD; ++i) {
    absl::SleepFor(absl::Milliseconds(50));
    a = client->Describe(*attached);
  }
  EXPECT_EQ(a->state(), v1::ACTOR_DEAD);
  EXPECT_NE(a->death_reason().find("its job driver ended"), std::string::npos) << a->death_reason();
  absl::StatusOr<std::string> echo = client->Call(*detached, "echo", "still here");
  ASSERT_TRUE(echo.ok()) << echo.status();
  EXPECT_EQ(*echo, "still here");
}

TEST_F(JobTest, ARunningJobIsFailedAndItsDriverKilledWhenTheHeadRestarts) {
  auto redis = testing::RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status();
  Subprocess head = StartHead((*redis)->url());
  ASSERT_TRUE(WaitFor([](const auto&) { return true; }));
  int code = -1;
  std::string out =
      RunCli({"job", "submit", "--no-wait", "--submission-id", "long", "--", "sleep", "1000"}, &code);
  ASSERT_EQ(code, 0) << out;
  v1::JobInfo running = WaitJob("long", [](const v1::JobInfo& j) { return j.state() == v1::JOB_RUNNING; });
  int pid = running.pid();
  ASSERT_GT(pid, 0);
  head.Signal(SIGKILL).IgnoreError();
  head.Wait();
  Subprocess again = StartHead((*redis)->url());
  v1::JobInfo failed = WaitJob("long", [](const v1::JobInfo& j) { return j.state() == v1::JOB_FAILED; });
  EXPECT_NE(failed.message().find("driver lost"), std::string::npos) << failed.message();
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    gone = kill(pid, 0) != 0;
    if (!gone) absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(gone) << "the leftover driver was killed";
}

la_ssize_t Append(struct archive*, void* out, const void* buf, size_t n) {
  static_cast<std::string*>(out)->append(static_cast<const char*>(buf), n);
  return la_ssize_t(n);
}

TEST_F(JobTest, CraftedArchivesAndMissingTokensRunNothing) {
  Subprocess head = StartHead();
  ASSERT_TRUE(WaitFor([](const auto&) { return true; }));
  std::string evil;
  struct archive* a = archive_write_new();
  archive_write_add_filter_gzip(a);
  archive_write_set_format_pax_restricted(a);
  archive_write_open(a, &evil, nullptr, Append, nullptr);
  struct archive_entry* e = archive_entry_new();
  archive_entry_set_pathname(e, "../../escaped.txt");
  archive_entry_set_filetype(e, AE_IFREG);
  archive_entry_set_perm(e, 0644);
  archive_entry_set_size(e, 4);
  archive_write_header(a, e);
  archive_write_data(a, "evil", 4);
  archive_entry_free(e);
  archive_write_close(a);
  archive_write_free(a);

  auto submit = [&](bool with_token, const std::string& archive_bytes, v1::SubmitJobReply* reply) {
    grpc::ClientContext ctx;
    if (with_token) rpc::AttachToken(&ctx, Token());
    auto stub = Jobs();
    auto writer = stub->SubmitJob(&ctx, reply);
    v1::SubmitJobChunk first;
    first.mutable_spec()->add_entrypoint("touch");
    first.mutable_spec()->add_entrypoint(dir_ + "/ran");
    first.mutable_spec()->set_has_working_dir(!archive_bytes.empty());
    first.set_archive_chunk(archive_bytes);
    writer->Write(first);
    writer->WritesDone();
    return writer->Finish();
  };
  v1::SubmitJobReply reply;
  grpc::Status s = submit(true, evil, &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("\"../../escaped.txt\": '..' is refused"), std::string::npos)
      << s.error_message();
  s = submit(false, "", &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_FALSE(fs::exists(dir_ + "/ran")) << "nothing ran";
  EXPECT_FALSE(fs::exists(dir_ + "/.skyrl/escaped.txt"));
  EXPECT_FALSE(fs::exists(dir_ + "/escaped.txt"));
  v1::ListJobsReply list;
  auto stub = Jobs();
  ASSERT_TRUE(Authed([&](grpc::ClientContext* c) { return stub->ListJobs(c, {}, &list); }).ok());
  EXPECT_EQ(list.jobs_size(), 0) << "a refused submission leaves no job";
  // Bad specs name the field.
  int code = -1;
  std::string out = RunCli({"job", "submit", "--env", "1BAD=x", "--", "true"}, &code);
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find("spec.env"), std::string::npos) << out;
  out = RunCli({"job", "submit", "--submission-id", "no spaces", "--", "true"}, &code);
  EXPECT_NE(out.find("spec.submission_id"), std::string::npos) << out;
}

}  // namespace
}  // namespace skyrl::testing
