// The NCCL transport. Syncs need one CUDA device per rank and skip, saying so, without them;
// the creation tests need one device. The transport contract suite runs on NCCL in
// nccl_transport_contract_test.cc.
#include "weight_sync/nccl/nccl_transport.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <iostream>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/weight_sync/nccl_endpoints.h"
#include "weight_sync/plan/hf_params.h"

namespace skyrl::weight_sync {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

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
  o.init_timeout = absl::Seconds(-1);
  EXPECT_THAT(std::string(ValidateNcclOptions(o).message()), HasSubstr("init_timeout must be >= 0"));
  o.init_timeout = absl::ZeroDuration();  // creation bounded by io_timeout
  EXPECT_TRUE(ValidateNcclOptions(o).ok());
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

// Polls `done` every 50 us until it says true or `limit` passes; false on timeout.
template <typename F>
bool PollFor(absl::Duration limit, F done) {
  const absl::Time deadline = absl::Now() + limit;
  while (!done()) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Microseconds(50));
  }
  return true;
}

// The libnccl and driver this binary runs against work, the way the transport uses them: a
// one-rank non-blocking communicator (config from the nccl.h we built with) sends a buffer to
// itself in a group. Tells a broken environment (a libnccl older than our headers, a driver
// mismatch) from a bug in the transport, whose tests then fail for that reason too.
TEST(NcclEnvironmentTest, OneRankNonBlockingCommunicatorSendsToItself) {
  if (std::string why = testing::MissingCudaDevices(1); !why.empty()) GTEST_SKIP() << why;
  int version = 0;
  ASSERT_EQ(ncclGetVersion(&version), ncclSuccess);
  std::cout << "NCCL runtime " << version << ", headers " << NCCL_VERSION_CODE << "\n";
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, 1, id, 0, &config);
  ASSERT_TRUE(r == ncclSuccess || r == ncclInProgress) << ncclGetErrorString(r);
  ncclResult_t state = ncclInProgress;
  auto settled = [&] {
    ncclCommGetAsyncError(comm, &state);
    return state != ncclInProgress;
  };
  ASSERT_TRUE(PollFor(absl::Seconds(30), settled)) << "init of one rank did not finish";
  ASSERT_EQ(state, ncclSuccess) << ncclGetErrorString(state);

  constexpr size_t kBytes = 1 << 20;
  std::vector<uint8_t> sent(kBytes), got(kBytes, 0);
  for (size_t i = 0; i < kBytes; ++i) sent[i] = static_cast<uint8_t>(i * 31 + 7);
  void *src = nullptr, *dst = nullptr;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaMalloc(&src, kBytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dst, kBytes), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(src, sent.data(), kBytes, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(dst, 0, kBytes), cudaSuccess);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclSend(src, kBytes, ncclUint8, 0, comm, stream), ncclSuccess);
  EXPECT_EQ(ncclRecv(dst, kBytes, ncclUint8, 0, comm, stream), ncclSuccess);
  r = ncclGroupEnd();
  ASSERT_TRUE(r == ncclSuccess || r == ncclInProgress) << ncclGetErrorString(r);
  ASSERT_TRUE(PollFor(absl::Seconds(30), settled)) << "enqueue did not finish";
  ASSERT_EQ(state, ncclSuccess) << ncclGetErrorString(state);
  ASSERT_TRUE(PollFor(absl::Seconds(30), [&] { return cudaStreamQuery(stream) != cudaErrorNotReady; }))
      << "the send to itself did not complete";
  ASSERT_EQ(cudaStreamQuery(stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(got.data(), dst, kBytes, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_TRUE(got == sent);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  cudaStreamDestroy(stream);
  cudaFree(src);
  cudaFree(dst);
}

TEST(NcclTransportTest, WithoutADeviceCreationFailsClearly) {
  if (testing::CudaDevices() > 0)
    GTEST_SKIP() << "this machine has a CUDA device; the no-device path is not reachable";
  InMemoryRendezvous rdv;
  NcclOptions o;
  o.rendezvous = &rdv;
  o.num_senders = 1;
  o.num_receivers = 1;
  auto t = CreateNcclTransport(o);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("CUDA device 0 not available"));
}

NcclOptions SyncOptions() {
  NcclOptions o;
  o.transfer.bucket_bytes = 4096;  // many buckets per stream
  o.transfer.io_timeout = absl::Seconds(60);
  return o;
}

// Trainer TP2 -> one engine TP1 and one engine TP2 (5 ranks, one GPU each).
TEST(NcclTransportTest, ReceiverShardsEqualTheirSlices) {
  auto w = testing::MakeWorld(MakeTransformer(TransformerConfig{}), Layout::Of(ModelParallel{.tp = 2}),
                              Layout{{ModelParallel{.tp = 1}, ModelParallel{.tp = 2}}});
  ASSERT_TRUE(w.ok());
  const int S = (*w)->plan.num_senders, R = (*w)->plan.num_receivers;
  if (std::string why = testing::MissingCudaDevices(S + R); !why.empty()) GTEST_SKIP() << why;
  InMemoryRendezvous rdv;
  auto e = testing::MakeNcclEndpoints(**w, rdv, SyncOptions());
  ASSERT_TRUE(e.ok()) << e.status();
  auto weights = (*w)->Weights(1);
  std::vector<std::unique_ptr<VersionedShard>> shards;
  for (int r = 0; r < R; ++r) shards.push_back(std::make_unique<VersionedShard>((*w)->rlayout[r].Bytes()));
  auto res =
      testing::RunSync(**w, 1, testing::AllSenderShards(**w, weights), e->senders, e->receivers, shards);
  ASSERT_EQ(res.FirstError(), "");
  for (int r = 0; r < R; ++r)
    EXPECT_TRUE(*shards[r]->Current().bytes == (*w)->Expected(r, weights)) << "receiver " << r;
}

// One sender to three replicated engines (one broadcast group) and a TP2 engine (point to
// point), checksums on, two versions so the second reuses the group's communicator.
TEST(NcclTransportTest, BroadcastToReplicasWithChecksumsOverTwoVersions) {
  auto w = testing::MakeWorld(MakeTransformer(TransformerConfig{}), Layout::Of(ModelParallel{.tp = 1}),
                              Layout{{ModelParallel{.tp = 1}, ModelParallel{.tp = 1}, ModelParallel{.tp = 1},
                                      ModelParallel{.tp = 2}}});
  ASSERT_TRUE(w.ok());
  const int S = (*w)->plan.num_senders, R = (*w)->plan.num_receivers;
  if (std::string why = testing::MissingCudaDevices(S + R); !why.empty()) GTEST_SKIP() << why;
  InMemoryRendezvous rdv;
  NcclOptions o = SyncOptions();
  o.transfer.checksums = true;
  auto e = testing::MakeNcclEndpoints(**w, rdv, o);
  ASSERT_TRUE(e.ok()) << e.status();
  std::vector<std::unique_ptr<VersionedShard>> shards;
  for (int r = 0; r < R; ++r) shards.push_back(std::make_unique<VersionedShard>((*w)->rlayout[r].Bytes()));
  for (uint64_t version : {1u, 2u}) {
    auto weights = (*w)->Weights(version);
    auto res = testing::RunSync(**w, version, testing::AllSenderShards(**w, weights), e->senders,
                                e->receivers, shards);
    ASSERT_EQ(res.FirstError(), "") << "v" << version;
    for (int r = 0; r < R; ++r) {
      EXPECT_EQ(shards[r]->Current().version, version);
      EXPECT_TRUE(*shards[r]->Current().bytes == (*w)->Expected(r, weights))
          << "receiver " << r << " v" << version;
    }
  }
}

// What one GPU can check (NCCL refuses two ranks of one communicator on one device, so no sync
// runs on one): creation is bounded and cleans up when the communicator cannot form. (And
// NcclEnvironmentTest above: the NCCL library works here at all.)

// Sender 0 of a two-rank world whose receiver never comes: NCCL's bootstrap waits for it until
// init_timeout, then the pending communicator is aborted and creation fails, without a hang.
TEST(NcclTransportTest, CreationTimesOutWhenAPeerNeverComes) {
  if (std::string why = testing::MissingCudaDevices(1); !why.empty()) GTEST_SKIP() << why;
  InMemoryRendezvous rdv;
  NcclOptions o;
  o.rendezvous = &rdv;
  o.num_senders = 1;
  o.num_receivers = 1;
  o.init_timeout = absl::Seconds(2);
  const absl::Time start = absl::Now();
  auto t = CreateNcclTransport(o);
  const absl::Duration took = absl::Now() - start;
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDeadlineExceeded) << t.status();
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("communicator init of 2 ranks"));
  EXPECT_GE(took, absl::Seconds(2));
  EXPECT_LT(took, absl::Seconds(30)) << "the abort of a pending init must return";
  // The id was published: a later rank 1 would have found it.
  EXPECT_TRUE(rdv.Get("weight_sync/nccl_id/0", absl::ZeroDuration()).ok());
}

