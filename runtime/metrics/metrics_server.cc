#include "runtime/metrics/metrics_server.h"

#include "absl/strings/str_cat.h"
#include "prometheus/text_serializer.h"

namespace skyrl::metrics {

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& bind, int port) {
  if (port < 0 || port > 65535)
    return absl::InvalidArgumentError(absl::StrCat("--metrics-port: ", port, " is not 0..65535"));
  std::unique_ptr<MetricsServer> s(new MetricsServer());
  MetricsServer* self = s.get();
  absl::StatusOr<std::unique_ptr<http::HttpServer>> server =
      http::HttpServer::Start(bind, port, [self](const http::Request& req) { return self->Serve(req); });
  if (!server.ok())
    return absl::Status(server.status().code(), absl::StrCat("metrics: ", server.status().message()));
  s->server_ = std::move(*server);
  return s;
}

MetricsServer::~MetricsServer() {
  if (server_) server_->Stop();  // no scrape runs once the collectables start to go
}

void MetricsServer::Add(const std::shared_ptr<prometheus::Collectable>& c) {
  absl::MutexLock lock(&mu_);
  collectables_.push_back(c);
}

void MetricsServer::AddPage(const std::string& path, http::Handler page) {
  absl::MutexLock lock(&mu_);
  pages_[path] = std::move(page);
}

http::Response MetricsServer::Serve(const http::Request& req) {
  if (req.method != "GET" && req.method != "HEAD") return http::Response::Text(405, "GET only\n");
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables;
  http::Handler page;
  {
    absl::MutexLock lock(&mu_);
    if (req.path == "/metrics") {
      for (const auto& weak : collectables_)
        if (auto c = weak.lock()) collectables.push_back(std::move(c));
    } else if (auto it = pages_.find(req.path); it != pages_.end()) {
      page = it->second;
    } else {
      return http::Response::Text(404,
                                  absl::StrCat("no page ", req.path.substr(0, 256), " here; try /metrics\n"));
    }
  }
  if (page) return page(req);
  std::vector<prometheus::MetricFamily> families;
  for (const auto& c : collectables) {
    std::vector<prometheus::MetricFamily> more = c->Collect();
    families.insert(families.end(), std::make_move_iterator(more.begin()),
                    std::make_move_iterator(more.end()));
  }
  http::Response out;
  out.content_type = "text/plain; version=0.0.4; charset=utf-8";
  out.body = prometheus::TextSerializer().Serialize(families);
  return out;
}

}  // namespace skyrl::metrics
