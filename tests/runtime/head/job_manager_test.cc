// JobManager in process: one reaper thread for every running driver (no thread per job),
// each end recorded with its exit code, Stop, and Delete once the clean-up is done.
#include "runtime/head/job_manager.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/store/memory/memory_store.h"
#include "tests/runtime/head/head_fixture.h"

namespace skyrl::head {
namespace {

size_t ThreadCount() {
  std::error_code ec;
  return static_cast<size_t>(std::distance(std::filesystem::directory_iterator("/proc/self/task", ec),
                                           std::filesystem::directory_iterator()));
}

v1::JobSpec Shell(const std::string& id, const std::string& script) {
  v1::JobSpec spec;
  spec.set_submission_id(id);
  spec.add_entrypoint("/bin/sh");
  spec.add_entrypoint("-c");
  spec.add_entrypoint(script);
  return spec;
}

// The job once ended, or its last state after `limit` (real processes: waited for).
v1::JobInfo AwaitEnd(JobManager& jobs, const std::string& id, absl::Duration limit = absl::Seconds(30)) {
  const absl::Time deadline = absl::Now() + limit;
  absl::StatusOr<v1::JobInfo> j = jobs.Get(id);
  while (j.ok() && !JobManager::Ended(j->state()) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
    j = jobs.Get(id);
  }
  EXPECT_TRUE(j.ok()) << j.status();
  return j.ok() ? *j : v1::JobInfo();
}

TEST(JobManagerTest, OneReaperRecordsEveryDriversEndWithoutAThreadPerJob) {
  store::MemoryStore store;
  FakeClock clock;
  testing::FakeWorkers workers;
  auto head = OpenTestHead(store, clock, workers);
  JobManager& jobs = head->jobs();
  const size_t threads_before = ThreadCount();
  constexpr int kJobs = 12;
  std::vector<std::string> ids;
  for (int i = 0; i < kJobs; ++i) {
    ids.push_back(absl::StrCat("reap-", getpid(), "-", i));
    absl::StatusOr<v1::JobInfo> j =
        jobs.Submit(Shell(ids.back(), absl::StrCat("sleep 0.3; exit ", i % 3)), "", "test");
    ASSERT_TRUE(j.ok()) << j.status();
    ASSERT_EQ(j->state(), v1::JOB_RUNNING) << j->message();
  }
  EXPECT_LE(ThreadCount(), threads_before) << "running drivers started threads in the head";
  for (int i = 0; i < kJobs; ++i) {
    v1::JobInfo j = AwaitEnd(jobs, ids[i]);
    EXPECT_EQ(j.state(), i % 3 == 0 ? v1::JOB_SUCCEEDED : v1::JOB_FAILED) << ids[i] << ": " << j.message();
    EXPECT_EQ(j.exit_code(), i % 3) << ids[i];
    EXPECT_EQ(j.pid(), 0);
    EXPECT_GT(j.ended_unix_ms(), 0);
  }
  // Stop: SIGTERM to the driver's group, STOPPED once the reaper has it; then Delete.
  const std::string long_id = absl::StrCat("reap-", getpid(), "-long");
  ASSERT_TRUE(jobs.Submit(Shell(long_id, "sleep 600"), "", "test").ok());
  absl::StatusOr<v1::JobInfo> stopped = jobs.Stop(long_id, absl::Seconds(10));
  ASSERT_TRUE(stopped.ok()) << stopped.status();
  EXPECT_EQ(stopped->state(), v1::JOB_STOPPED) << stopped->message();
  EXPECT_EQ(stopped->signal(), SIGTERM) << stopped->message();
  EXPECT_TRUE(jobs.Delete(long_id).ok());
  EXPECT_TRUE(absl::IsNotFound(jobs.Get(long_id).status()));
  for (const std::string& id : ids) EXPECT_TRUE(jobs.Delete(id).ok()) << id;
}

TEST(JobManagerTest, DriversStillRunningWhenTheManagerGoesAreStoppedAndRecordedFailed) {
  store::MemoryStore store;
  FakeClock clock;
  testing::FakeWorkers workers;
  const std::string id = absl::StrCat("reap-", getpid(), "-orphan");
  {
    auto head = OpenTestHead(store, clock, workers);
    absl::StatusOr<v1::JobInfo> j = head->jobs().Submit(Shell(id, "sleep 600"), "", "test");
    ASSERT_TRUE(j.ok() && j->state() == v1::JOB_RUNNING) << j.status();
  }  // the head goes: SIGTERM, recorded by the reaper before it ends
  absl::StatusOr<std::string> raw = store.Get(kJobsTable, id);
  ASSERT_TRUE(raw.ok()) << raw.status();
  v1::JobInfo recorded;
  ASSERT_TRUE(recorded.ParseFromString(*raw));
  EXPECT_EQ(recorded.state(), v1::JOB_FAILED);
  EXPECT_NE(recorded.message().find("stopped with the head"), std::string::npos) << recorded.message();
  EXPECT_EQ(recorded.pid(), 0);
}

}  // namespace
}  // namespace skyrl::head
