// Building blocks for daemons' metric families (prometheus-cpp's data model), shared by the
// head's, the workers' and the RPC servers' collectables.
#pragma once

#include <string>
#include <vector>

#include "prometheus/client_metric.h"
#include "prometheus/metric_family.h"
#include "runtime/common/latency_stats.h"

namespace skyrl::metrics {

using Labels = std::vector<prometheus::ClientMetric::Label>;

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

}  // namespace skyrl::metrics
