// gRPC face of the NodeManager. Converts statuses at the edge; holds no state of its own.
// Served with gRPC's callback API (every handler answers at once), so heartbeats from many
// workers cost no server-thread hand-offs.
#pragma once

#include <functional>

#include "runtime/head/node_manager.h"
#include "runtime/head/resource_tracker.h"
#include "runtime/head/stop_mailbox.h"
#include "runtime/rpc/auth.h"
#include "skyrl/node.grpc.pb.h"

namespace skyrl::head {

class NodeServiceImpl final : public v1::NodeService::CallbackService {
 public:
  // ListNodes reports each alive node's free resources from `resources`. A heartbeat's
  // stops (reported and asked) go through `stops`.
  // `metrics_port`: the head's own /metrics port for ListNodes (-1 or null: none).
  NodeServiceImpl(NodeManager& nodes, StopMailbox& stops, const ResourceTracker& resources,
                  const rpc::TokenAuth& auth, std::function<int()> metrics_port = nullptr)
      : nodes_(nodes),
        stops_(stops),
        resources_(resources),
        auth_(auth),
        metrics_port_(std::move(metrics_port)) {}

  grpc::ServerUnaryReactor* RegisterNode(grpc::CallbackServerContext*, const v1::RegisterNodeRequest* req,
                                         v1::RegisterNodeReply* reply) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext*, const v1::HeartbeatRequest* req,
                                      v1::HeartbeatReply* reply) override;
  grpc::ServerUnaryReactor* UnregisterNode(grpc::CallbackServerContext*, const v1::UnregisterNodeRequest* req,
                                           v1::UnregisterNodeReply* reply) override;
  grpc::ServerUnaryReactor* ListNodes(grpc::CallbackServerContext*, const v1::ListNodesRequest* req,
                                      v1::ListNodesReply* reply) override;

 private:
  NodeManager& nodes_;
  StopMailbox& stops_;
  const ResourceTracker& resources_;
  const rpc::TokenAuth& auth_;
  const std::function<int()> metrics_port_;
};

}  // namespace skyrl::head
