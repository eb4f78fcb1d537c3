// Real child processes: what the worker launches, what they see, and how their ends are reported.
#include "runtime/worker/actor_processes.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>

#include "absl/time/clock.h"
#include "tests/util/paths.h"

namespace skyrl::worker {
namespace {

class ActorProcessesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("actors");
    procs_ = std::make_unique<ActorProcesses>(ActorProcessesOptions{.log_dir = dir_,
                                                                    .tail_lines = 20,
                                                                    .poll_period = absl::Milliseconds(5),
                                                                    .on_exit = [this](const ActorExit& e) {
                                                                      absl::MutexLock lock(&mu_);
                                                                      exits_.push_back(e);
                                                                    }});
  }
  void TearDown() override {
    procs_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Waits for the report of `id`.
  std::optional<ActorExit> WaitExit(const ActorId& id, absl::Duration timeout = absl::Seconds(10)) {
    absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      {
        absl::MutexLock lock(&mu_);
        for (const auto& e : exits_)
          if (e.actor_id == id) return e;
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
    return std::nullopt;
  }

  ActorLaunch Shell(const std::string& script, std::vector<int> gpus = {}) {
    return {ActorId::Random(), {"sh", "-c", script}, std::move(gpus), {{"SKYRL_TEST", "yes"}}};
  }

  std::string dir_;
  std::unique_ptr<ActorProcesses> procs_;
  absl::Mutex mu_;
  std::vector<ActorExit> exits_;
};

TEST_F(ActorProcessesTest, ActorSeesExactlyItsGpusAndItsExitCodeIsReported) {
  ActorLaunch l = Shell(
      "echo gpus=$CUDA_VISIBLE_DEVICES id=$SKYRL_ACTOR_ID env=$SKYRL_TEST; "
      "echo failing >&2; exit 3",
      {3, 5});
  ASSERT_TRUE(procs_->Launch(l).ok());
  auto e = WaitExit(l.actor_id);
  ASSERT_TRUE(e.has_value());
  EXPECT_FALSE(e->exit.signaled);
  EXPECT_EQ(e->exit.exit_code, 3);
  EXPECT_FALSE(e->killed_by_request);
  ASSERT_EQ(e->last_lines.size(), 2u);
  EXPECT_EQ(e->last_lines[0], "gpus=3,5 id=" + l.actor_id.ToString() + " env=yes");
  EXPECT_EQ(e->last_lines[1], "failing");
  EXPECT_NE(e->Describe().find("exit code 3"), std::string::npos);
  EXPECT_NE(e->Describe().find("failing"), std::string::npos);
  EXPECT_TRUE(procs_->Running().empty());
}

TEST_F(ActorProcessesTest, NoGpusMeansAnEmptyCudaVisibleDevices) {
  ActorLaunch l = Shell("echo \"[${CUDA_VISIBLE_DEVICES-unset}]\"");
  ASSERT_TRUE(procs_->Launch(l).ok());
  auto e = WaitExit(l.actor_id);
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(e->exit.ok());
  EXPECT_EQ(e->last_lines, std::vector<std::string>{"[]"});
}

// Ray's device semantics: the worker sets CUDA_VISIBLE_DEVICES to the actor's GPUs, over an
// env_vars value (saying so in the actor's log), unless Ray's switch is set in the actor's
// environment; SKYRL_GPU_IDS says the assignment either way.
TEST_F(ActorProcessesTest, TheWorkerOwnsCudaVisibleDevicesUnlessTheActorSaysItManagesItsOwn) {
  const char* kShow = "echo \"[${CUDA_VISIBLE_DEVICES-unset}] [${SKYRL_GPU_IDS-unset}]\"";
  ActorLaunch gpu = Shell(kShow, {2});
  gpu.env["CUDA_VISIBLE_DEVICES"] = "7";
  ActorLaunch helper = Shell(kShow);  // no GPUs: shares its rank's, which it names itself
  helper.env["CUDA_VISIBLE_DEVICES"] = "2";
  helper.env["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"] = "1";
  ActorLaunch off = Shell(kShow);
  off.env["CUDA_VISIBLE_DEVICES"] = "2";
  off.env["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"] = "";  // empty: not set
  for (const ActorLaunch* l : {&gpu, &helper, &off}) ASSERT_TRUE(procs_->Launch(*l).ok());
  auto g = WaitExit(gpu.actor_id), h = WaitExit(helper.actor_id), o = WaitExit(off.actor_id);
  ASSERT_TRUE(g && h && o);
  EXPECT_EQ(g->last_lines.back(), "[2] [2]") << "its own GPU, not the env_vars' 7";
  EXPECT_NE(g->last_lines.front().find("CUDA_VISIBLE_DEVICES=7 from the actor's env_vars is replaced"),
            std::string::npos)
      << g->last_lines.front();
  EXPECT_EQ(h->last_lines, std::vector<std::string>{"[2] []"}) << "its own value stands; no GPUs given";
  EXPECT_EQ(o->last_lines.back(), "[] []");
}

TEST_F(ActorProcessesTest, TheSwitchInTheWorkersOwnEnvironmentLeavesTheNodesValue) {
  ASSERT_EQ(setenv("RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES", "1", 1), 0);
  ASSERT_EQ(setenv("CUDA_VISIBLE_DEVICES", "4,5", 1), 0);
  ActorLaunch l = Shell("echo \"[${CUDA_VISIBLE_DEVICES-unset}] [${SKYRL_GPU_IDS-unset}]\"", {1});
  absl::Status launched = procs_->Launch(l);
  unsetenv("RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES");
  unsetenv("CUDA_VISIBLE_DEVICES");
  ASSERT_TRUE(launched.ok()) << launched;
  auto e = WaitExit(l.actor_id);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->last_lines, std::vector<std::string>{"[4,5] [1]"});
}

TEST_F(ActorProcessesTest, ASignalFromOutsideIsReportedAsThatSignal) {
  // The actor kills itself with SIGSEGV, as a crashing native library would.
  ActorLaunch l = Shell("echo started; kill -SEGV $$; sleep 30");
  ASSERT_TRUE(procs_->Launch(l).ok());
  auto e = WaitExit(l.actor_id);
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(e->exit.signaled);
  EXPECT_EQ(e->exit.signal, SIGSEGV);
  EXPECT_FALSE(e->killed_by_request);
  EXPECT_NE(e->Describe().find("SIGSEGV"), std::string::npos) << e->Describe();
  EXPECT_EQ(e->last_lines, std::vector<std::string>{"started"});
}

TEST_F(ActorProcessesTest, APreviousProcessBeingStoppedIsGoneAndReportedBeforeTheNextStarts) {
  // It ignores SIGTERM: stopped with a long grace, it would linger for a minute.
  ActorLaunch l = Shell("trap '' TERM; echo started; while true; do sleep 0.05; done");
  ASSERT_TRUE(procs_->Launch(l).ok());
  absl::SleepFor(absl::Milliseconds(100));
  ASSERT_TRUE(procs_->Kill(l.actor_id, absl::Minutes(1)).ok());
  EXPECT_TRUE(absl::IsAlreadyExists(procs_->Launch(l))) << "still there";
  const absl::Time asked = absl::Now();
  procs_->AwaitStopped(l.actor_id, 0, absl::Seconds(10));
  EXPECT_LT(absl::Now() - asked, absl::Seconds(5)) << "SIGKILLed, not waited out";
  {
    absl::MutexLock lock(&mu_);
    ASSERT_EQ(exits_.size(), 1u) << "its exit is reported before AwaitStopped returns";
    EXPECT_EQ(exits_[0].actor_id, l.actor_id);
  }
  EXPECT_TRUE(procs_->Launch(l).ok()) << "the next incarnation starts";
  // A running process (no stop asked) is not touched: the start says it already runs.
  procs_->AwaitStopped(l.actor_id, 0, absl::Seconds(10));
  EXPECT_TRUE(absl::IsAlreadyExists(procs_->Launch(l)));
}

TEST_F(ActorProcessesTest, StartsAreToldApartByTheirIncarnation) {
  ActorLaunch l = Shell("echo started; exec sleep 30");
  l.incarnation = 2;
  ASSERT_TRUE(procs_->Launch(l).ok());
  // A late kill meant for the start before leaves this one running.
  absl::Status s = procs_->Kill(l.actor_id, absl::Seconds(5), 1);
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(procs_->Running(), std::vector<ActorId>{l.actor_id});
  // The head moved on to start 3 (its kill of start 2 lost): the next start stops this one
  // first, and its exit names start 2, so the head does not take it for the new one's.
  const absl::Time asked = absl::Now();
  procs_->AwaitStopped(l.actor_id, 3, absl::Seconds(10));
  EXPECT_LT(absl::Now() - asked, absl::Seconds(5));
  auto e = WaitExit(l.actor_id);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->incarnation, 2);
  EXPECT_TRUE(e->killed_by_request);
  l.incarnation = 3;
  ASSERT_TRUE(procs_->Launch(l).ok());
  // A kill for this start or a newer one stops it.
  ASSERT_TRUE(procs_->Kill(l.actor_id, absl::Seconds(5), 4).ok());
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(
                           +[](std::vector<ActorExit>* exits) { return exits->size() == 2; }, &exits_),
                       absl::Seconds(10));
  ASSERT_EQ(exits_.size(), 2u);
  EXPECT_EQ(exits_[1].incarnation, 3);
}