// A receiver whose sender 0 never publishes the ncclUniqueId fails by init_timeout, naming the key.
TEST(NcclTransportTest, CreationTimesOutWithoutTheUniqueId) {
  if (std::string why = testing::MissingCudaDevices(1); !why.empty()) GTEST_SKIP() << why;
  InMemoryRendezvous rdv;
  NcclOptions o;
  o.rendezvous = &rdv;
  o.num_senders = 1;
  o.num_receivers = 1;
  o.is_sender = false;
  o.generation = 7;
  o.init_timeout = absl::Milliseconds(300);
  auto t = CreateNcclTransport(o);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDeadlineExceeded) << t.status();
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("weight_sync/nccl_id/7"));
}

// Two ranks on one device: NCCL refuses ("Duplicate GPU detected", ncclInvalidUsage) or, as its
// docs allow, never forms the communicator; either way both ranks fail within init_timeout.
TEST(NcclTransportTest, TwoRanksOnOneDeviceFailBothWithinTheTimeout) {
  if (std::string why = testing::MissingCudaDevices(1); !why.empty()) GTEST_SKIP() << why;
  InMemoryRendezvous rdv;
  std::vector<absl::StatusOr<std::unique_ptr<Transport>>> made;
  for (int g = 0; g < 2; ++g) made.emplace_back(absl::UnknownError("not created"));
  const absl::Time start = absl::Now();
  std::vector<std::thread> ranks;
  for (int g = 0; g < 2; ++g)
    ranks.emplace_back([&, g] {
      NcclOptions o;
      o.rendezvous = &rdv;
      o.num_senders = 1;
      o.num_receivers = 1;
      o.is_sender = g == 0;
      o.device = 0;
      o.init_timeout = absl::Seconds(5);
      made[g] = CreateNcclTransport(o);
    });
  for (std::thread& t : ranks) t.join();
  for (int g = 0; g < 2; ++g) {
    ASSERT_FALSE(made[g].ok()) << "rank " << g << " formed a communicator sharing its device";
    EXPECT_THAT(made[g].status().code(),
                AnyOf(absl::StatusCode::kUnavailable, absl::StatusCode::kDeadlineExceeded))
        << made[g].status();
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
}

}  // namespace
}  // namespace skyrl::weight_sync
