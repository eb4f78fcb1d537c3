// The transport contract suite (tests/weight_sync/transport_contract.h) on NCCL. Every case
// needs one CUDA device per rank of its world (NCCL refuses two ranks of one communicator on
// one device) and skips, saying how many it needs, where there are fewer.
#include <algorithm>

#include "tests/weight_sync/nccl_endpoints.h"
#include "tests/weight_sync/transport_contract.h"

namespace skyrl::weight_sync::contract {
namespace {

TransportKind Nccl(bool broadcast) {
  TransportKind k;
  k.name = broadcast ? "nccl" : "nccl_p2p";
  k.make_all = [broadcast](const World& w, Rendezvous* rdv, const TransferOptions& o,
                           uint64_t generation) -> absl::StatusOr<std::vector<std::unique_ptr<Transport>>> {
    NcclOptions n;
    n.broadcast = broadcast;
    n.generation = generation;  // a new communicator's id never collides with an aborted one's
    n.transfer = o;
    // A peer's abort does not reach the other ranks: they end by their own timeouts, the last
    // of which (a sender's wait for the confirmation) is sync_timeout. Keep it short here so a
    // failure case takes seconds, not the default ten minutes.
    n.transfer.sync_timeout = std::max(o.io_timeout, absl::Seconds(3));
    // Creation (the main communicator, and broadcast groups during a sync) is collective and
    // slower than the failure cases' 300 ms io_timeout.
    n.init_timeout = std::max(o.io_timeout, absl::Seconds(20));
    auto e = testing::MakeNcclEndpoints(w, *rdv, n);
    if (!e.ok()) return e.status();
    return std::move(e->owned);
  };
  k.missing = [](int ranks) { return testing::MissingCudaDevices(ranks); };
  k.shared_fate = true;  // one communicator per sync, aborted on any failure
  return k;
}

// With and without ncclBroadcast for replicas' identical streams (the suite's worlds with two
// or more engines of the same TP take the broadcast path).
INSTANTIATE_TEST_SUITE_P(Transports, TransportContractTest, ::testing::Values(Nccl(true), Nccl(false)),
                         [](const ::testing::TestParamInfo<TransportKind>& i) { return i.param.name; });

}  // namespace
}  // namespace skyrl::weight_sync::contract
