// grpo_reward: the rule-based rewards of the job's task, as an actor of skyrl-actor-host-rl.
// Methods: role_protocol.h, role::reward (rl.proto).
#include "absl/strings/str_cat.h"
#include "rl/job/role_env.h"
#include "rl/job/role_protocol.h"
#include "rl/tasks/tasks.h"
#include "rl/train/grpo_step.h"
#include "runtime/actor/actor.h"

namespace skyrl::rl {
namespace {

class RewardActor : public Actor {
 public:
  static absl::StatusOr<std::unique_ptr<RewardActor>> Create(absl::string_view init) {
    auto args = DecodeRoleArgs(init);
    if (!args.ok()) return args.status();
    auto setup = RoleSetup(*args);
    if (!setup.ok()) return setup.status();
    auto task = FindTask(setup->config.environment.task);
    if (!task.ok()) return task.status();
    auto self = std::unique_ptr<RewardActor>(new RewardActor());
    self->task_ = *task;
    return self;
  }
  static void RegisterMethods(MethodTable<RewardActor>& t) {
    t.Add(role::reward::kScore, &RewardActor::Score);
  }

  absl::StatusOr<pb::ScoreReply> Score(const pb::ScoreRequest& request) {
    const auto t0 = RoleClock::now();
    auto rollout = DecodeRollout(request.rollout());
    if (!rollout.ok()) return rollout.status();
    auto scored = ScoreRollout(*task_, role::ExamplesOf(request), *rollout);
    if (!scored.ok()) return scored.status();
    return role::MakeScoreReply(*scored, SecondsSince(t0));
  }

 private:
  RewardActor() = default;
  const Task* task_ = nullptr;
};
SKYRL_REGISTER_ACTOR(RewardActor, role::reward::kClass);

}  // namespace
}  // namespace skyrl::rl
