// The call telemetry of this worker's actor hosts (actor.proto, Telemetry), for the worker's
// metrics and for `skyrl timeline` (logs.proto, ActorCalls): asked of a running host at the
// port it wrote to the log folder, or read from the records file it left there as it stopped
// (`--call-records-file`, RecordsPath). Channels are kept per address, up to a bound.
// Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/common/ids.h"
#include "skyrl/actor.grpc.pb.h"

namespace skyrl::worker {

class HostTelemetry {
 public:
  // Hosts listen on `host` and write their ports to <log_dir>/<actor id>.port.
  HostTelemetry(std::string log_dir, std::string host, std::string token)
      : log_dir_(std::move(log_dir)), host_(std::move(host)), token_(std::move(token)) {}

  static std::string RecordsPath(const std::string& log_dir, const ActorId& id);

  // From the running host: NotFound when it wrote no port, else the RPC's status.
  absl::StatusOr<v1::ActorTelemetryReply> Live(const ActorId& id, bool with_records,
                                               absl::Duration timeout = absl::Seconds(2)) const;
  // What the host wrote as it stopped: NotFound when nothing, DataLoss when it does not parse.
  absl::StatusOr<v1::ActorTelemetryReply> Left(const ActorId& id) const;

 private:
  const std::string log_dir_, host_, token_;
  mutable absl::Mutex mu_;
  static constexpr size_t kMaxStubs = 512;
  mutable std::map<std::string, std::shared_ptr<v1::ActorService::Stub>> stubs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace skyrl::worker
