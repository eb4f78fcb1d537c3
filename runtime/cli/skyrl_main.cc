// skyrl: the command-line tool. Wiring only; rendering lives in status_view, daemon handling in
// daemons.
#include <grpcpp/grpcpp.h>

#include <cstdlib>
#include <iostream>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/cli/daemons.h"
#include "runtime/cli/job_command.h"
#include "catalog/plan_command.h"
#include "runtime/common/ids.h"
#include "runtime/cli/status_view.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"
#include "runtime/rpc/status.h"
#include "skyrl/actor_directory.grpc.pb.h"
#include "skyrl/node.grpc.pb.h"
#include "skyrl/placement_group.grpc.pb.h"

namespace {

absl::StatusOr<std::vector<skyrl::v1::NodeInfo>> FetchNodes(const std::string& address,
                                                             const std::string& token) {
  auto stub = skyrl::v1::NodeService::NewStub(skyrl::rpc::MakeChannel(address));
  grpc::ClientContext ctx;
  skyrl::rpc::PrepareCall(&ctx, token, absl::Seconds(5));
  skyrl::v1::ListNodesRequest req;
  skyrl::v1::ListNodesReply reply;
  absl::Status s = skyrl::rpc::FromGrpc(stub->ListNodes(&ctx, req, &reply));
  if (!s.ok())
    return absl::Status(s.code(), "cannot reach the head at " + address + ": " + std::string(s.message()));
  return std::vector<skyrl::v1::NodeInfo>(reply.nodes().begin(), reply.nodes().end());
}

absl::StatusOr<std::vector<skyrl::v1::ActorInfo>> FetchActors(const std::string& address,
                                                               const std::string& token) {
  auto stub = skyrl::v1::ActorDirectory::NewStub(skyrl::rpc::MakeChannel(address));
  grpc::ClientContext ctx;
  skyrl::rpc::PrepareCall(&ctx, token, absl::Seconds(5));
  skyrl::v1::ListActorsReply reply;
  absl::Status s = skyrl::rpc::FromGrpc(stub->ListActors(&ctx, {}, &reply));
  if (!s.ok()) return s;
  return std::vector<skyrl::v1::ActorInfo>(reply.actors().begin(), reply.actors().end());
}

absl::StatusOr<std::vector<skyrl::v1::PlacementGroupInfo>> FetchGroups(const std::string& address,
                                                                        const std::string& token) {
  auto stub = skyrl::v1::PlacementGroupService::NewStub(skyrl::rpc::MakeChannel(address));
  grpc::ClientContext ctx;
  skyrl::rpc::PrepareCall(&ctx, token, absl::Seconds(5));
  skyrl::v1::ListPlacementGroupsReply reply;
  absl::Status s = skyrl::rpc::FromGrpc(stub->ListPlacementGroups(&ctx, {}, &reply));
  if (!s.ok()) return s;
  return std::vector<skyrl::v1::PlacementGroupInfo>(reply.groups().begin(), reply.groups().end());
}

int Fail(const absl::Status& s, int code = 1) {
  std::cerr << "skyrl: " << s.message() << "\n";
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"skyrl: control a SkyRL Runtime cluster"};
  app.require_subcommand(1);
  app.fallthrough();  // --address and --token-file may follow the subcommand
  const char* env_address = std::getenv("SKYRL_ADDRESS");
  std::string address = env_address ? env_address : "127.0.0.1:7420";
  std::string token_file;
  app.add_option("--address", address, "head HOST:PORT (default $SKYRL_ADDRESS or 127.0.0.1:7420)");
  app.add_option("--token-file", token_file, "cluster token file (else $SKYRL_TOKEN, else ~/.skyrl/token)");

  CLI::App* status = app.add_subcommand("status", "nodes, resources and failures, like `ray status`");
  CLI::App* list = app.add_subcommand("list", "list cluster entities");
  std::string what;
  bool json = false;
  list->add_option("what", what, "nodes | actors | placement-groups")
      ->required()
      ->check(CLI::IsMember({"nodes", "actors", "placement-groups", "pgs"}));
  list->add_flag("--json", json, "machine-readable output");

