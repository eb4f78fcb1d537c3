// An in-process gRPC server on a free loopback port, for tests of one service (insecure
// transport; the services still check the cluster token themselves). Header-only: every user
// already links gRPC.
#pragma once

#include <grpcpp/grpcpp.h>

#include <initializer_list>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"

namespace skyrl::testing {

struct LoopbackServer {
  std::unique_ptr<grpc::Server> server;  // null when it could not start
  int port = 0;
  std::string address() const { return absl::StrCat("127.0.0.1:", port); }
  std::shared_ptr<grpc::Channel> Channel() const {
    return grpc::CreateChannel(address(), grpc::InsecureChannelCredentials());
  }
};

// The services must outlive the server.
inline LoopbackServer StartLoopbackServer(std::initializer_list<grpc::Service*> services) {
  LoopbackServer s;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &s.port);
  for (grpc::Service* service : services) builder.RegisterService(service);
  s.server = builder.BuildAndStart();
  return s;
}

}  // namespace skyrl::testing
