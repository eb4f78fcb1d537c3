#include "runtime/worker/host_telemetry.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"
#include "runtime/rpc/status.h"

namespace skyrl::worker {

std::string HostTelemetry::RecordsPath(const std::string& log_dir, const ActorId& id) {
  return absl::StrCat(log_dir, "/", id.ToString(), ".calls");
}

absl::StatusOr<v1::ActorTelemetryReply> HostTelemetry::Live(const ActorId& id, bool with_records,
                                                            absl::Duration timeout) const {
  int port = 0;
  std::ifstream(absl::StrCat(log_dir_, "/", id.ToString(), ".port")) >> port;
  if (port <= 0) return absl::NotFoundError(absl::StrCat("actor ", id.ToString(), " is not serving yet"));
  const std::string address = absl::StrCat(host_, ":", port);
  v1::ActorService::Stub* stub;
  {
    absl::MutexLock lock(&mu_);
    // One stub per address; hosts of actors gone stay few (ports are reused by new ones).
    auto& slot = stubs_[address];
    if (!slot) slot = v1::ActorService::NewStub(rpc::MakeChannel(address));
    stub = slot.get();
  }
  v1::ActorTelemetryRequest req;
  req.set_actor_id(id.ToString());
  req.set_with_records(with_records);
  v1::ActorTelemetryReply reply;
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, token_, timeout);
  if (absl::Status s = rpc::FromGrpc(stub->Telemetry(&ctx, req, &reply)); !s.ok())
    return absl::Status(s.code(), absl::StrCat("actor ", id.ToString(), " at ", address, ": ", s.message()));
  return reply;
}

absl::StatusOr<v1::ActorTelemetryReply> HostTelemetry::Left(const ActorId& id) const {
  const std::string path = RecordsPath(log_dir_, id);
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return absl::NotFoundError(absl::StrCat("actor ", id.ToString(), " left no call records (", path, ")"));
  v1::ActorTelemetryReply reply;
  if (!reply.ParseFromIstream(&in)) return absl::DataLossError(absl::StrCat("cannot parse ", path));
  return reply;
}

}  // namespace skyrl::worker
