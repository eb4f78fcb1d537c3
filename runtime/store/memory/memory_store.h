// The in-memory store: the embedded default. Everything is lost when the process exits;
// docs/operations.md says what that means for a head restart. Safe for concurrent use.
#pragma once

#include <map>
#include <string>

#include "absl/synchronization/mutex.h"
#include "runtime/store/store.h"

namespace skyrl::store {

class MemoryStore final : public Store {
 public:
  absl::Status Put(absl::string_view table, absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view table, absl::string_view key) override;
  absl::StatusOr<bool> Delete(absl::string_view table, absl::string_view key) override;
  absl::StatusOr<std::vector<Entry>> Scan(absl::string_view table, absl::string_view prefix) override;
  absl::StatusOr<bool> CompareAndSet(absl::string_view table, absl::string_view key,
                                     std::optional<absl::string_view> expected,
                                     std::optional<absl::string_view> desired) override;
  absl::Status Apply(const std::vector<Write>& batch) override;
  std::string Describe() const override { return "memory"; }

 private:
  using Table = std::map<std::string, std::string, std::less<>>;
  std::map<std::string, Table, std::less<>> tables_ ABSL_GUARDED_BY(mu_);
  absl::Mutex mu_;
};

}  // namespace skyrl::store
