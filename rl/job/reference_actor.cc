// grpo_reference: the frozen initial policy at TP 1 (InitFullParameters with the trainer's
// seed), as an actor of skyrl-actor-host-rl: the reference log-probs for the KL term.
// Methods: role_protocol.h, role::reference (rl.proto).
#include "absl/strings/str_cat.h"
#include "rl/job/role_env.h"
#include "rl/job/role_protocol.h"
#include "rl/policy/policy.h"
#include "rl/policy/torch_status.h"
#include "rl/train/grpo_step.h"
#include "runtime/actor/actor.h"

namespace skyrl::rl {
namespace {

class ReferenceActor : public Actor {
 public:
  static absl::StatusOr<std::unique_ptr<ReferenceActor>> Create(absl::string_view init) {
    auto args = DecodeRoleArgs(init);
    if (!args.ok()) return args.status();
    auto setup = RoleSetup(*args);
    if (!setup.ok()) return setup.status();
    auto self = std::unique_ptr<ReferenceActor>(new ReferenceActor());
    self->setup_ = *setup;
    self->comm_ = MakeSingleRankCollective();
    auto policy =
        Policy::Create(setup->model, self->comm_.get(),
                       InitFullParameters(setup->model, static_cast<uint64_t>(setup->config.trainer.seed)));
    if (!policy.ok()) return policy.status();
    self->policy_ = std::move(*policy);
    return self;
  }
  static void RegisterMethods(MethodTable<ReferenceActor>& t) {
    t.Add(role::reference::kLogprobs, &ReferenceActor::Logprobs);
  }

  absl::StatusOr<pb::LogprobsReply> Logprobs(const pb::LogprobsRequest& request) {
    const auto t0 = RoleClock::now();
    auto rollout = DecodeRollout(request.rollout());
    if (!rollout.ok()) return rollout.status();
    absl::StatusOr<torch::Tensor> ref =
        RunTorch("reference logprobs", [&]() -> absl::StatusOr<torch::Tensor> {
          torch::NoGradGuard no_grad;
          return ResponseLogprobs(*policy_, rollout->sequences, rollout->valid, rollout->prompt_len,
                                  setup_.sampling.temperature);
        });
    if (!ref.ok()) return ref.status();
    return role::MakeLogprobsReply(SecondsSince(t0), *ref);
  }

 private:
  ReferenceActor() = default;
  JobSetup setup_;
  std::unique_ptr<Collective> comm_;
  std::unique_ptr<Policy> policy_;
};
SKYRL_REGISTER_ACTOR(ReferenceActor, role::reference::kClass);

}  // namespace
}  // namespace skyrl::rl
