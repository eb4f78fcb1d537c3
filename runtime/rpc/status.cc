#include "runtime/rpc/status.h"

#include "absl/strings/str_cat.h"

namespace skyrl::rpc {

namespace {
// An error must say why: an empty message (a bug wherever it was made) gets one naming its
// code and that nothing more was said, instead of reaching a user as "".
std::string Said(absl::StatusCode code, std::string message, const char* by) {
  if (!message.empty()) return message;
  return absl::StrCat(absl::StatusCodeToString(code), " with no message from ", by);
}
}  // namespace

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      Said(status.code(), std::string(status.message()), "this server"));
}

absl::Status FromGrpc(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  const auto code = static_cast<absl::StatusCode>(status.error_code());
  return absl::Status(code, Said(code, status.error_message(), "the peer or gRPC"));
}

grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* ctx, const grpc::Status& status) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

}  // namespace skyrl::rpc
