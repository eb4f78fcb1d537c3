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
  if (port > 65535)
    return absl::NotFoundError(absl::StrCat("actor ", id.ToString(), " wrote port ", port, ", not a port"));
  const std::string address = absl::StrCat(host_, ":", port);
  std::shared_ptr<v1::ActorService::Stub> stub;
  {
    absl::MutexLock lock(&mu_);
    // One stub per address. Actors come and go on new ports; past the bound the cache starts
    // over (calls in flight keep their stubs), so hosts long gone do not keep channels.
    auto it = stubs_.find(address);
    if (it == stubs_.end()) {
      if (stubs_.size() >= kMaxStubs) stubs_.clear();
      it = stubs_.emplace(address, v1::ActorService::NewStub(rpc::MakeChannel(address))).first;
    }
    stub = it->second;
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
