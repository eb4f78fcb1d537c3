// The one place where absl::Status and grpc::Status meet. Codes map one to one (both use
// the canonical codes); messages pass through unchanged.
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace skyrl::rpc {

grpc::Status ToGrpc(const absl::Status& status);
absl::Status FromGrpc(const grpc::Status& status);

}  // namespace skyrl::rpc
