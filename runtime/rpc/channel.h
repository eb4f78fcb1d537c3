// Client channels to the head and to workers, with the project's limits applied.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/status.h"

namespace skyrl::rpc {

inline constexpr int kMaxMessageBytes = 256 << 20;
// The largest call (its args) or result an actor takes or gives by default, sent as parts of
// at most one message each (protos/skyrl/actor.proto, StreamedCall.more).
inline constexpr size_t kDefaultMaxCallBytes = size_t{4} << 30;

// Metadata of an ActorService.CallStream, sent by the client and read by the actor host once
// per stream (see protos/skyrl/actor.proto).
inline constexpr char kStreamActorIdKey[] = "x-skyrl-actor-id";
inline constexpr char kStreamCallerIdKey[] = "x-skyrl-caller-id";

// Checks "host:port" from a flag or an environment variable; `field` names it in the error.
absl::Status ValidateAddress(absl::string_view field, absl::string_view address);

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address);

}  // namespace skyrl::rpc
