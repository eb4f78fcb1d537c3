// What an RL role actor finds in its process: its job set-up from the init arguments, and
// the cluster it runs in (SKYRL_ADDRESS and SKYRL_TOKEN, set by the worker), as the head's KV
// for weight-sync rendezvous or as a client for calls to other actors.
#pragma once

#include <chrono>
#include <memory>

#include "absl/status/statusor.h"
#include "rl/job/job_setup.h"
#include "runtime/client/client.h"
#include "weight_sync/rendezvous.h"

namespace skyrl::rl {

// The job set-up from the init arguments' config, and torch's thread count from it.
absl::StatusOr<JobSetup> RoleSetup(const RoleArgs& args);
// The head's KV as the transports' rendezvous. FailedPrecondition naming `what` outside a
// cluster.
absl::StatusOr<std::unique_ptr<weight_sync::Rendezvous>> ConnectRendezvous(absl::string_view what);
// A client to the cluster, for calls that may wait out an actor's restart.
absl::StatusOr<std::unique_ptr<Client>> ConnectClient(absl::string_view what);

using RoleClock = std::chrono::steady_clock;
inline double SecondsSince(RoleClock::time_point t0) {
  return std::chrono::duration<double>(RoleClock::now() - t0).count();
}

}  // namespace skyrl::rl