  CLI::App* start = app.add_subcommand(
      "start", "start a head (--head) or else a worker joining --address, as a background daemon");
  bool as_head = false;
  int port = 7420;
  std::string bind = "127.0.0.1", store = "memory", ns = "default", resources, labels, node_ip;
  start->add_flag("--head", as_head, "start skyrl-head on this machine");
  start->add_option("--port", port, "head port")->check(CLI::Range(1, 65535));
  start->add_option("--bind", bind, "head listen address");
  start->add_option("--store", store, "head metadata store: memory | redis://...");
  start->add_option("--namespace", ns, "cluster name in the store");
  start->add_option("--resources", resources, "worker resources, e.g. CPU=8,GPU=4");
  start->add_option("--labels", labels, "worker labels, e.g. pool=train");
  start->add_option("--node-ip", node_ip, "worker address other nodes reach it at");
  CLI::App* job = app.add_subcommand("job", "run drivers on the head: submit, status, logs, stop, list, delete");
  job->require_subcommand(1);
  skyrl::cli::JobSubmitArgs submit_args;
  CLI::App* job_submit = job->add_subcommand("submit", "run a driver: skyrl job submit [options] -- CMD ARGS...");
  job_submit->add_option("--working-dir", submit_args.working_dir, "folder to upload; the driver runs in it");
  job_submit->add_option("--env", submit_args.env, "KEY=VALUE for the driver's environment (repeatable)");
  job_submit->add_option("--submission-id", submit_args.submission_id, "the job's id (default: generated)");
  job_submit->add_flag("--no-wait", submit_args.no_wait, "print the job id and return at once");
  // Everything after the first "--" is the driver's command, taken before CLI11 sees it (its
  // own "--" handling would still read options like -c of the command).
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--") {
      submit_args.entrypoint.assign(argv + i + 1, argv + argc);
      argc = i;
      break;
    }
  std::string job_id;
  bool job_json = false, follow = false;
  double job_grace_s = 10;
  CLI::App* job_status = job->add_subcommand("status", "a job's state and exit");
  job_status->add_option("job_id", job_id)->required();
  job_status->add_flag("--json", job_json, "machine-readable output");
  CLI::App* job_logs = job->add_subcommand("logs", "a job's driver output");
  job_logs->add_option("job_id", job_id)->required();
  job_logs->add_flag("--follow,-f", follow, "keep streaming until the job ends");
  CLI::App* job_stop = job->add_subcommand("stop", "SIGTERM the driver, SIGKILL after --grace; its actors die");
  job_stop->add_option("job_id", job_id)->required();
  job_stop->add_option("--grace", job_grace_s, "seconds between SIGTERM and SIGKILL")->check(CLI::Range(0.0, 600.0));
  CLI::App* job_list = job->add_subcommand("list", "every job");
  job_list->add_flag("--json", job_json, "machine-readable output");
  CLI::App* job_delete = job->add_subcommand("delete", "forget an ended job and remove its files");
  job_delete->add_option("job_id", job_id)->required();

  CLI::App* plan = app.add_subcommand(
      "plan", "does a model fit a cluster, and how: layouts, memory per GPU, placement groups (no head needed)");
  skyrl::catalog::PlanCommandOptions plan_opts;
  skyrl::catalog::AddPlanFlags(plan, &plan_opts);

  CLI::App* stop = app.add_subcommand("stop", "stop the daemons `skyrl start` started on this machine");
  double grace_s = 10;
  stop->add_option("--grace", grace_s, "seconds between SIGTERM and SIGKILL")->check(CLI::Range(0.0, 600.0));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help prints and exits 0; any other parse error (unknown flag, value outside a fixed
    // list, missing argument) is bad input: exit 2, as every other input error of the CLI.
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (*plan) return skyrl::catalog::RunPlanCommand(plan_opts, std::cout, std::cerr);

  if (*stop) {
    for (const auto& line : skyrl::cli::StopDaemons(absl::Seconds(grace_s))) std::cout << line << "\n";
    return 0;
  }

  std::vector<std::string> token_args;
  if (!token_file.empty()) token_args = {"--token-file", token_file};

  if (*start) {
    if (as_head) {
      std::string head_address = absl::StrCat(bind == "0.0.0.0" ? "127.0.0.1" : bind, ":", port);
      std::vector<std::string> args = {"--port", std::to_string(port), "--bind", bind,
                                       "--store", store, "--namespace", ns};
      args.insert(args.end(), token_args.begin(), token_args.end());
      auto d = skyrl::cli::StartDaemon("skyrl-head", "head", args, [&](int) {
        absl::StatusOr<std::string> token = skyrl::rpc::LoadToken(token_file, false);
        return token.ok() && FetchNodes(head_address, *token).ok();
      });
      if (!d.ok()) return Fail(d.status());
      std::cout << "skyrl-head started at " << head_address << " (pid " << d->pid << ", log "
                << d->log_path << ")\n"
                << "join workers with: skyrl start --address " << head_address << "\n";
      return 0;
    }
    if (absl::Status s = skyrl::rpc::ValidateAddress("--address", address); !s.ok()) return Fail(s, 2);
    absl::StatusOr<std::string> token = skyrl::rpc::LoadToken(token_file, false);
    if (!token.ok()) return Fail(token.status(), 2);
    std::vector<std::string> args = {"--head", address};
    if (!resources.empty()) args.insert(args.end(), {"--resources", resources});
    if (!labels.empty()) args.insert(args.end(), {"--labels", labels});
    if (!node_ip.empty()) args.insert(args.end(), {"--node-ip", node_ip});
    args.insert(args.end(), token_args.begin(), token_args.end());
    std::string name = absl::StrCat("worker-", absl::ToUnixMillis(absl::Now()), "-", skyrl::NodeId::Random().ToString().substr(5, 6));
    auto d = skyrl::cli::StartDaemon("skyrl-worker", name, args, [&](int pid) {
      auto nodes = FetchNodes(address, *token);
      if (!nodes.ok()) return false;
      for (const auto& n : *nodes)
        if (n.pid() == pid && n.state() == skyrl::v1::NODE_ALIVE) return true;
      return false;
    });
    if (!d.ok()) return Fail(d.status());
    std::cout << "skyrl-worker joined " << address << " (pid " << d->pid << ", log " << d->log_path
              << ")\n";
    return 0;
  }

  if (absl::Status s = skyrl::rpc::ValidateAddress("--address", address); !s.ok()) return Fail(s, 2);
  absl::StatusOr<std::string> token = skyrl::rpc::LoadToken(token_file, false);
  if (!token.ok()) return Fail(token.status(), 2);
  if (*job) {
    if (*job_submit) return skyrl::cli::JobSubmit(address, *token, submit_args);
    if (*job_status) return skyrl::cli::JobStatus(address, *token, job_id, job_json);
    if (*job_logs) return skyrl::cli::JobLogs(address, *token, job_id, follow);
    if (*job_stop) return skyrl::cli::JobStop(address, *token, job_id, job_grace_s);
    if (*job_list) return skyrl::cli::JobList(address, *token, job_json);
    if (*job_delete) return skyrl::cli::JobDelete(address, *token, job_id);
  }
  absl::StatusOr<std::vector<skyrl::v1::NodeInfo>> nodes = FetchNodes(address, *token);
  if (!nodes.ok()) return Fail(nodes.status());
  absl::StatusOr<std::vector<skyrl::v1::ActorInfo>> actors = FetchActors(address, *token);
  if (!actors.ok()) return Fail(actors.status());
  absl::StatusOr<std::vector<skyrl::v1::PlacementGroupInfo>> groups = FetchGroups(address, *token);
  if (!groups.ok()) return Fail(groups.status());
  if (*status) std::cout << skyrl::cli::RenderStatus(address, *nodes, *actors, *groups, absl::Now());
  if (*list && what == "nodes")
    std::cout << (json ? skyrl::cli::RenderNodesJson(*nodes)
                       : skyrl::cli::RenderNodesTable(*nodes, absl::Now(), *actors, *groups));
  if (*list && (what == "placement-groups" || what == "pgs"))
    std::cout << (json ? skyrl::cli::RenderGroupsJson(*groups) : skyrl::cli::RenderGroupsTable(*groups));
  if (*list && what == "actors")
    std::cout << (json ? skyrl::cli::RenderActorsJson(*actors) : skyrl::cli::RenderActorsTable(*actors));
  return 0;
}
