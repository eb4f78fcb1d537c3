// A daemon's Prometheus endpoint: GET /metrics on bind:port (prometheus-cpp's exposer, the text
// exposition format), serving what its collectables report at scrape time. Off unless a daemon
// is given --metrics-port; port 0 picks a free one. Bound like the daemon's own service.
//
// Thread-safe: scrapes run on the exposer's threads, so collectables must be too.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prometheus/collectable.h"

namespace prometheus {
class Exposer;
}

namespace skyrl::metrics {

class MetricsServer {
 public:
  // Listens on bind:port. Unavailable naming the address when it cannot.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& bind, int port);
  ~MetricsServer();

  // Serves `c` at /metrics (merged with the others) while it lives.
  void Add(const std::shared_ptr<prometheus::Collectable>& c);
  int port() const { return port_; }

 private:
  MetricsServer() = default;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

}  // namespace skyrl::metrics
