// gRPC face of the NodeManager. Converts statuses at the edge; holds no state of its own.
#pragma once

#include "runtime/head/node_manager.h"
#include "runtime/rpc/auth.h"
#include "skyrl/node.grpc.pb.h"

namespace skyrl::head {

class NodeServiceImpl final : public v1::NodeService::Service {
 public:
  NodeServiceImpl(NodeManager& nodes, const rpc::TokenAuth& auth) : nodes_(nodes), auth_(auth) {}

  grpc::Status RegisterNode(grpc::ServerContext*, const v1::RegisterNodeRequest* req,
                            v1::RegisterNodeReply* reply) override;
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* req,
                         v1::HeartbeatReply* reply) override;
  grpc::Status UnregisterNode(grpc::ServerContext*, const v1::UnregisterNodeRequest* req,
                              v1::UnregisterNodeReply* reply) override;
  grpc::Status ListNodes(grpc::ServerContext*, const v1::ListNodesRequest* req,
                         v1::ListNodesReply* reply) override;

 private:
  NodeManager& nodes_;
  const rpc::TokenAuth& auth_;
};

}  // namespace skyrl::head
