// Metric families as a map for tests: "name" or "name{label=value,...}" (labels in the order the
// collectable gives them) -> the gauge's or counter's value; a histogram as name_count{...} and
// name_sum{...}.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "prometheus/metric_family.h"

namespace skyrl::testing {

inline std::map<std::string, double> Flatten(const std::vector<prometheus::MetricFamily>& families) {
  std::map<std::string, double> out;
  for (const auto& f : families)
    for (const auto& m : f.metric) {
      std::string key = f.name;
      for (size_t i = 0; i < m.label.size(); ++i)
        key +=
            (i ? "," : "{") + m.label[i].name + "=" + m.label[i].value + (i + 1 == m.label.size() ? "}" : "");
      if (f.type == prometheus::MetricType::Histogram) {
        const std::string labels = key.substr(f.name.size());
        out[f.name + "_count" + labels] = static_cast<double>(m.histogram.sample_count);
        out[f.name + "_sum" + labels] = m.histogram.sample_sum;
        continue;
      }
      out[key] = f.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
    }
  return out;
}

}  // namespace skyrl::testing