TEST_F(ActorProcessesTest, KillByRequestIsReportedAsSuch) {
  ActorLaunch l = Shell("echo started; exec sleep 30");
  ASSERT_TRUE(procs_->Launch(l).ok());
  absl::SleepFor(absl::Milliseconds(100));
  ASSERT_EQ(procs_->Running(), std::vector<ActorId>{l.actor_id});
  ASSERT_TRUE(procs_->Kill(l.actor_id, absl::Seconds(5)).ok());
  auto e = WaitExit(l.actor_id);
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(e->exit.signaled);
  EXPECT_EQ(e->exit.signal, SIGTERM);
  EXPECT_TRUE(e->killed_by_request);
  EXPECT_EQ(e->last_lines, std::vector<std::string>{"started"});
}

TEST_F(ActorProcessesTest, KillEscalatesToSigkillAfterTheGrace) {
  ActorLaunch l = Shell("trap 'echo ignoring TERM' TERM; echo ready; while true; do sleep 0.05; done");
  ASSERT_TRUE(procs_->Launch(l).ok());
  absl::SleepFor(absl::Milliseconds(200));
  ASSERT_TRUE(procs_->Kill(l.actor_id, absl::Milliseconds(300)).ok());
  auto e = WaitExit(l.actor_id);
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(e->exit.signaled);
  EXPECT_EQ(e->exit.signal, SIGKILL);
  EXPECT_NE(e->Describe().find("SIGKILL"), std::string::npos) << e->Describe();
}

