#include "weight_sync/kv_rendezvous.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"
#include "runtime/rpc/status.h"

namespace skyrl::weight_sync {

absl::StatusOr<std::unique_ptr<KvRendezvous>> KvRendezvous::Connect(const std::string& head,
                                                                    std::string token,
                                                                    absl::Duration rpc_timeout) {
  if (absl::Status s = rpc::ValidateAddress("head address", head); !s.ok()) return s;
  if (absl::Status s = rpc::ValidateToken(token); !s.ok()) return s;
  return std::make_unique<KvRendezvous>(v1::KvService::NewStub(rpc::MakeChannel(head)), std::move(token),
                                        rpc_timeout);
}

absl::Status KvRendezvous::Put(absl::string_view key, absl::string_view value) {
  v1::KvPutRequest req;
  req.set_key(std::string(key));
  req.set_value(std::string(value));
  req.set_overwrite(true);
  v1::KvPutReply reply;
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, token_, rpc_timeout_);
  absl::Status s = rpc::FromGrpc(stub_->Put(&ctx, req, &reply));
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat("rendezvous: put '", key, "': ", s.message()));
  return absl::OkStatus();
}

absl::StatusOr<std::string> KvRendezvous::Get(absl::string_view key, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  v1::KvGetRequest req;
  req.set_key(std::string(key));
  while (true) {
    v1::KvGetReply reply;
    grpc::ClientContext ctx;
    rpc::PrepareCall(&ctx, token_,
                     std::min(rpc_timeout_, std::max(deadline - absl::Now(), absl::Milliseconds(1))));
    absl::Status s = rpc::FromGrpc(stub_->Get(&ctx, req, &reply));
    if (s.ok()) return reply.value();
    // NOT_FOUND: not there yet; UNAVAILABLE/DEADLINE: the head may be restarting. Keep trying.
    const bool retry = s.code() == absl::StatusCode::kNotFound ||
                       s.code() == absl::StatusCode::kUnavailable ||
                       s.code() == absl::StatusCode::kDeadlineExceeded;
    if (!retry) return absl::Status(s.code(), absl::StrCat("rendezvous: get '", key, "': ", s.message()));
    if (absl::Now() >= deadline)
      return absl::DeadlineExceededError(
          absl::StrCat("rendezvous: key '", key, "' did not appear in the head's KV within ",
                       absl::FormatDuration(timeout), " (last: ", s.message(), ")"));
    absl::SleepFor(absl::Milliseconds(20));
  }
}

}  // namespace skyrl::weight_sync
