// The typed pieces every role and driver derives from a JobConfig (the same derivation as
// RunLocalGrpo's, so that the distributed job computes what the local loop does).
// Also the init-argument document of the RL actors (JSON):
//   {"config": "<the job's YAML text>", "rank": r, "world": n, "master": "host:port",
//    "engine": e}
// Pure functions; thread-safe.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "rl/algo/grpo.h"
#include "rl/algo/sampler.h"
#include "rl/policy/config.h"
#include "rl/train/job_config.h"

namespace skyrl::rl {

struct JobSetup {
  JobConfig config;
  PolicyConfig model;  // vocab from the tokenizer
  SamplingParams sampling;
  GrpoParams grpo;
  OptimParams optim;
};

// InvalidArgument naming the config key.
absl::StatusOr<JobSetup> MakeJobSetup(const JobConfig& config);

// A role actor's constructor arguments, on the wire as rl.proto's RoleArgs.
struct RoleArgs {
  std::string config_yaml;
  int rank = 0;
  int world = 1;
  std::string master;  // trainer ranks >= 1: rank 0's host:port
  int engine = 0;
};
std::string EncodeRoleArgs(const RoleArgs& a);
// InvalidArgument naming the field: no config, rank outside 0..world-1, no master for rank > 0.
absl::StatusOr<RoleArgs> DecodeRoleArgs(absl::string_view bytes);

}  // namespace skyrl::rl
