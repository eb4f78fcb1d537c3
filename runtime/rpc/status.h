// The one place where absl::Status and grpc::Status meet. Codes map one to one (both use
// the canonical codes); messages pass through unchanged, but for an empty one on an error,
// which becomes one that names the code and where nothing more was said.
#pragma once

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace skyrl::rpc {

grpc::Status ToGrpc(const absl::Status& status);
absl::Status FromGrpc(const grpc::Status& status);

// For callback-API unary handlers that answer at once: finishes the call's default reactor
// with `status` and returns it (what the handler returns to gRPC).
grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* ctx, const grpc::Status& status);

}  // namespace skyrl::rpc
