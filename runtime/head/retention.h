// Bounded retention of terminal records in the head's tables: DEAD actors and REMOVED
// placement groups are kept (in memory and in the store) only up to a cap per table, the
// oldest by the time they became terminal evicted first, so that a cluster that creates
// thousands of short-lived actors and groups a second does not grow without bound (Ray's GCS
// caps destroyed actors the same way: maximum_gcs_destroyed_actor_cached_count).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "runtime/store/store.h"

namespace skyrl::head {

inline constexpr int64_t kDefaultKeepTerminal = 10000;
// An upper bound that catches typos (an extra few zeros) before they hold the head's memory.
inline constexpr int64_t kMaxKeepTerminal = 10'000'000;

// How many terminal records each table keeps (0: none; each becomes NotFound as soon as it
// is terminal).
struct RetentionOptions {
  size_t keep_terminal = kDefaultKeepTerminal;
};

// The value of the head's --keep-terminal flag, validated (InvalidArgument naming the flag).
inline absl::StatusOr<RetentionOptions> RetentionFromFlag(int64_t keep_terminal) {
  if (keep_terminal < 0 || keep_terminal > kMaxKeepTerminal)
    return absl::InvalidArgumentError(absl::StrCat("--keep-terminal: must be in 0-", kMaxKeepTerminal,
                                                   " (terminal records kept per table), got ",
                                                   keep_terminal));
  return RetentionOptions{size_t(keep_terminal)};
}

// The ids of one table's terminal records in the order they became terminal (the order of
// Push), and which of them are over the cap. Each id is pushed once, when its record becomes
// terminal (terminal states are final). Push and PopOldest are O(1), so the create and remove
// paths never scan. Not thread-safe: the owning manager's lock guards it.
template <typename Id>
class TerminalFifo {
 public:
  explicit TerminalFifo(size_t keep) : keep_(keep) {}
  void Push(Id id) { ids_.push_back(std::move(id)); }
  // Recovery: pushes records read back from the store in the order they became terminal,
  // given as (unix ms, id); ties (one millisecond) by id (the ids' byte order, which is also
  // the order of their hex text).
  void PushInOrder(std::vector<std::pair<int64_t, Id>> terminal) {
    std::sort(terminal.begin(), terminal.end());
    for (auto& [ms, id] : terminal) Push(std::move(id));
  }
  bool OverCap() const { return ids_.size() > keep_; }
  // REQUIRES: size() > 0.
  Id PopOldest() {
    Id id = std::move(ids_.front());
    ids_.pop_front();
    return id;
  }
  size_t size() const { return ids_.size(); }
  size_t keep() const { return keep_; }

 private:
  const size_t keep_;
  std::deque<Id> ids_;
};

// Deletes evicted records in batches (Store::Apply), one round trip per batch instead of one
// per record: a head that starts over a table far above its cap (an old table, or a lower
// --keep-terminal) trims it at once. Returns the first refusal; the batches after it are
// still tried, and what is left is evicted again by the next start.
inline absl::Status ApplyEvictions(store::Store& store, const std::vector<store::Write>& deletes) {
  constexpr size_t kBatch = 1000;
  absl::Status first;
  for (size_t i = 0; i < deletes.size(); i += kBatch) {
    std::vector<store::Write> batch(deletes.begin() + std::ptrdiff_t(i),
                                    deletes.begin() + std::ptrdiff_t(std::min(deletes.size(), i + kBatch)));
    if (absl::Status s = store.Apply(batch); !s.ok() && first.ok()) first = s;
  }
  return first;
}

}  // namespace skyrl::head
