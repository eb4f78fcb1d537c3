// Building blocks for daemons' metric families (prometheus-cpp's data model), shared by the
// head's, the workers' and the RPC servers' collectables.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "prometheus/client_metric.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "runtime/common/latency_stats.h"

namespace skyrl::metrics {

using Labels = std::vector<prometheus::ClientMetric::Label>;

// One sample: a gauge's value, or a counter's when `counter`.
prometheus::ClientMetric Sample(double value, Labels labels = {}, bool counter = false);

// A family of gauges (or counters) with one sample per label set of `values`.
prometheus::MetricFamily Gauges(std::string name, std::string help, const std::map<Labels, double>& values);
prometheus::MetricFamily Counters(std::string name, std::string help, const std::map<Labels, double>& values);

// A histogram sample from non-cumulative `counts` (one per bound, then one above the last).
prometheus::ClientMetric HistogramSample(const std::vector<double>& bounds,
                                         const std::vector<uint64_t>& counts, double sum, Labels labels);

// Two families from `stats`: a counter `counter` {name_label, outcome_label} and a histogram
// `histogram` {name_label} of seconds.
std::vector<prometheus::MetricFamily> LatencyFamilies(const LatencyStats& stats, const std::string& counter,
                                                      const std::string& counter_help,
                                                      const std::string& histogram,
                                                      const std::string& histogram_help,
                                                      const std::string& name_label,
                                                      const std::string& outcome_label);

// What a daemon's gRPC server answered (rpc/rpc_stats.h): skyrl_rpc_server_handled_total
// {method,code} and skyrl_rpc_server_handling_seconds{method}.
std::vector<prometheus::MetricFamily> RpcServerFamilies(const LatencyStats& stats);

// A collectable made of a function, read at each scrape.
class FunctionCollectable : public prometheus::Collectable {
 public:
  explicit FunctionCollectable(std::function<std::vector<prometheus::MetricFamily>()> fn)
      : fn_(std::move(fn)) {}
  std::vector<prometheus::MetricFamily> Collect() const override { return fn_(); }

 private:
  const std::function<std::vector<prometheus::MetricFamily>()> fn_;
};

}  // namespace skyrl::metrics
