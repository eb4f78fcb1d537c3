// Threads as ranks: a tensor-parallel group inside one process over shared memory, for tests
// and for the single-process TP>1 run. Each rank's thread owns its Collective; the group's
// shared state lives as long as any member.
//
// An operation is two barriers: every rank posts its buffer, each sums (in rank order, so the
// result is bitwise the same everywhere) into its own scratch, and after the second barrier
// copies it back. A rank that does not arrive within `timeout` makes the waiting ranks return
// DeadlineExceeded, and the group is then broken: every later call fails at once (Aborted),
// so a dead thread never hangs its peers.
#pragma once

#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "rl/collective/collective.h"

namespace skyrl::rl {

// `world` collectives, element r being rank r. REQUIRES: world >= 1.
std::vector<std::unique_ptr<Collective>> MakeInProcessGroup(int world,
                                                            absl::Duration timeout = absl::Seconds(60));

}  // namespace skyrl::rl
