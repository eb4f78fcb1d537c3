// Any actor's log through the head (logs.proto): finds the actor (by id, or by name in a
// namespace), its node, and relays that worker's ActorLogService stream. `skyrl logs` and the
// dashboard's actor page read logs this way, so users need only the head and the token.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/head/actor_manager.h"
#include "runtime/head/node_manager.h"
#include "runtime/rpc/auth.h"
#include "skyrl/logs.grpc.pb.h"

namespace skyrl::head {

class ActorLogRelay {
 public:
  // `token` authenticates the head to the workers.
  ActorLogRelay(const ActorManager& actors, const NodeManager& nodes, std::string token);

  // Sends the log's chunks to `write` (false from it: stop) until the worker's stream ends, or
  // `cancelled()` turns true (checked while the worker has nothing new). Errors:
  // InvalidArgument (neither id nor name, or a bad id), NotFound (no such actor, or no log on
  // its worker), FailedPrecondition (no node yet, or its node is dead: where the log stays),
  // Unavailable (the worker cannot be reached).
  absl::Status Stream(const v1::ActorLogRequest& req, const std::function<bool(const std::string&)>& write,
                      const std::function<bool()>& cancelled) const;
  // The actor's call records from its worker (logs.proto, ActorCalls); the same errors.
  absl::StatusOr<v1::ActorCallsReply> Calls(const v1::ActorCallsRequest& req) const;

 private:
  struct Located {
    v1::ActorInfo actor;
    v1::NodeInfo node;
  };
  // The actor named by id or (namespace, name), and its ALIVE node; `what` says what is
  // wanted of it, for the errors.
  absl::StatusOr<Located> Locate(const std::string& actor_id, const std::string& name, const std::string& ns,
                                 const char* what) const;

  const ActorManager& actors_;
  const NodeManager& nodes_;
  const std::string token_;
};

class ActorLogServiceImpl final : public v1::ActorLogService::Service {
 public:
  ActorLogServiceImpl(const ActorLogRelay& relay, const rpc::TokenAuth& auth) : relay_(relay), auth_(auth) {}
  grpc::Status ActorLog(grpc::ServerContext* ctx, const v1::ActorLogRequest* req,
                        grpc::ServerWriter<v1::ActorLogChunk>* writer) override;
  grpc::Status ActorCalls(grpc::ServerContext* ctx, const v1::ActorCallsRequest* req,
                          v1::ActorCallsReply* reply) override;

 private:
  const ActorLogRelay& relay_;
  const rpc::TokenAuth& auth_;
};

}  // namespace skyrl::head
