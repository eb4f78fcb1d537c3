// Counts and latencies of operations, by name and outcome, for a daemon's metrics: the RPCs a
// server answered (rpc/rpc_stats.h), the store operations the head made (store/metered_store.h).
//
//   LatencyStats s(LatencyStats::RpcBounds());
//   s.Record("skyrl.v1.NodeService/Heartbeat", "OK", 0.0004);
//   for (const LatencyStats::Series& x : s.Snapshot()) ...
//
// Names past `max_names` distinct ones are counted under "(other)". Thread-safe; one short
// critical section per record.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace skyrl {

class LatencyStats {
 public:
  // Upper bounds (seconds) for calls answered from memory or over a local network.
  static std::vector<double> RpcBounds();

  explicit LatencyStats(std::vector<double> bounds, size_t max_names = 256);

  void Record(absl::string_view name, absl::string_view outcome, double seconds);

  struct Series {
    std::string name;
    std::map<std::string, uint64_t, std::less<>> outcomes;  // count by outcome
    std::vector<uint64_t> buckets;                          // per bound, then above the last (not cumulative)
    double sum_s = 0;
  };
  // Every name seen, sorted by name.
  std::vector<Series> Snapshot() const;
  const std::vector<double>& bounds() const { return bounds_; }

 private:
  const std::vector<double> bounds_;
  const size_t max_names_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Series> series_ ABSL_GUARDED_BY(mu_);
};

}  // namespace skyrl
