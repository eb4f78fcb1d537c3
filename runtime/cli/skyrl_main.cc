// skyrl: the command-line tool. Registers the subcommands (commands.h: each area's file) and
// runs the one chosen.
#include <cstdlib>
#include <iostream>

#include "CLI/CLI.hpp"
#include "catalog/plan_command.h"
#include "runtime/cli/commands.h"
#include "runtime/daemons/daemons.h"

int main(int argc, char** argv) {
  CLI::App app{"skyrl: control a SkyRL Runtime cluster"};
  app.require_subcommand(1);
  app.fallthrough();  // --address and --token-file may follow the subcommand
  skyrl::cli::GlobalOptions global;
  const char* env_address = std::getenv("SKYRL_ADDRESS");
  const std::string started = skyrl::daemons::StartedHeadAddress();
  global.address = env_address ? env_address : !started.empty() ? started : "127.0.0.1:7420";
  app.add_option("--address", global.address,
                 "head HOST:PORT (default $SKYRL_ADDRESS, else the head `skyrl start --head` runs here, else "
                 "127.0.0.1:7420)");
  app.add_option("--token-file", global.token_file,
                 "cluster token file (else $SKYRL_TOKEN, else ~/.skyrl/token)");
  // Everything after the first "--" is a job driver's command, taken before CLI11 sees it (its
  // own "--" handling would still read options like -c of the command).
  std::vector<std::string> entrypoint;
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--") {
      entrypoint.assign(argv + i + 1, argv + argc);
      argc = i;
      break;
    }
  std::vector<skyrl::cli::Command> commands;
  for (std::vector<skyrl::cli::Command> more :
       {skyrl::cli::AddClusterCommands(app, global), skyrl::cli::AddTelemetryCommands(app, global),
        skyrl::cli::AddDaemonCommands(app, global),
        skyrl::cli::AddJobCommands(app, global, std::move(entrypoint))})
    commands.insert(commands.end(), more.begin(), more.end());
  CLI::App* plan = app.add_subcommand(
      "plan",
      "does a model fit a cluster, and how: layouts, memory per GPU, placement groups (no head needed)");
  skyrl::catalog::PlanCommandOptions plan_opts;
  skyrl::catalog::AddPlanFlags(plan, &plan_opts);
  commands.push_back({plan, [&] { return skyrl::catalog::RunPlanCommand(plan_opts, std::cout, std::cerr); }});
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help prints and exits 0; any other parse error (unknown flag, value outside a fixed
    // list, missing argument) is bad input: exit 2, as every other input error of the CLI.
    return app.exit(e) == 0 ? 0 : 2;
  }
  // The deepest chosen command runs (`job` itself only groups its subcommands).
  for (auto it = commands.rbegin(); it != commands.rend(); ++it)
    if (it->app->parsed()) return it->run();
  return 0;
}
