// Everything a sync needs that depends only on (model, layouts, options): the plan and each
// rank's local layout and schedule. Compute it once per layout pair and keep it between
// training steps (planning the 1T case takes about 0.25 s; a sync of the same layouts needs
// none of it again). Each rank asks only for its own schedule.
//
// Immutable after Make; safe for concurrent use.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "weight_sync/plan/layout.h"
#include "weight_sync/plan/schedule.h"
#include "weight_sync/plan/transfer_planner.h"

namespace skyrl::weight_sync {

class PreparedSync {
 public:
  // InvalidArgument for a bad model, layout or cost model (naming which).
  static absl::StatusOr<std::unique_ptr<PreparedSync>> Make(Model model, Layout senders, Layout receivers,
                                                            PlanOptions options = {});

  const Model& model() const { return model_; }
  const Plan& plan() const { return plan_; }
  int num_senders() const { return plan_.num_senders; }
  int num_receivers() const { return plan_.num_receivers; }

  // A sender's local buffer layout and its schedule. OutOfRange for a rank outside the layout.
  absl::StatusOr<ShardLayout> SenderLayout(int sender) const;
  absl::StatusOr<RankSchedule> SenderSchedule(int sender) const;
  absl::StatusOr<ShardLayout> ReceiverLayout(int receiver) const;
  absl::StatusOr<RankSchedule> ReceiverSchedule(int receiver) const;

 private:
  PreparedSync() = default;
  Model model_;
  Plan plan_;
  std::unique_ptr<ShardMap> senders_, receivers_;
};

}  // namespace skyrl::weight_sync
