#include "runtime/metrics/metrics_server.h"

#include <exception>

#include "absl/strings/str_cat.h"
#include "prometheus/exposer.h"

namespace skyrl::metrics {

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& bind, int port) {
  if (port < 0 || port > 65535)
    return absl::InvalidArgumentError(absl::StrCat("--metrics-port: ", port, " is not 0..65535"));
  const std::string address =
      absl::StrCat(bind.find(':') != std::string::npos ? "[" + bind + "]" : bind, ":", port);
  std::unique_ptr<MetricsServer> s(new MetricsServer());
  try {  // prometheus-cpp (civetweb) throws when it cannot listen
    s->exposer_ = std::make_unique<prometheus::Exposer>(address, /*num_threads=*/1);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("metrics: cannot listen on ", address, ": ", e.what()));
  }
  const std::vector<int> ports = s->exposer_->GetListeningPorts();
  if (ports.empty()) return absl::UnavailableError(absl::StrCat("metrics: not listening on ", address));
  s->port_ = ports.front();
  return s;
}

MetricsServer::~MetricsServer() = default;

void MetricsServer::Add(const std::shared_ptr<prometheus::Collectable>& c) {
  exposer_->RegisterCollectable(c);
}

}  // namespace skyrl::metrics
