// The subcommands of `skyrl`, registered by the file of their area; skyrl_main.cc parses the
// command line and runs the one chosen. Each command prints for people (or JSON) and returns
// the process exit code: 0 done, 1 failed, 2 bad input.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "skyrl/node.pb.h"

namespace CLI {
class App;
}

namespace skyrl::cli {

// The options every subcommand may use; they may follow the subcommand on the command line.
struct GlobalOptions {
  std::string address;     // --address: the head (default $SKYRL_ADDRESS or 127.0.0.1:7420)
  std::string token_file;  // --token-file (else $SKYRL_TOKEN, else ~/.skyrl/token)
};

// A subcommand and what runs when it was chosen. The options it parses into live as long as
// `run` (the registering function keeps them alive in it).
struct Command {
  CLI::App* app;
  std::function<int()> run;
};

// `status`, `list nodes|actors|placement-groups [--json]` and `logs ACTOR [--follow] [--tail N]`.
std::vector<Command> AddClusterCommands(CLI::App& app, const GlobalOptions& global);
// `timeline --job ID [-o FILE]` and `metrics targets [--json]`.
std::vector<Command> AddTelemetryCommands(CLI::App& app, const GlobalOptions& global);
// `start [--head]` and `stop`.
std::vector<Command> AddDaemonCommands(CLI::App& app, const GlobalOptions& global);
// `job submit|status|logs|stop|list|delete`; `entrypoint` is what followed "--" on the command
// line (the driver's command for `job submit`).
std::vector<Command> AddJobCommands(CLI::App& app, const GlobalOptions& global,
                                    std::vector<std::string> entrypoint);

// The cluster token for a command that talks to the head, after checking --address; the
// error (exit code 2) says which input is bad.
absl::StatusOr<std::string> HeadToken(const GlobalOptions& global);
// The head's node table; Unavailable naming the address when the head cannot be reached.
absl::StatusOr<std::vector<v1::NodeInfo>> FetchNodes(const std::string& address, const std::string& token);
// Prints "skyrl: <message>" on stderr and returns `code`.
int Fail(const absl::Status& s, int code = 1);

}  // namespace skyrl::cli
