#include "rl/job/job_setup.h"

#include "absl/strings/str_cat.h"
#include "rl/tasks/tasks.h"
#include "rl/tasks/tokenizer.h"
#include "runtime/common/proto_method.h"
#include "skyrl/rl.pb.h"

namespace skyrl::rl {

absl::StatusOr<JobSetup> MakeJobSetup(const JobConfig& config) {
  JobSetup s;
  s.config = config;
  const JobConfig::Algorithm& ac = config.trainer.algorithm;
  auto task = FindTask(config.environment.task);
  if (!task.ok())
    return absl::InvalidArgumentError(absl::StrCat("environment.task: ", task.status().message()));
  if (auto st = ValidateTaskOptions(config.environment.options); !st.ok()) return st;
  s.sampling = {config.generator.temperature, config.generator.top_p, config.generator.max_generate_length};
  if (auto st = ValidateSamplingParams(s.sampling); !st.ok()) return st;
  s.grpo = GrpoParams{
      ac.group_size,
      ac.eps_clip_low,
      ac.eps_clip_high,
      ac.kl_coef,
      ac.advantage_eps,
      ac.loss_reduction == "sequence_mean" ? LossReduction::kSequenceMean : LossReduction::kTokenMean};
  s.optim.lr = ac.lr;
  s.optim.weight_decay = ac.weight_decay;
  s.optim.max_grad_norm = ac.max_grad_norm;
  s.optim.update_epochs = ac.update_epochs;
  s.optim.mini_batches = ac.mini_batches;
  s.model = config.trainer.model;
  s.model.vocab = Tokenizer::kVocab;
  if (auto st = ValidateTensorParallel(s.model, config.trainer.tp_size); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("trainer.", st.message()));
  }
  if (auto st = ValidateTensorParallel(s.model, config.generator.tensor_parallel_size,
                                       "generator.tensor_parallel_size");
      !st.ok()) {
    return absl::InvalidArgumentError(st.message());
  }
  return s;
}

std::string EncodeRoleArgs(const RoleArgs& a) {
  v1::rl::RoleArgs m;
  m.set_config_yaml(a.config_yaml);
  m.set_rank(a.rank);
  m.set_world(a.world);
  m.set_master(a.master);
  m.set_engine(a.engine);
  return m.SerializeAsString();
}

absl::StatusOr<RoleArgs> DecodeRoleArgs(absl::string_view bytes) {
  absl::StatusOr<v1::rl::RoleArgs> m =
      ParseMessage<v1::rl::RoleArgs>(bytes, absl::StatusCode::kInvalidArgument, "init args");
  if (!m.ok()) return m.status();
  if (m->config_yaml().empty()) return absl::InvalidArgumentError("init args: config_yaml: needed");
  RoleArgs a{m->config_yaml(), m->rank(), m->world(), m->master(), m->engine()};
  if (a.world < 1 || a.rank < 0 || a.rank >= a.world) {
    return absl::InvalidArgumentError(
        absl::StrCat("init args: rank ", a.rank, " of world ", a.world, " is out of range"));
  }
  if (a.rank > 0 && a.master.find(':') == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("init args: master: want host:port for rank ", a.rank, ", got '", a.master, "'"));
  }
  return a;
}

}  // namespace skyrl::rl
