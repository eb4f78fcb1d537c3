#include "weight_sync/plan/prepared_sync.h"

#include "absl/strings/str_cat.h"

namespace skyrl::weight_sync {

absl::StatusOr<std::unique_ptr<PreparedSync>> PreparedSync::Make(Model model, Layout senders,
                                                                 Layout receivers, PlanOptions options) {
  std::unique_ptr<PreparedSync> p(new PreparedSync());
  p->model_ = std::move(model);  // the ShardMaps below point at this copy, which never moves
  absl::StatusOr<Plan> plan = MakePlan(p->model_, senders, receivers, options);
  if (!plan.ok()) return plan.status();
  p->plan_ = std::move(*plan);
  auto s = ShardMap::Build(p->model_, senders);
  auto r = ShardMap::Build(p->model_, receivers);
  if (!s.ok()) return s.status();
  if (!r.ok()) return r.status();
  p->senders_ = std::make_unique<ShardMap>(std::move(*s));
  p->receivers_ = std::make_unique<ShardMap>(std::move(*r));
  return p;
}

absl::StatusOr<ShardLayout> PreparedSync::SenderLayout(int sender) const {
  if (sender < 0 || sender >= plan_.num_senders)
    return absl::OutOfRangeError(absl::StrCat("sender ", sender, " outside 0..", plan_.num_senders - 1));
  return ShardLayout::Of(model_, *senders_, sender);
}

absl::StatusOr<RankSchedule> PreparedSync::SenderSchedule(int sender) const {
  absl::StatusOr<ShardLayout> l = SenderLayout(sender);
  if (!l.ok()) return l.status();
  return SendSchedule(plan_, *l, sender);
}

absl::StatusOr<ShardLayout> PreparedSync::ReceiverLayout(int receiver) const {
  if (receiver < 0 || receiver >= plan_.num_receivers)
    return absl::OutOfRangeError(
        absl::StrCat("receiver ", receiver, " outside 0..", plan_.num_receivers - 1));
  return ShardLayout::Of(model_, *receivers_, receiver);
}

absl::StatusOr<RankSchedule> PreparedSync::ReceiverSchedule(int receiver) const {
  absl::StatusOr<ShardLayout> l = ReceiverLayout(receiver);
  if (!l.ok()) return l.status();
  return ReceiveSchedule(plan_, *l, receiver);
}

}  // namespace skyrl::weight_sync
