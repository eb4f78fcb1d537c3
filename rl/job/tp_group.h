// One RL role's tensor-parallel group across processes (trainer shards, engines of TP > 1):
// alone (world 1); rank 0, which binds at once and accepts the other ranks in the background
// (they connect from their own constructors, which the driver starts after reading rank 0's
// port); or rank r >= 1, which connects to RoleArgs::master. One thread at a time.
#pragma once

#include <future>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rl/job/job_setup.h"
#include "rl/collective/collective.h"
#include "rl/collective/tcp_collective.h"

namespace skyrl::rl {

class TpGroup {
 public:
  absl::Status Join(const RoleArgs& args);
  // Rank 0: waits until every rank has connected (Unavailable naming `who` if one never
  // does). Others: at once.
  absl::Status Complete(absl::string_view who);
  // Null until the group is complete (rank 0 before Complete()).
  Collective* comm() const { return comm_.get(); }
  // Rank 0's port (0 for other ranks).
  int port() const { return listener_ ? listener_->port() : 0; }

 private:
  std::unique_ptr<TcpListener> listener_;
  std::future<absl::StatusOr<std::unique_ptr<Collective>>> accepted_;
  std::unique_ptr<Collective> comm_;
};

}  // namespace skyrl::rl
