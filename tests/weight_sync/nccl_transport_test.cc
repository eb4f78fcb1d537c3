// The NCCL transport. Syncs need one CUDA device per rank and skip, saying so, without them.
#include "weight_sync/nccl/nccl_transport.h"

#include <cuda_runtime_api.h>

#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/weight_sync/sync_harness.h"
#include "weight_sync/plan/model_zoo.h"

namespace skyrl::weight_sync {
namespace {

using ::testing::HasSubstr;

int Devices() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

TEST(NcclOptionsTest, ValidatedWithoutTouchingCuda) {
  InMemoryRendezvous rdv;
  NcclOptions o;
  EXPECT_THAT(std::string(ValidateNcclOptions(o).message()), HasSubstr("rendezvous"));
  o.rendezvous = &rdv;
  o.num_senders = 1;
  o.num_receivers = 1;
  o.rank = 1;
  EXPECT_THAT(std::string(ValidateNcclOptions(o).message()), HasSubstr("rank 1 outside"));
  o.rank = 0;
  o.transfer.io_timeout = absl::ZeroDuration();
  EXPECT_THAT(std::string(ValidateNcclOptions(o).message()), HasSubstr("io_timeout"));
  o.transfer.io_timeout = absl::Seconds(1);
  o.transfer.checksums = true;  // computed on host copies of the buckets
  EXPECT_TRUE(ValidateNcclOptions(o).ok());
}

// Replicated engines receive identical streams from a sender: those go by one broadcast.
TEST(NcclBroadcastGroupsTest, IdenticalStreamsOfASenderFormOneGroup) {
  // One trainer rank (TP1) to three engines of TP1 and one of TP2: the three TP1 engines take
  // the whole shard in the same order; the TP2 engine's two ranks take other runs.
  auto w = testing::MakeWorld(MakeTransformer(TransformerConfig{}), Layout::Of(ModelParallel{.tp = 1}),
                              Layout{{ModelParallel{.tp = 1}, ModelParallel{.tp = 1}, ModelParallel{.tp = 1},
                                      ModelParallel{.tp = 2}}});
  ASSERT_TRUE(w.ok());
  const RankSchedule& s = (*w)->send_sched[0];
  ASSERT_EQ(s.peers.size(), 5u);
  auto groups = GroupIdenticalStreams(s);
  std::vector<std::vector<int>> peers;
  for (const auto& g : groups) {
    std::vector<int> ranks;
    for (size_t i : g) ranks.push_back(s.peers[i].peer);
    peers.push_back(ranks);
  }
  EXPECT_THAT(peers, ::testing::ElementsAre(::testing::ElementsAre(0, 1, 2), ::testing::ElementsAre(3),
                                            ::testing::ElementsAre(4)));
  // A group member's stream really is the same bytes: equal runs of the sender's shard.
  EXPECT_EQ(s.peers[groups[0][1]].runs, s.peers[groups[0][0]].runs);
  EXPECT_NE(s.peers[groups[1][0]].runs, s.peers[groups[2][0]].runs);
}

TEST(NcclBroadcastGroupsTest, EmptyStreamsAreLeftOutAndDistinctStreamsStayAlone) {
  RankSchedule s;
  s.peers.push_back({.peer = 0, .runs = {{0, 8}}, .bytes = 8});
  s.peers.push_back({.peer = 1, .runs = {}, .bytes = 0});
  s.peers.push_back({.peer = 2, .runs = {{8, 8}}, .bytes = 8});
  s.peers.push_back({.peer = 3, .runs = {{0, 8}}, .bytes = 8});
  auto groups = GroupIdenticalStreams(s);
  EXPECT_THAT(groups, ::testing::ElementsAre(::testing::ElementsAre(0u, 3u), ::testing::ElementsAre(2u)));
}

TEST(NcclTransportTest, WithoutADeviceCreationFailsClearly) {
  if (Devices() > 0) GTEST_SKIP() << "this machine has a CUDA device; the no-device path is not reachable";
  InMemoryRendezvous rdv;
  NcclOptions o;
  o.rendezvous = &rdv;
  o.num_senders = 1;
  o.num_receivers = 1;
  auto t = CreateNcclTransport(o);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("CUDA device 0 not available"));
}

// Trainer TP2 -> one engine TP1 and one engine TP2 (5 ranks, one GPU each).
TEST(NcclTransportTest, ReceiverShardsEqualTheirSlices) {
  auto w = testing::MakeWorld(MakeTransformer(TransformerConfig{}), Layout::Of(ModelParallel{.tp = 2}),
                              Layout{{ModelParallel{.tp = 1}, ModelParallel{.tp = 2}}});
  ASSERT_TRUE(w.ok());
  const int S = (*w)->plan.num_senders, R = (*w)->plan.num_receivers;
  if (Devices() < S + R) GTEST_SKIP() << "no CUDA device for each of " << S + R << " ranks (found " << Devices() << ")";
  InMemoryRendezvous rdv;
  auto weights = (*w)->Weights(1);
  std::vector<std::unique_ptr<VersionedShard>> shards;
  for (int r = 0; r < R; ++r) shards.push_back(std::make_unique<VersionedShard>((*w)->rlayout[r].Bytes()));
  std::vector<absl::Status> results(S + R);
  std::vector<std::thread> ranks;
  for (int g = 0; g < S + R; ++g)
    ranks.emplace_back([&, g] {
      NcclOptions o;
      o.rendezvous = &rdv;
      o.num_senders = S;
      o.num_receivers = R;
      o.is_sender = g < S;
      o.rank = g < S ? g : g - S;
      o.device = g;
      o.transfer.bucket_bytes = 4096;
      o.transfer.io_timeout = absl::Seconds(60);
      auto t = CreateNcclTransport(o);
      if (!t.ok()) {
        results[g] = t.status();
        return;
      }
      if (o.is_sender) {
        auto shard = (*w)->SenderShard(o.rank, weights);
        results[g] = (*t)->Send(1, (*w)->send_sched[o.rank], absl::MakeConstSpan(shard));
      } else {
        results[g] = (*t)->Receive(1, (*w)->recv_sched[o.rank], *shards[o.rank]);
      }
    });
  for (auto& t : ranks) t.join();
  for (int g = 0; g < S + R; ++g) ASSERT_TRUE(results[g].ok()) << "rank " << g << ": " << results[g];
  for (int r = 0; r < R; ++r) EXPECT_TRUE(*shards[r]->Current().bytes == (*w)->Expected(r, weights)) << "receiver " << r;
}

// One sender to three replicated engines (one broadcast group) and a TP2 engine (point to
// point), checksums on, two versions so the second reuses the group's communicator.
TEST(NcclTransportTest, BroadcastToReplicasWithChecksumsOverTwoVersions) {
  auto w = testing::MakeWorld(MakeTransformer(TransformerConfig{}), Layout::Of(ModelParallel{.tp = 1}),
                              Layout{{ModelParallel{.tp = 1}, ModelParallel{.tp = 1}, ModelParallel{.tp = 1},
                                      ModelParallel{.tp = 2}}});
  ASSERT_TRUE(w.ok());
  const int S = (*w)->plan.num_senders, R = (*w)->plan.num_receivers;
  if (Devices() < S + R) GTEST_SKIP() << "no CUDA device for each of " << S + R << " ranks (found " << Devices() << ")";
  InMemoryRendezvous rdv;
  std::vector<std::unique_ptr<VersionedShard>> shards;
  for (int r = 0; r < R; ++r) shards.push_back(std::make_unique<VersionedShard>((*w)->rlayout[r].Bytes()));
  std::vector<std::unique_ptr<Transport>> transports(S + R);
  std::vector<absl::Status> results(S + R);
  auto each_rank = [&](auto&& fn) {
    std::vector<std::thread> ranks;
    for (int g = 0; g < S + R; ++g) ranks.emplace_back([&, g] { results[g] = fn(g); });
    for (auto& t : ranks) t.join();
    for (int g = 0; g < S + R; ++g) ASSERT_TRUE(results[g].ok()) << "rank " << g << ": " << results[g];
  };
  each_rank([&](int g) -> absl::Status {
    NcclOptions o;
    o.rendezvous = &rdv;
    o.num_senders = S;
    o.num_receivers = R;
    o.is_sender = g < S;
    o.rank = g < S ? g : g - S;
    o.device = g;
    o.transfer.bucket_bytes = 4096;
    o.transfer.checksums = true;
    o.transfer.io_timeout = absl::Seconds(60);
    auto t = CreateNcclTransport(o);
    if (!t.ok()) return t.status();
    transports[g] = std::move(*t);
    return absl::OkStatus();
  });
  for (uint64_t version : {1u, 2u}) {
    auto weights = (*w)->Weights(version);
    each_rank([&](int g) -> absl::Status {
      if (g < S) {
        auto shard = (*w)->SenderShard(g, weights);
        return transports[g]->Send(version, (*w)->send_sched[g], absl::MakeConstSpan(shard));
      }
      return transports[g]->Receive(version, (*w)->recv_sched[g - S], *shards[g - S]);
    });
    for (int r = 0; r < R; ++r) {
      EXPECT_EQ(shards[r]->Current().version, version);
      EXPECT_TRUE(*shards[r]->Current().bytes == (*w)->Expected(r, weights)) << "receiver " << r << " v" << version;
    }
  }
}

}  // namespace
}  // namespace skyrl::weight_sync
