// `skyrl start` and `skyrl stop`: the head and workers as daemons of this machine (daemons.h).
#include <iostream>
#include <memory>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/cli/commands.h"
#include "runtime/daemons/daemons.h"
#include "runtime/common/ids.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"

namespace skyrl::cli {

using daemons::RecordStartedHead;
using daemons::StartDaemon;
using daemons::StopDaemons;
namespace {

struct StartOptions {
  bool head = false;
  int port = 7420;
  int dashboard_port = -1;  // off
  std::string bind = "127.0.0.1", store = "memory", ns = "default", resources, labels, node_ip;
};

std::vector<std::string> TokenArgs(const GlobalOptions& global) {
  if (global.token_file.empty()) return {};
  return {"--token-file", global.token_file};
}

int StartHead(const GlobalOptions& global, const StartOptions& o) {
  std::string head_address = absl::StrCat(o.bind == "0.0.0.0" ? "127.0.0.1" : o.bind, ":", o.port);
  std::vector<std::string> args = {"--port", std::to_string(o.port), "--bind", o.bind, "--store",
                                   o.store,  "--namespace",          o.ns};
  if (o.dashboard_port >= 0) args.insert(args.end(), {"--dashboard-port", std::to_string(o.dashboard_port)});
  for (std::string& a : TokenArgs(global)) args.push_back(std::move(a));
  auto d = StartDaemon("skyrl-head", "head", args, [&](int) {
    absl::StatusOr<std::string> token = rpc::LoadToken(global.token_file, false);
    return token.ok() && FetchNodes(head_address, *token).ok();
  });
  if (!d.ok()) return Fail(d.status());
  RecordStartedHead(head_address);
  std::cout << "skyrl-head started at " << head_address << " (pid " << d->pid << ", log " << d->log_path
            << ")\n"
            << "join workers with: skyrl start --address " << head_address << "\n";
  if (o.dashboard_port > 0)
    std::cout << "dashboard: http://" << head_address.substr(0, head_address.rfind(':')) << ":"
              << o.dashboard_port << "/ (sign in with the cluster token)\n";
  return 0;
}

int StartWorker(const GlobalOptions& global, const StartOptions& o) {
  absl::StatusOr<std::string> token = HeadToken(global);
  if (!token.ok()) return Fail(token.status(), 2);
  std::vector<std::string> args = {"--head", global.address};
  if (!o.resources.empty()) args.insert(args.end(), {"--resources", o.resources});
  if (!o.labels.empty()) args.insert(args.end(), {"--labels", o.labels});
  if (!o.node_ip.empty()) args.insert(args.end(), {"--node-ip", o.node_ip});
  for (std::string& a : TokenArgs(global)) args.push_back(std::move(a));
  std::string name =
      absl::StrCat("worker-", absl::ToUnixMillis(absl::Now()), "-", NodeId::Random().ToString().substr(5, 6));
  auto d = StartDaemon("skyrl-worker", name, args, [&](int pid) {
    auto nodes = FetchNodes(global.address, *token);
    if (!nodes.ok()) return false;
    for (const auto& n : *nodes)
      if (n.pid() == pid && n.state() == v1::NODE_ALIVE) return true;
    return false;
  });
  if (!d.ok()) return Fail(d.status());
  std::cout << "skyrl-worker joined " << global.address << " (pid " << d->pid << ", log " << d->log_path
            << ")\n";
  return 0;
}

}  // namespace

std::vector<Command> AddDaemonCommands(CLI::App& app, const GlobalOptions& global) {
  CLI::App* start = app.add_subcommand(
      "start", "start a head (--head) or else a worker joining --address, as a background daemon");
  auto o = std::make_shared<StartOptions>();
  start->add_flag("--head", o->head, "start skyrl-head on this machine");
  start->add_option("--port", o->port, "head port")->check(CLI::Range(1, 65535));
  start->add_option("--bind", o->bind, "head listen address");
  start
      ->add_option("--dashboard-port", o->dashboard_port,
                   "serve the head's dashboard on this port (default: off)")
      ->check(CLI::Range(1, 65535));
  start->add_option("--store", o->store, "head metadata store: memory | redis://...");
  start->add_option("--namespace", o->ns, "cluster name in the store");
  start->add_option("--resources", o->resources, "worker resources, e.g. CPU=8,GPU=4");
  start->add_option("--labels", o->labels, "worker labels, e.g. pool=train");
  start->add_option("--node-ip", o->node_ip, "worker address other nodes reach it at");

  CLI::App* stop = app.add_subcommand("stop", "stop the daemons `skyrl start` started on this machine");
  auto grace_s = std::make_shared<double>(10);
  stop->add_option("--grace", *grace_s, "seconds between SIGTERM and SIGKILL")->check(CLI::Range(0.0, 600.0));
  return {{start, [&global, o] { return o->head ? StartHead(global, *o) : StartWorker(global, *o); }},
          {stop, [grace_s] {
             for (const auto& line : StopDaemons(absl::Seconds(*grace_s))) std::cout << line << "\n";
             return 0;
           }}};
}

}  // namespace skyrl::cli
