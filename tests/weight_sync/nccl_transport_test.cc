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
  o.transfer.checksums = true;
  EXPECT_EQ(ValidateNcclOptions(o).code(), absl::StatusCode::kUnimplemented);
  o.transfer.checksums = false;
  EXPECT_TRUE(ValidateNcclOptions(o).ok());
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

}  // namespace
}  // namespace skyrl::weight_sync
