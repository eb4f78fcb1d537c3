// skyrl: the command-line tool. Wiring only; rendering lives in status_view.
#include <grpcpp/grpcpp.h>

#include <cstdlib>
#include <iostream>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "runtime/cli/status_view.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"
#include "runtime/rpc/status.h"
#include "skyrl/node.grpc.pb.h"

namespace {

absl::StatusOr<std::vector<skyrl::v1::NodeInfo>> FetchNodes(const std::string& address,
                                                             const std::string& token) {
  auto stub = skyrl::v1::NodeService::NewStub(skyrl::rpc::MakeChannel(address));
  grpc::ClientContext ctx;
  skyrl::rpc::AttachToken(&ctx, token);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  skyrl::v1::ListNodesRequest req;
  skyrl::v1::ListNodesReply reply;
  absl::Status s = skyrl::rpc::FromGrpc(stub->ListNodes(&ctx, req, &reply));
  if (!s.ok())
    return absl::Status(s.code(), "cannot reach the head at " + address + ": " + std::string(s.message()));
  return std::vector<skyrl::v1::NodeInfo>(reply.nodes().begin(), reply.nodes().end());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"skyrl: control a SkyRL Runtime cluster"};
  app.require_subcommand(1);
  const char* env_address = std::getenv("SKYRL_ADDRESS");
  std::string address = env_address ? env_address : "127.0.0.1:7420";
  app.add_option("--address", address, "head HOST:PORT (default $SKYRL_ADDRESS or 127.0.0.1:7420)");

  std::string token_file;
  app.add_option("--token-file", token_file, "cluster token file (else $SKYRL_TOKEN, else ~/.skyrl/token)");
  CLI::App* status = app.add_subcommand("status", "nodes, resources and failures, like `ray status`");
  CLI::App* list = app.add_subcommand("list", "list cluster entities");
  std::string what;
  bool json = false;
  list->add_option("what", what, "nodes")->required()->check(CLI::IsMember({"nodes"}));
  list->add_flag("--json", json, "machine-readable output");
  CLI11_PARSE(app, argc, argv);

  if (absl::Status s = skyrl::rpc::ValidateAddress("--address", address); !s.ok()) {
    std::cerr << "skyrl: " << s.message() << "\n";
    return 2;
  }
  absl::StatusOr<std::string> token = skyrl::rpc::LoadToken(token_file, false);
  if (!token.ok()) {
    std::cerr << "skyrl: " << token.status().message() << "\n";
    return 2;
  }
  absl::StatusOr<std::vector<skyrl::v1::NodeInfo>> nodes = FetchNodes(address, *token);
  if (!nodes.ok()) {
    std::cerr << "skyrl: " << nodes.status().message() << "\n";
    return 1;
  }
  if (*status) std::cout << skyrl::cli::RenderStatus(address, *nodes, absl::Now());
  if (*list) std::cout << (json ? skyrl::cli::RenderNodesJson(*nodes)
                                : skyrl::cli::RenderNodesTable(*nodes, absl::Now()));
  return 0;
}
