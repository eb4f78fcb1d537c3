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
  CLI::App* stop = app.add_subcommand("stop", "stop the daemons `skyrl start` started on this machine");
  double grace_s = 10;
  stop->add_option("--grace", grace_s, "seconds between SIGTERM and SIGKILL")->check(CLI::Range(0.0, 600.0));
  CLI11_PARSE(app, argc, argv);

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
