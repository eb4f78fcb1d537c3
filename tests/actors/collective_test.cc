#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "actors/model/in_process_collective.h"

namespace skyrl::actors {
namespace {

// Runs fn(rank, collective) on one thread per rank.
template <typename Fn>
void RunRanks(std::vector<std::unique_ptr<Collective>>& group, Fn fn) {
  std::vector<std::thread> threads;
  for (size_t r = 0; r < group.size(); ++r) threads.emplace_back([&, r] { fn(static_cast<int>(r), *group[r]); });
  for (auto& t : threads) t.join();
}

TEST(InProcessCollective, AllReduceSumsAndEveryRankGetsTheSameBits) {
  auto group = MakeInProcessGroup(3);
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

TEST(InProcessCollective, BroadcastCopiesTheRootsBuffer) {
  auto group = MakeInProcessGroup(4);
  std::vector<std::vector<float>> data(4);
  std::vector<absl::Status> st(4);
  RunRanks(group, [&](int r, Collective& c) {
    data[r] = {float(r), float(10 * r)};
    st[r] = c.Broadcast(data[r].data(), 2, 2);
  });
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(st[r].ok()) << st[r];
    EXPECT_EQ(data[r], (std::vector<float>{2.0f, 20.0f}));
  }
}

TEST(InProcessCollective, MismatchedCountsFailOnEveryRank) {
  auto group = MakeInProcessGroup(2);
  std::vector<absl::Status> st(2);
  RunRanks(group, [&](int r, Collective& c) {
    std::vector<float> v(4, 1.0f);
    st[r] = c.AllReduceSum(v.data(), r == 0 ? 4 : 3);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(st[r].code(), absl::StatusCode::kFailedPrecondition) << st[r];
    EXPECT_NE(st[r].message().find("disagree"), absl::string_view::npos);
  }
}

TEST(InProcessCollective, AMissingRankTimesOutAndBreaksTheGroup) {
  auto group = MakeInProcessGroup(2, absl::Milliseconds(100));
  float x = 1;
  absl::Status first = group[0]->AllReduceSum(&x, 1);  // rank 1 never comes
  EXPECT_EQ(first.code(), absl::StatusCode::kDeadlineExceeded) << first;
  absl::Status later = group[1]->AllReduceSum(&x, 1);
  EXPECT_EQ(later.code(), absl::StatusCode::kAborted) << later;
}

TEST(InProcessCollective, BadArgumentsAreRejected) {
  auto group = MakeInProcessGroup(1);
  float x = 3;
  EXPECT_TRUE(group[0]->AllReduceSum(&x, 1).ok());
  EXPECT_EQ(x, 3);
  EXPECT_EQ(group[0]->Broadcast(&x, 1, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(group[0]->AllReduceSum(&x, -1).code(), absl::StatusCode::kInvalidArgument);
  auto single = MakeSingleRankCollective();
  EXPECT_EQ(single->WorldSize(), 1);
  EXPECT_EQ(single->Broadcast(&x, 1, 1).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace skyrl::actors
