#include "runtime/rpc/server.h"

#include <grpcpp/health_check_service_interface.h>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "runtime/rpc/channel.h"
#include "runtime/rpc/rpc_stats.h"
#include "runtime/rpc/tls.h"

namespace skyrl::rpc {

void AddTlsFlags(CLI::App& app, TlsFiles& files) {
  app.add_option("--tls-cert", files.cert,
                 "serve TLS with this certificate chain (PEM); also $SKYRL_TLS_CERT");
  app.add_option("--tls-key", files.key, "private key for --tls-cert (PEM); also $SKYRL_TLS_KEY");
  app.add_option("--tls-ca", files.ca,
                 "CA of the cluster's certificates (PEM): verify peers, require client certificates; also "
                 "$SKYRL_TLS_CA");
}

absl::Status ConfigureTls(const TlsFiles& files) { return ConfigureTls(files.cert, files.key, files.ca); }

absl::StatusOr<ListeningServer> StartServer(const std::string& bind, int port,
                                            const std::vector<grpc::Service*>& services,
                                            LatencyStats* stats) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  ListeningServer out;
  builder.AddListeningPort(absl::StrCat(bind, ":", port), ServerCredentials(), &out.port);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  for (grpc::Service* s : services) builder.RegisterService(s);
  if (stats) {
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
    interceptors.push_back(RpcStatsInterceptorFactory(stats));
    builder.experimental().SetInterceptorCreators(std::move(interceptors));
  }
  out.server = builder.BuildAndStart();
  if (!out.server || out.port == 0)
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", bind, ":", port, " (in use, or not an address of this host)"));
  return out;
}

}  // namespace skyrl::rpc
