#include "runtime/common/subprocess.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace skyrl {
namespace {

TEST(SubprocessTest, ReportsExitCodeAndWritesTheLog) {
  std::string log = ::testing::TempDir() + "/subprocess_test.log";
  std::remove(log.c_str());
  SpawnOptions o;
  o.argv = {"sh", "-c", "echo out; echo err >&2; echo $SKYRL_X; exit 3"};
  o.env_set = {{"SKYRL_X", "from-env"}};
  o.log_path = log;
  auto p = Subprocess::Start(o);
  ASSERT_TRUE(p.ok()) << p.status();
  ExitInfo e = p->Wait();
  EXPECT_FALSE(e.signaled);
  EXPECT_EQ(e.exit_code, 3);
  EXPECT_EQ(e.Describe(), "exit code 3");
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "out\nerr\nfrom-env\n");
}

TEST(SubprocessTest, TheChildInheritsNoDescriptorBeyondStdio) {
  // Not O_CLOEXEC, like hiredis's sockets; high, so it cannot be the child's own next one.
  int opened = open("/dev/null", O_RDONLY);
  ASSERT_GE(opened, 0);
  int leaked = dup2(opened, 200);
  close(opened);
  ASSERT_EQ(leaked, 200);
  std::string log = ::testing::TempDir() + "/subprocess_fds.log";
  std::remove(log.c_str());
  SpawnOptions o;
  o.argv = {"sh", "-c", "ls /proc/self/fd"};
  o.log_path = log;
  auto p = Subprocess::Start(o);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->Wait().ok());
  close(leaked);
  std::ifstream in(log);
  std::vector<int> fds;
  for (int fd; in >> fd;) fds.push_back(fd);
  // 0-2, and the descriptor ls itself opens to read the folder.
  EXPECT_LE(fds.size(), 4u);
  for (int fd : fds) EXPECT_NE(fd, leaked) << "the parent's descriptor leaked into the child";
}

TEST(SubprocessTest, ReportsTheSignalThatKilledIt) {
  auto p = Subprocess::Start({.argv = {"sleep", "30"}});
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->TryWait().has_value());
  ASSERT_TRUE(p->Signal(SIGKILL).ok());
  ExitInfo e = p->Wait();
  EXPECT_TRUE(e.signaled);
  EXPECT_EQ(e.signal, SIGKILL);
  EXPECT_EQ(e.Describe(), "killed by signal 9 (SIGKILL)");
}

TEST(SubprocessTest, StopEscalatesToSigkill) {
  auto p = Subprocess::Start({.argv = {"sh", "-c", "trap '' TERM; sleep 30"}});
  ASSERT_TRUE(p.ok());
  absl::SleepFor(absl::Milliseconds(100));  // let the shell install its trap
  ExitInfo e = p->Stop(absl::Milliseconds(200));
  EXPECT_TRUE(e.signaled);
  EXPECT_EQ(e.signal, SIGKILL);
}

TEST(SubprocessTest, MissingProgramIsAnError) {
  auto p = Subprocess::Start({.argv = {"/nonexistent/program"}});
  EXPECT_FALSE(p.ok());
  EXPECT_FALSE(Subprocess::Start({}).ok());
}

TEST(PickFreePortTest, GivesAUsablePort) {
  auto port = PickFreePort();
  ASSERT_TRUE(port.ok());
  EXPECT_GT(*port, 0);
  EXPECT_LT(*port, 65536);
}

}  // namespace
}  // namespace skyrl

#include "runtime/common/log_tail.h"

namespace skyrl {
namespace {

TEST(TailLinesTest, ReturnsTheLastLinesOldestFirst) {
  std::string path = ::testing::TempDir() + "/tail_test.log";
  {
    std::ofstream out(path);
    for (int i = 1; i <= 50; ++i) out << "line " << i << "\n";
  }
  EXPECT_EQ(TailLines(path, 3), (std::vector<std::string>{"line 48", "line 49", "line 50"}));
  EXPECT_EQ(TailLines(path, 100).size(), 50u);
  // Reading only the last 20 bytes drops the cut first line.
  EXPECT_EQ(TailLines(path, 100, 20), (std::vector<std::string>{"line 49", "line 50"}));
  EXPECT_TRUE(TailLines(path + ".missing", 5).empty());
}

}  // namespace
}  // namespace skyrl
