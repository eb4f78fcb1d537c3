// `skyrl status` and `skyrl list ...`: the head's tables, rendered by status_view; `skyrl logs`.
#include <grpcpp/grpcpp.h>

#include <iostream>
#include <memory>

#include "CLI/CLI.hpp"
#include "absl/time/clock.h"
#include "runtime/cli/commands.h"
#include "runtime/views/status_view.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"
#include "runtime/rpc/status.h"
#include "runtime/common/ids.h"
#include "skyrl/actor_directory.grpc.pb.h"
#include "skyrl/logs.grpc.pb.h"
#include "skyrl/node.grpc.pb.h"
#include "skyrl/placement_group.grpc.pb.h"

namespace skyrl::cli {

using views::RenderActorsJson;
using views::RenderActorsTable;
using views::RenderGroupsJson;
using views::RenderGroupsTable;
using views::RenderNodesJson;
using views::RenderNodesTable;
using views::RenderStatus;

absl::StatusOr<std::vector<v1::NodeInfo>> FetchNodes(const std::string& address, const std::string& token) {
  auto stub = v1::NodeService::NewStub(rpc::MakeChannel(address));
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, token, absl::Seconds(5));
  v1::ListNodesRequest req;
  v1::ListNodesReply reply;
  absl::Status s = rpc::FromGrpc(stub->ListNodes(&ctx, req, &reply));
  if (!s.ok())
    return absl::Status(s.code(), "cannot reach the head at " + address + ": " + std::string(s.message()));
  return std::vector<v1::NodeInfo>(reply.nodes().begin(), reply.nodes().end());
}

namespace {

absl::StatusOr<std::vector<v1::ActorInfo>> FetchActors(const std::string& address, const std::string& token) {
  auto stub = v1::ActorDirectory::NewStub(rpc::MakeChannel(address));
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, token, absl::Seconds(5));
  v1::ListActorsReply reply;
  absl::Status s = rpc::FromGrpc(stub->ListActors(&ctx, {}, &reply));
  if (!s.ok()) return s;
  return std::vector<v1::ActorInfo>(reply.actors().begin(), reply.actors().end());
}

absl::StatusOr<std::vector<v1::PlacementGroupInfo>> FetchGroups(const std::string& address,
                                                                const std::string& token) {
  auto stub = v1::PlacementGroupService::NewStub(rpc::MakeChannel(address));
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, token, absl::Seconds(5));
  v1::ListPlacementGroupsReply reply;
  absl::Status s = rpc::FromGrpc(stub->ListPlacementGroups(&ctx, {}, &reply));
  if (!s.ok()) return s;
  return std::vector<v1::PlacementGroupInfo>(reply.groups().begin(), reply.groups().end());
}

struct Tables {
  std::vector<v1::NodeInfo> nodes;
  std::vector<v1::ActorInfo> actors;
  std::vector<v1::PlacementGroupInfo> groups;
};

// Every table, or the exit code of the first failure.
absl::StatusOr<Tables> FetchAll(const GlobalOptions& global, int* exit_code) {
  absl::StatusOr<std::string> token = HeadToken(global);
  if (!token.ok()) {
    *exit_code = 2;
    return token.status();
  }
  *exit_code = 1;
  Tables t;
  absl::StatusOr<std::vector<v1::NodeInfo>> nodes = FetchNodes(global.address, *token);
  if (!nodes.ok()) return nodes.status();
  absl::StatusOr<std::vector<v1::ActorInfo>> actors = FetchActors(global.address, *token);
  if (!actors.ok()) return actors.status();
  absl::StatusOr<std::vector<v1::PlacementGroupInfo>> groups = FetchGroups(global.address, *token);
  if (!groups.ok()) return groups.status();
  return Tables{std::move(*nodes), std::move(*actors), std::move(*groups)};
}

struct ListOptions {
  std::string what;
  bool json = false;
};

int RunList(const GlobalOptions& global, const ListOptions& o) {
  int code = 0;
  absl::StatusOr<Tables> t = FetchAll(global, &code);
  if (!t.ok()) return Fail(t.status(), code);
  if (o.what == "nodes")
    std::cout << (o.json ? RenderNodesJson(t->nodes, t->actors, t->groups)
                         : RenderNodesTable(t->nodes, absl::Now(), t->actors, t->groups));
  if (o.what == "placement-groups" || o.what == "pgs")
    std::cout << (o.json ? RenderGroupsJson(t->groups) : RenderGroupsTable(t->groups));
  if (o.what == "actors") std::cout << (o.json ? RenderActorsJson(t->actors) : RenderActorsTable(t->actors));
  return 0;
}

struct LogsOptions {
  std::string actor;  // an actor id, or a name
  std::string ns;
  int tail = 0;
  bool follow = false;
};

// `skyrl logs`: the actor's log through the head, written to stdout as it arrives.
int RunLogs(const GlobalOptions& global, const LogsOptions& o) {
  absl::StatusOr<std::string> token = HeadToken(global);
  if (!token.ok()) return Fail(token.status(), 2);
  v1::ActorLogRequest req;
  if (ActorId::Parse(o.actor).ok()) {
    req.set_actor_id(o.actor);
  } else {
    req.set_name(o.actor);
    req.set_namespace_(o.ns);
  }
  req.set_tail_lines(o.tail);
  req.set_follow(o.follow);
  auto stub = v1::ActorLogService::NewStub(rpc::MakeChannel(global.address));
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, *token, o.follow ? absl::Hours(24 * 365) : absl::Seconds(60));
  std::unique_ptr<grpc::ClientReader<v1::ActorLogChunk>> reader = stub->ActorLog(&ctx, req);
  v1::ActorLogChunk chunk;
  while (reader->Read(&chunk)) std::cout << chunk.data() << std::flush;
  absl::Status s = rpc::FromGrpc(reader->Finish());
  if (!s.ok()) return Fail(s, s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1);
  return 0;
}

}  // namespace

std::vector<Command> AddClusterCommands(CLI::App& app, const GlobalOptions& global) {
  CLI::App* status = app.add_subcommand("status", "nodes, resources and failures, like `ray status`");
  CLI::App* list = app.add_subcommand("list", "list cluster entities");
  auto list_opts = std::make_shared<ListOptions>();
  list->add_option("what", list_opts->what, "nodes | actors | placement-groups")
      ->required()
      ->check(CLI::IsMember({"nodes", "actors", "placement-groups", "pgs"}));
  list->add_flag("--json", list_opts->json, "machine-readable output");
  CLI::App* logs = app.add_subcommand("logs", "an actor's log, from its worker through the head");
  auto logs_opts = std::make_shared<LogsOptions>();
  logs->add_option("actor", logs_opts->actor, "the actor's id, or its name")->required();
  logs->add_option("--namespace", logs_opts->ns, "the name's namespace (default: \"default\")");
  logs->add_option("--tail", logs_opts->tail, "start at the last N lines (default: the whole log)")
      ->check(CLI::Range(0, 100000));
  logs->add_flag("-f,--follow", logs_opts->follow, "keep printing what the actor writes until it ends");
  return {{status,
           [&global] {
             int code = 0;
             absl::StatusOr<Tables> t = FetchAll(global, &code);
             if (!t.ok()) return Fail(t.status(), code);
             std::cout << RenderStatus(global.address, t->nodes, t->actors, t->groups, absl::Now());
             return 0;
           }},
          {list, [&global, list_opts] { return RunList(global, *list_opts); }},
          {logs, [&global, logs_opts] { return RunLogs(global, *logs_opts); }}};
}

}  // namespace skyrl::cli
