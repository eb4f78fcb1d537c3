// A store that counts each operation of the one it wraps, by outcome, with its latency: the
// head wraps its backend (Redis or memory) in one, under the write-behind cache, so its
// metrics show what the backend itself costs and refuses (skyrl_store_operations_total,
// skyrl_store_operation_seconds).
//
// Operations are named "put", "get", "delete", "scan", "compare_and_set" and "apply";
// outcomes are status code names ("OK", "NOT_FOUND", "UNAVAILABLE"). Results pass through
// unchanged. Safe for concurrent use when the wrapped store is.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/common/clock.h"
#include "runtime/common/latency_stats.h"
#include "runtime/store/store.h"

namespace skyrl::store {

class MeteredStore final : public Store {
 public:
  // `clock` times each call; it must outlive the store.
  MeteredStore(std::unique_ptr<Store> backend, const Clock& clock);

  absl::Status Put(absl::string_view table, absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view table, absl::string_view key) override;
  absl::StatusOr<bool> Delete(absl::string_view table, absl::string_view key) override;
  absl::StatusOr<std::vector<Entry>> Scan(absl::string_view table, absl::string_view prefix) override;
  absl::StatusOr<bool> CompareAndSet(absl::string_view table, absl::string_view key,
                                     std::optional<absl::string_view> expected,
                                     std::optional<absl::string_view> desired) override;
  absl::Status Apply(const std::vector<Write>& batch) override;
  std::string Describe() const override { return backend_->Describe(); }

  const LatencyStats& stats() const { return stats_; }

 private:
  template <typename Fn>
  auto Timed(absl::string_view op, Fn&& fn);

  const std::unique_ptr<Store> backend_;
  const Clock& clock_;
  LatencyStats stats_;
};

}  // namespace skyrl::store