TEST_F(ActorProcessesTest, ReportCarriesOnlyTheLastLines) {
  ActorLaunch l = Shell("i=1; while [ $i -le 100 ]; do echo line-$i; i=$((i+1)); done; exit 1");
  ASSERT_TRUE(procs_->Launch(l).ok());
  auto e = WaitExit(l.actor_id);
  ASSERT_TRUE(e.has_value());
  ASSERT_EQ(e->last_lines.size(), 20u);
  EXPECT_EQ(e->last_lines.front(), "line-81");
  EXPECT_EQ(e->last_lines.back(), "line-100");
}

TEST_F(ActorProcessesTest, DuplicatesAndUnknownActorsAreErrors) {
  ActorLaunch l = Shell("exec sleep 30");
  ASSERT_TRUE(procs_->Launch(l).ok());
  EXPECT_TRUE(absl::IsAlreadyExists(procs_->Launch(l)));
  EXPECT_TRUE(absl::IsNotFound(procs_->Kill(ActorId::Random(), absl::ZeroDuration())));
  ActorLaunch missing{ActorId::Random(), {"/nonexistent/actor-host"}, {}, {}};
  EXPECT_FALSE(procs_->Launch(missing).ok());
}

// What an interpreter or an already loaded library reads only at its start cannot be given to
// a process forked from the server: such actors get a fresh interpreter.
TEST(ForkServerSuitsTest, SettingsReadAtInterpreterStartRuleOutTheFork) {
  EXPECT_TRUE(ForkServerSuits({}));
  EXPECT_TRUE(ForkServerSuits({{"PYTHONPATH", "/x"},
                               {"SKYRL_PYTHON", "/venv/bin/python3"},
                               {"CUDA_VISIBLE_DEVICES", "1"},
                               {"MY_SETTING", "1"}}));
  for (const char* name : {"PYTHONHASHSEED", "PYTHONUNBUFFERED", "LD_PRELOAD", "LD_LIBRARY_PATH",
                           "MALLOC_ARENA_MAX", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                           "TORCH_NUM_THREADS", "GOTO_NUM_THREADS"})
    EXPECT_FALSE(ForkServerSuits({{"MY_SETTING", "1"}, {name, "1"}})) << name;
}

}  // namespace
}  // namespace skyrl::worker
