// skyrl-plan: `skyrl plan` as a stand-alone tool until the main CLI wires the subcommand.
#include <iostream>

#include "CLI/CLI.hpp"
#include "catalog/plan_command.h"

int main(int argc, char** argv) {
  CLI::App app{"skyrl-plan: does a model fit a cluster, and how (the supported-models table, executable)"};
  skyrl::catalog::PlanCommandOptions opts;
  skyrl::catalog::AddPlanFlags(&app, &opts);
  CLI11_PARSE(app, argc, argv);
  return skyrl::catalog::RunPlanCommand(opts, std::cout, std::cerr);
}
