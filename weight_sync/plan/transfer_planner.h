// The transfer planner: a pure function of (model, sender layout, receiver layout, options)
// giving, for every receiver, which boxes of which parameters come from which sender. Every byte
// a receiver holds (of the parameters the filter keeps) is covered by exactly one transfer.
//
// Heuristic (see docs/weight_sync.md): each receiver box is cut by the sender shards it meets
// into pieces; a piece may come from any sender holding those bytes (DP replicas, EP ranks
// replicating dense weights, TP ranks replicating norms). Pieces are taken largest first and
// each goes to the holder that minimises max(the holder's send time, the receiver's receive
// time) after adding it under the cost model (greedy least-loaded by predicted finish time,
// LPT order); ties go to the lower rank. The result is deterministic.
//
// Thread-safe: no shared state.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "weight_sync/plan/box.h"
#include "weight_sync/plan/cost_model.h"
#include "weight_sync/plan/layout.h"
#include "weight_sync/plan/model.h"

namespace skyrl::weight_sync {

struct Transfer {
  int param = 0;
  int sender = 0;    // rank in the sender layout
  int receiver = 0;  // rank in the receiver layout
  Box box;           // byte-space box of the full tensor; inside one sender box and one receiver box
  int64_t Bytes() const { return box.Volume(); }
};

struct PlanOptions {
  ParamFilter filter;  // empty: every parameter
  CostModel cost;
};

struct EndpointLoad {
  int64_t intra_bytes = 0;
  int64_t inter_bytes = 0;
  int64_t Bytes() const { return intra_bytes + inter_bytes; }
};

struct Plan {
  int num_senders = 0;
  int num_receivers = 0;
  // Sorted by (sender, receiver, param, box): the order in which a pair's bytes go on the wire.
  std::vector<Transfer> transfers;
  std::vector<EndpointLoad> send_load;  // per sender
  std::vector<EndpointLoad> recv_load;  // per receiver
  int64_t total_bytes = 0;
  double predicted_s = 0;    // slowest endpoint under the cost model
  double lower_bound_s = 0;  // see MakePlan

  // Indices into `transfers`, in wire order.
  std::vector<int> SendsOf(int sender) const;
  std::vector<int> ReceivesOf(int receiver) const;
};

// Computes the plan. lower_bound_s is the largest of: each receiver's bytes over the best
// bandwidth it could use (NVLink for the bytes some same-node sender holds, the NIC for the
// rest), each sender's bytes that no other sender holds over its bandwidth, and all bytes
// over the senders' summed bandwidth. InvalidArgument for a bad model or layout (naming
// which), or when model.params differ between the sides (they share one Model).
absl::StatusOr<Plan> MakePlan(const Model& model, const Layout& senders, const Layout& receivers,
                              const PlanOptions& options = {});

// Recomputes loads and predicted_s of `plan` under `cost` (tests, what-if studies).
void EvaluatePlan(const CostModel& cost, Plan& plan);

}  // namespace skyrl::weight_sync
