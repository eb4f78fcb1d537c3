// TcpCollective across real processes: ranks 1..n-1 are forked children (this binary does
// not load LibTorch, and no test thread is alive at fork time).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "rl/collective/tcp_collective.h"

namespace skyrl::rl {
namespace {

// Child body: returns the exit code (0 = the sums were right).
int RunChild(int port, int rank, int world, int rounds) {
  auto c = ConnectTcpCollective("127.0.0.1", port, rank, world, absl::Seconds(20));
  if (!c.ok()) return 10;
  std::vector<float> v(1000);
  for (int round = 0; round < rounds; ++round) {
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(rank * 1000 + i + round);
    if (!(*c)->AllReduceSum(v.data(), static_cast<int64_t>(v.size())).ok()) return 11;
    // Sum over ranks r of (r * 1000 + i + round).
    for (size_t i = 0; i < v.size(); ++i) {
      const float want = static_cast<float>(1000 * world * (world - 1) / 2 + world * (i + round));
      if (v[i] != want) return 12;
    }
  }
  return 0;
}

TEST(TcpCollectiveProcesses, AllReduceAcrossProcesses) {
  constexpr int kWorld = 3, kRounds = 20;
  auto listener = TcpListener::Bind("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok()) << listener.status();
  std::vector<pid_t> kids;
  for (int r = 1; r < kWorld; ++r) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) ::_exit(RunChild((*listener)->port(), r, kWorld, kRounds));
    kids.push_back(pid);
  }
  auto root = (*listener)->Accept(kWorld, absl::Seconds(20));
  ASSERT_TRUE(root.ok()) << root.status();
  std::vector<float> v(1000);
  for (int round = 0; round < kRounds; ++round) {
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i + round);
    ASSERT_TRUE((*root)->AllReduceSum(v.data(), 1000).ok());
    EXPECT_EQ(v[7], static_cast<float>(1000 * 3 + 3 * (7 + round)));
  }
  for (pid_t pid : kids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child exit " << WEXITSTATUS(status);
  }
}

TEST(TcpCollectiveProcesses, AKilledRankIsUnavailableOnTheOthers) {
  auto listener = TcpListener::Bind("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok()) << listener.status();
  const int port = (*listener)->port();
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto c = ConnectTcpCollective("127.0.0.1", port, 1, 2, absl::Seconds(20));
    ::pause();  // waits to be killed, holding its connection
    ::_exit(0);
  }
  auto root = (*listener)->Accept(2, absl::Seconds(20));
  ASSERT_TRUE(root.ok()) << root.status();
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  float x = 1;
  absl::Status s = (*root)->AllReduceSum(&x, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_EQ((*root)->AllReduceSum(&x, 1).code(), absl::StatusCode::kAborted);
}

}  // namespace
}  // namespace skyrl::rl
