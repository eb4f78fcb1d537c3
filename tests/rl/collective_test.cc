// The Collective contract, run against every implementation (threads over shared memory,
// TCP on loopback), then what is particular to each.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/rl/groups.h"

namespace skyrl::rl {
namespace {

using testing::GroupKind;
using testing::MakeGroup;

// Runs fn(rank, collective) on one thread per rank.
template <typename Fn>
void RunRanks(std::vector<std::unique_ptr<Collective>>& group, Fn fn) {
  std::vector<std::thread> threads;
  for (size_t r = 0; r < group.size(); ++r)
    threads.emplace_back([&, r] { fn(static_cast<int>(r), *group[r]); });
  for (auto& t : threads) t.join();
}

class CollectiveContract : public ::testing::TestWithParam<GroupKind> {};

TEST_P(CollectiveContract, AllReduceSumsAndEveryRankGetsTheSameBits) {
  auto group = MakeGroup(GetParam(), 3);
  ASSERT_EQ(group.size(), 3u);
  std::vector<std::vector<float>> data(3);
  std::vector<absl::Status> st(3);
  RunRanks(group, [&](int r, Collective& c) {
    EXPECT_EQ(c.Rank(), r);
    EXPECT_EQ(c.WorldSize(), 3);
    // Values whose float sum depends on the order: the implementation must fix one.
    data[r] = {1.0f + r, 0.1f * (r + 1), 1e8f * (r == 0 ? 1 : -1) + 1e-3f * r};
    for (int round = 0; round < 5 && st[r].ok(); ++round) st[r] = c.AllReduceSum(data[r].data(), 3);
  });
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(st[r].ok()) << st[r];
  // After 5 rounds each element is multiplied by 3^4 relative to the first sum.
  EXPECT_FLOAT_EQ(data[0][0], 6.0f * 81);
  EXPECT_FLOAT_EQ(data[0][1], 0.6f * 81);
  for (int r = 1; r < 3; ++r) EXPECT_EQ(0, std::memcmp(data[0].data(), data[r].data(), 3 * sizeof(float)));
}

TEST_P(CollectiveContract, LargeAndEmptyBuffers) {
  auto group = MakeGroup(GetParam(), 2);
  ASSERT_EQ(group.size(), 2u);
  std::vector<std::vector<float>> data(2);
  std::vector<absl::Status> st(2);
  RunRanks(group, [&](int r, Collective& c) {
    data[r].assign(1 << 20, static_cast<float>(r + 1));  // 4 MiB: many socket writes
    st[r] = c.AllReduceSum(data[r].data(), static_cast<int64_t>(data[r].size()));
    if (st[r].ok()) st[r] = c.AllReduceSum(nullptr, 0);
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(st[r].ok()) << st[r];
    EXPECT_EQ(data[r].front(), 3.0f);
    EXPECT_EQ(data[r].back(), 3.0f);
  }
}

TEST_P(CollectiveContract, BroadcastCopiesTheRootsBuffer) {
  auto group = MakeGroup(GetParam(), 4);
  ASSERT_EQ(group.size(), 4u);
  std::vector<std::vector<float>> data(4);
  std::vector<absl::Status> st(4);
  RunRanks(group, [&](int r, Collective& c) {
    data[r] = {float(r), float(10 * r)};
    st[r] = c.Broadcast(data[r].data(), 2, 2);
    std::vector<float> zero = {float(r)};
    if (st[r].ok()) st[r] = c.Broadcast(zero.data(), 1, 0);
    if (st[r].ok()) {
      EXPECT_EQ(zero[0], 0.0f);
    }
  });
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(st[r].ok()) << st[r];
    EXPECT_EQ(data[r], (std::vector<float>{2.0f, 20.0f}));
  }
}

TEST_P(CollectiveContract, MismatchedCallsFailOnEveryRankAndTheGroupGoesOn) {
  auto group = MakeGroup(GetParam(), 2);
  ASSERT_EQ(group.size(), 2u);
  std::vector<absl::Status> st(2), after(2);
  RunRanks(group, [&](int r, Collective& c) {
    std::vector<float> v(4, 1.0f);
    st[r] = c.AllReduceSum(v.data(), r == 0 ? 4 : 3);
    after[r] = c.AllReduceSum(v.data(), 4);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(st[r].code(), absl::StatusCode::kFailedPrecondition) << st[r];
    EXPECT_NE(st[r].message().find("disagree"), absl::string_view::npos) << st[r];
    EXPECT_TRUE(after[r].ok()) << after[r];
  }
}

TEST_P(CollectiveContract, BadArgumentsAreRejected) {
  auto group = MakeGroup(GetParam(), 1);
  float x = 3;
  EXPECT_TRUE(group[0]->AllReduceSum(&x, 1).ok());
  EXPECT_EQ(x, 3);
  EXPECT_EQ(group[0]->Broadcast(&x, 1, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(group[0]->AllReduceSum(&x, -1).code(), absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Kinds, CollectiveContract, ::testing::Values(GroupKind::kInProcess, GroupKind::kTcp),
                         [](const auto& info) { return testing::KindName(info.param); });

TEST(Collectives, BothKindsGiveTheSameBits) {
  std::vector<std::vector<float>> results;
  for (GroupKind k : {GroupKind::kInProcess, GroupKind::kTcp}) {
    auto group = MakeGroup(k, 3);
    ASSERT_EQ(group.size(), 3u);
    std::vector<std::vector<float>> data(3);
    RunRanks(group, [&](int r, Collective& c) {
      for (int i = 0; i < 64; ++i)
        data[r].push_back(std::sin(1.0f + i * (r + 1)) * std::pow(10.0f, (i % 7) - r));
      EXPECT_TRUE(c.AllReduceSum(data[r].data(), 64).ok());
    });
    results.push_back(data[1]);
  }
  EXPECT_EQ(0, std::memcmp(results[0].data(), results[1].data(), 64 * sizeof(float)));
}

TEST(InProcessCollective, AMissingRankTimesOutAndBreaksTheGroup) {
  auto group = MakeInProcessGroup(2, absl::Milliseconds(100));
  float x = 1;
  absl::Status first = group[0]->AllReduceSum(&x, 1);  // rank 1 never comes
  EXPECT_EQ(first.code(), absl::StatusCode::kDeadlineExceeded) << first;
  absl::Status later = group[1]->AllReduceSum(&x, 1);
  EXPECT_EQ(later.code(), absl::StatusCode::kAborted) << later;
}

TEST(TcpCollective, AMissingRankTimesOutAndBreaksTheCollective) {
  auto group = MakeGroup(GroupKind::kTcp, 2, absl::Milliseconds(200));
  ASSERT_EQ(group.size(), 2u);
  float x = 1;
  absl::Status first = group[0]->AllReduceSum(&x, 1);  // rank 1 never comes
  EXPECT_EQ(first.code(), absl::StatusCode::kDeadlineExceeded) << first;
  EXPECT_EQ(group[0]->AllReduceSum(&x, 1).code(), absl::StatusCode::kAborted);
}

TEST(TcpCollective, APeerThatDiesIsUnavailableNotAHang) {
  auto group = MakeGroup(GroupKind::kTcp, 2, absl::Seconds(30));
  ASSERT_EQ(group.size(), 2u);
  group[1].reset();  // closes its socket, as a killed process would
  float x = 1;
  const auto t0 = std::chrono::steady_clock::now();
  absl::Status s = group[0]->AllReduceSum(&x, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST(TcpCollective, SetUpErrors) {
  EXPECT_EQ(ConnectTcpCollective("127.0.0.1", 1, 0, 2, absl::Milliseconds(10)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ConnectTcpCollective("not-an-ip", 1, 1, 2, absl::Milliseconds(10)).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Nobody listens: the connect retries until its deadline, then says where it tried.
  auto listener = TcpListener::Bind("127.0.0.1", 0);
  ASSERT_TRUE(listener.ok());
  const int port = (*listener)->port();
  listener->reset();
  auto c = ConnectTcpCollective("127.0.0.1", port, 1, 2, absl::Milliseconds(100));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(c.status().message().find(absl::StrCat(":", port)), absl::string_view::npos) << c.status();
  // Rank 0 alone waits for nobody.
  auto l2 = TcpListener::Bind("127.0.0.1", 0);
  EXPECT_EQ((*l2)->Accept(2, absl::Milliseconds(100)).status().code(), absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace skyrl::rl
