// Test helpers for the NCCL transport: how many CUDA devices this machine has, the skip reason
// when a test needs more, and every rank's transport of a World created at once. Creation is
// collective (each rank's CreateNcclTransport waits for all the others), so the ranks are
// threads here too, as in testing::RunSync. Global rank g (senders first, then receivers)
// drives CUDA device g: NCCL refuses two ranks of one communicator on one device.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "tests/weight_sync/sync_harness.h"
#include "weight_sync/nccl/nccl_transport.h"

namespace skyrl::weight_sync::testing {

inline int CudaDevices() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

// Why this machine cannot run `ranks` NCCL ranks, for GTEST_SKIP; "" when it can.
inline std::string MissingCudaDevices(int ranks) {
  const int found = CudaDevices();
  if (found >= ranks) return "";
  if (found == 0) return "no CUDA device";
  return absl::StrCat("needs ", ranks, " CUDA devices, found ", found);
}

// Every rank's endpoint of one sync, owned here.
struct NcclEndpoints {
  std::vector<std::unique_ptr<Transport>> owned;  // senders, then receivers
  std::vector<Transport*> senders, receivers;
};

// Creates the transport of every rank of `w` concurrently. `base` gives what all ranks share
// (transfer options, generation, init_timeout, broadcast); the rendezvous, the world's sizes,
// each rank's side, rank and device are set here. The first failure names its rank.
inline absl::StatusOr<NcclEndpoints> MakeNcclEndpoints(const World& w, Rendezvous& rdv,
                                                       const NcclOptions& base) {
  const int S = w.plan.num_senders, R = w.plan.num_receivers;
  std::vector<absl::StatusOr<std::unique_ptr<Transport>>> made;
  for (int g = 0; g < S + R; ++g) made.emplace_back(absl::UnknownError("not created"));
  std::vector<std::thread> ranks;
  for (int g = 0; g < S + R; ++g)
    ranks.emplace_back([&, g] {
      NcclOptions o = base;
      o.rendezvous = &rdv;
      o.num_senders = S;
      o.num_receivers = R;
      o.is_sender = g < S;
      o.rank = g < S ? g : g - S;
      o.device = g;
      made[g] = CreateNcclTransport(o);
    });
  for (std::thread& t : ranks) t.join();
  NcclEndpoints e;
  for (int g = 0; g < S + R; ++g) {
    if (!made[g].ok())
      return absl::Status(
          made[g].status().code(),
          absl::StrCat(g < S ? "sender " : "receiver ", g < S ? g : g - S, ": ", made[g].status().message()));
    (g < S ? e.senders : e.receivers).push_back(made[g]->get());
    e.owned.push_back(std::move(*made[g]));
  }
  return e;
}

// Each sender's shard of the weights `w` (World::Weights).
inline std::vector<std::vector<uint8_t>> AllSenderShards(const World& world,
                                                         const std::vector<std::vector<uint8_t>>& w) {
  std::vector<std::vector<uint8_t>> out;
  for (int s = 0; s < world.plan.num_senders; ++s) out.push_back(world.SenderShard(s, w));
  return out;
}

}  // namespace skyrl::weight_sync::testing
