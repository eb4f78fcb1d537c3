// Optional TLS for every gRPC connection of the cluster (head, workers, actor hosts, clients).
//
// Configured by three environment variables, which daemons also take as flags (--tls-cert,
// --tls-key, --tls-ca) and pass on to the processes they start:
//   SKYRL_TLS_CERT, SKYRL_TLS_KEY  this process's certificate chain and private key (PEM):
//                                  servers serve TLS with them; clients present them.
//   SKYRL_TLS_CA                   the CA that signed the cluster's certificates (PEM):
//                                  clients verify servers with it; servers that have it
//                                  require and verify client certificates (mutual TLS).
// None set: plaintext, as before. The cluster token is still required on every call either
// way; TLS keeps it (and the calls) from being read on the wire. Weight-sync bulk transfers
// (weight_sync/tcp) are not encrypted.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/status.h"

namespace skyrl::rpc {

// Checks the files can be read and look like PEM, then exports them as the environment
// variables above (so children inherit them). Empty arguments leave a variable as it is.
// Errors name the flag.
absl::Status ConfigureTls(const std::string& cert, const std::string& key, const std::string& ca);

// Credentials for servers and channels, from the environment at the first call (cached).
std::shared_ptr<grpc::ServerCredentials> ServerCredentials();
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials();
// "TLS" / "mutual TLS" / "plaintext", for logs.
std::string TlsDescription();

}  // namespace skyrl::rpc
