#include "runtime/common/latency_stats.h"

#include <algorithm>

namespace skyrl {

std::vector<double> LatencyStats::RpcBounds() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
          0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30};
}

LatencyStats::LatencyStats(std::vector<double> bounds, size_t max_names)
    : bounds_(std::move(bounds)), max_names_(std::max<size_t>(1, max_names)) {}

void LatencyStats::Record(absl::string_view name, absl::string_view outcome, double seconds) {
  seconds = std::max(0.0, seconds);
  const size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), seconds) - bounds_.begin();
  absl::MutexLock lock(&mu_);
  auto it = series_.find(name);
  if (it == series_.end()) {
    const std::string key = series_.size() + 1 >= max_names_ ? "(other)" : std::string(name);
    it = series_.try_emplace(key).first;
    if (it->second.buckets.empty()) {
      it->second.name = key;
      it->second.buckets.assign(bounds_.size() + 1, 0);
    }
  }
  Series& s = it->second;
  auto o = s.outcomes.find(outcome);
  if (o == s.outcomes.end()) o = s.outcomes.emplace(std::string(outcome), 0).first;
  ++o->second;
  ++s.buckets[bucket];
  s.sum_s += seconds;
}

std::vector<LatencyStats::Series> LatencyStats::Snapshot() const {
  std::vector<Series> out;
  {
    absl::MutexLock lock(&mu_);
    out.reserve(series_.size());
    for (const auto& [name, s] : series_) out.push_back(s);
  }
  std::sort(out.begin(), out.end(), [](const Series& a, const Series& b) { return a.name < b.name; });
  return out;
}

}  // namespace skyrl
