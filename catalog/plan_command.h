// `skyrl plan`: the command-line face of the planner. All logic lives here so that the main
// CLI only wires it:
//   CLI::App* plan = app.add_subcommand("plan", "...");
//   skyrl::catalog::PlanCommandOptions plan_opts;
//   skyrl::catalog::AddPlanFlags(plan, &plan_opts);
//   ... if (plan->parsed()) return skyrl::catalog::RunPlanCommand(plan_opts, std::cout, std::cerr);
// Exit codes: 0 a plan, 1 a refusal (does not fit, mode known not to work), 2 bad input
// (unknown model, malformed cluster, broken catalog), 3 an internal inconsistency (a planner
// bug, e.g. a placement group the scheduler would refuse).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "CLI/CLI.hpp"

namespace skyrl::catalog {

struct PlanCommandOptions {
  std::string model;
  std::string mode;     // "" | full | lora
  std::string cluster;  // "" | 2x8xB200 | path/to/cluster.yaml
  bool colocate = false;
  bool json = false;
  bool list = false;
  bool mtp = false;
  bool verify = false;  // also run the row's weight check (catalog/verify_sync.h)
  std::string backend;
  std::string rollout_precision;
  std::string training_precision;  // "": bf16, or the row's reference recipe at its stated minimum
  std::string optimizer_state;     // "": the recipe's own, or the row's reading at its stated minimum
  bool optimizer_offload = false;
  std::string models_dir;  // "" = DefaultModelsDir()
  int64_t seq_len = 16384;
  int micro_batch = 1;
  int kv_sequences = 64;
  int lora_rank = 32;
};

void AddPlanFlags(CLI::App* cmd, PlanCommandOptions* o);
int RunPlanCommand(const PlanCommandOptions& o, std::ostream& out, std::ostream& err);

}  // namespace skyrl::catalog
