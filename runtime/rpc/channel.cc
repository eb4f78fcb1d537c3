#include "runtime/rpc/channel.h"

#include "runtime/rpc/tls.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace skyrl::rpc {

absl::Status ValidateAddress(absl::string_view field, absl::string_view address) {
  size_t colon = address.rfind(':');
  int port = 0;
  if (colon == absl::string_view::npos || colon == 0 || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port < 1 || port > 65535)
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": \"", address, "\" is not HOST:PORT with a port in 1-65535"));
  return absl::OkStatus();
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  // Reconnect quickly after a head restart instead of grpc's default backoff up to 120 s.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  return grpc::CreateCustomChannel(address, ChannelCredentials(), args);
}

}  // namespace skyrl::rpc
