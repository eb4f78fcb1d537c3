// The gRPC side of worker::HeadLink: the head's NodeService, other workers' WorkerService,
// and this worker's own actors, for the daemon (tests use fakes instead).
#pragma once

#include <memory>
#include <string>

#include "runtime/common/lease.h"
#include "runtime/worker/head_link.h"
#include "runtime/worker/worker_service.h"

namespace skyrl::worker {

// Calls carry `token` and the deadline HeadLink gives.
std::unique_ptr<HeadApi> MakeGrpcHeadApi(const std::string& head_address, const std::string& token);
// One channel per peer address, kept.
std::unique_ptr<PeerApi> MakeGrpcPeerApi(const std::string& token);

// The worker service's actors as the link sees them.
class ServiceActors final : public LocalActors {
 public:
  // `lease` (may be null: no lease) is what the actors read (WorkerServiceOptions.actor_lease).
  ServiceActors(WorkerServiceImpl& service, LeaseWriter* lease) : service_(service), lease_(lease) {}
  std::vector<ActorId> Running() const override { return service_.Running(); }
  void Stop(const std::vector<ActorId>& ids) override { service_.Stop(ids); }
  bool StopStart(const ActorId& id, int64_t incarnation) override {
    return service_.StopStart(id, incarnation);
  }
  int Fence(const std::string& reason) override { return service_.Fence(reason); }
  void Lease(absl::Duration valid_for) override {
    if (lease_ != nullptr) lease_->ExtendFor(valid_for);
  }

 private:
  WorkerServiceImpl& service_;
  LeaseWriter* lease_;
};

}  // namespace skyrl::worker
