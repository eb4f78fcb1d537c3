#include "rl/job/job_setup.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "rl/tasks/tasks.h"
#include "rl/tasks/tokenizer.h"

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
  nlohmann::json j;
  j["config"] = a.config_yaml;
  j["rank"] = a.rank;
  j["world"] = a.world;
  j["master"] = a.master;
  j["engine"] = a.engine;
  return j.dump();
}

absl::StatusOr<RoleArgs> DecodeRoleArgs(absl::string_view json) {
  nlohmann::json j = nlohmann::json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return absl::InvalidArgumentError("init args: not a JSON object");
  RoleArgs a;
  try {
    a.config_yaml = j.at("config").get<std::string>();
    a.rank = j.value("rank", 0);
    a.world = j.value("world", 1);
    a.master = j.value("master", std::string());
    a.engine = j.value("engine", 0);
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("init args: ", e.what()));
  }
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
