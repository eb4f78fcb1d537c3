#include "runtime/metrics/families.h"

#include <limits>

namespace skyrl::metrics {
namespace {

prometheus::MetricFamily Family(std::string name, std::string help, prometheus::MetricType type,
                                const std::map<Labels, double>& values) {
  prometheus::MetricFamily f{std::move(name), std::move(help), type, {}};
  for (const auto& [labels, value] : values)
    f.metric.push_back(Sample(value, labels, type == prometheus::MetricType::Counter));
  return f;
}

}  // namespace

prometheus::ClientMetric Sample(double value, Labels labels, bool counter) {
  prometheus::ClientMetric m;
  m.label = std::move(labels);
  (counter ? m.counter.value : m.gauge.value) = value;
  return m;
}

prometheus::MetricFamily Gauges(std::string name, std::string help, const std::map<Labels, double>& values) {
  return Family(std::move(name), std::move(help), prometheus::MetricType::Gauge, values);
}

prometheus::MetricFamily Counters(std::string name, std::string help,
                                  const std::map<Labels, double>& values) {
  return Family(std::move(name), std::move(help), prometheus::MetricType::Counter, values);
}

prometheus::ClientMetric HistogramSample(const std::vector<double>& bounds,
                                         const std::vector<uint64_t>& counts, double sum, Labels labels) {
  prometheus::ClientMetric m;
  m.label = std::move(labels);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    cumulative += counts[i];
    m.histogram.bucket.push_back(
        {cumulative, i < bounds.size() ? bounds[i] : std::numeric_limits<double>::infinity()});
  }
  m.histogram.sample_count = cumulative;
  m.histogram.sample_sum = sum;
  return m;
}

std::vector<prometheus::MetricFamily> LatencyFamilies(const LatencyStats& stats, const std::string& counter,
                                                      const std::string& counter_help,
                                                      const std::string& histogram,
                                                      const std::string& histogram_help,
                                                      const std::string& name_label,
                                                      const std::string& outcome_label) {
  prometheus::MetricFamily c{counter, counter_help, prometheus::MetricType::Counter, {}};
  prometheus::MetricFamily h{histogram, histogram_help, prometheus::MetricType::Histogram, {}};
  for (const LatencyStats::Series& s : stats.Snapshot()) {
    for (const auto& [outcome, n] : s.outcomes)
      c.metric.push_back(
          Sample(static_cast<double>(n), {{name_label, s.name}, {outcome_label, outcome}}, /*counter=*/true));
    h.metric.push_back(HistogramSample(stats.bounds(), s.buckets, s.sum_s, {{name_label, s.name}}));
  }
  return {std::move(c), std::move(h)};
}

std::vector<prometheus::MetricFamily> RpcServerFamilies(const LatencyStats& stats) {
  return LatencyFamilies(
      stats, "skyrl_rpc_server_handled_total", "RPCs this daemon answered, by method and status code",
      "skyrl_rpc_server_handling_seconds",
      "RPC handling time in this daemon: arrival to status sent (a stream's whole life)", "method", "code");
}

}  // namespace skyrl::metrics
