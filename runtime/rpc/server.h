// What every daemon (head, worker) sets up the same way: the TLS flags and its gRPC server.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/common/latency_stats.h"

namespace CLI {
class App;
}

namespace skyrl::rpc {

// The PEM files named by --tls-cert, --tls-key and --tls-ca (see tls.h).
struct TlsFiles {
  std::string cert, key, ca;
};

// Adds --tls-cert, --tls-key and --tls-ca to a daemon's flags, writing into `files`.
void AddTlsFlags(CLI::App& app, TlsFiles& files);
// ConfigureTls with the files; InvalidArgument naming the flag.
absl::Status ConfigureTls(const TlsFiles& files);

struct ListeningServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;  // the bound port (the one asked for, or the one picked for 0)
};

// Serves `services` on bind:port (0: any free port) with the cluster's credentials, the
// message size limits and the standard health service (no token, for Kubernetes probes).
// SO_REUSEPORT is off, which gRPC turns on by default: a second daemon on the port fails here
// instead of silently sharing it. Unavailable naming the address when it cannot listen.
// The services must outlive the server. With `stats`, every call answered is counted there by
// method and status code, with its latency (rpc_stats.h); `stats` must outlive the server too.
absl::StatusOr<ListeningServer> StartServer(const std::string& bind, int port,
                                            const std::vector<grpc::Service*>& services,
                                            LatencyStats* stats = nullptr);

}  // namespace skyrl::rpc
