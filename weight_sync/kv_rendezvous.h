// The production rendezvous: the head's KV service (skyrl.v1.KvService), keys "<prefix>..."
// as the transports write them. Put overwrites; Get polls every 20 ms until the key appears
// or the timeout passes (the KV has no watch). Each RPC carries the cluster token and a
// deadline. Safe for concurrent use.
#pragma once

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "skyrl/kv.grpc.pb.h"
#include "weight_sync/rendezvous.h"

namespace skyrl::weight_sync {

class KvRendezvous final : public Rendezvous {
 public:
  // `head` is "host:port"; InvalidArgument names the field when it or the token is malformed.
  static absl::StatusOr<std::unique_ptr<KvRendezvous>> Connect(const std::string& head, std::string token,
                                                               absl::Duration rpc_timeout = absl::Seconds(5));
  // For tests and callers that already hold a channel.
  KvRendezvous(std::unique_ptr<v1::KvService::StubInterface> stub, std::string token,
               absl::Duration rpc_timeout)
      : stub_(std::move(stub)), token_(std::move(token)), rpc_timeout_(rpc_timeout) {}

  absl::Status Put(absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view key, absl::Duration timeout) override;

 private:
  std::unique_ptr<v1::KvService::StubInterface> stub_;
  const std::string token_;
  const absl::Duration rpc_timeout_;
};

}  // namespace skyrl::weight_sync
