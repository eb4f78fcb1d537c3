// The collectives a tensor-parallel group needs: an all-reduce (sum) and a broadcast over the
// ranks of one group. Injected into the model so that the same layers run with threads as
// ranks (InProcessCollective, for tests), across processes (next: our TCP transport or
// Gloo), or alone (SingleRankCollective).
//
// Contract for every implementation:
// - Blocking. Every rank of the group calls the same operations in the same order with the
//   same element counts; a mismatch or a rank that does not arrive in time is an error on
//   every rank that notices (FailedPrecondition / DeadlineExceeded), never a hang.
// - AllReduceSum leaves bitwise identical results on every rank (a fixed summation order), so
//   replicated parameters stay identical without an extra broadcast.
// - One Collective object is used by one thread at a time (its rank's thread).
// Torch-free: it moves float buffers, so headers that include it stay light.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/status.h"

namespace skyrl::rl {

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int Rank() const = 0;
  virtual int WorldSize() const = 0;
  // In place: data[i] becomes the sum over ranks of data[i]. REQUIRES: count >= 0.
  virtual absl::Status AllReduceSum(float* data, int64_t count) = 0;
  // In place: every rank's data becomes root's. REQUIRES: 0 <= root < WorldSize().
  virtual absl::Status Broadcast(float* data, int64_t count, int root) = 0;
};

// A group of one: both operations are no-ops. Thread-compatible.
std::unique_ptr<Collective> MakeSingleRankCollective();

}  // namespace skyrl::rl
