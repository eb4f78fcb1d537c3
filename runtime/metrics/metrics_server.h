// A daemon's Prometheus endpoint: GET /metrics on bind:port in the text exposition format
// (prometheus-cpp's serializer), serving what its collectables report at scrape time, on the
// repository's HTTP server (runtime/http). Off unless a daemon is given --metrics-port; port 0
// picks a free one. Bound like the daemon's own service. A daemon may serve more pages beside
// it (the head: /metrics/targets).
//
// Thread-safe: scrapes run on the server's connection threads, so collectables must be too.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/collectable.h"
#include "runtime/http/http_server.h"

namespace skyrl::metrics {

class MetricsServer {
 public:
  // Listens on bind:port. InvalidArgument for a bad port, Unavailable naming the address when
  // it cannot listen.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& bind, int port);
  ~MetricsServer();

  // Serves `c` at /metrics (merged with the others) while it lives.
  void Add(const std::shared_ptr<prometheus::Collectable>& c);
  // Answers GET `path` with `page` (any path but /metrics).
  void AddPage(const std::string& path, http::Handler page);
  int port() const { return server_->port(); }

 private:
  MetricsServer() = default;
  http::Response Serve(const http::Request& req);

  absl::Mutex mu_;
  std::vector<std::weak_ptr<prometheus::Collectable>> collectables_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, http::Handler> pages_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<http::HttpServer> server_;  // last: stopped before the rest goes
};

}  // namespace skyrl::metrics
