// A store that takes no more writes once one is lost, and says why: as leveldb keeps its
// background error. The head writes its tables through to the store, one record per change;
// a change the store missed (the write-behind queue full, say) leaves the stored record
// stale with nothing to correct it, and a head that went on would build on a table that
// its successor cannot recover. So the first write that fails in a way that may have lost it
// (the store could not be reached, or failed: kUnavailable, kDeadlineExceeded,
// kResourceExhausted, kInternal, kUnknown, kDataLoss, kAborted, kCancelled) is returned as
// it is, and every later write fails at once with FailedPrecondition naming that first
// error; a restart recovers a consistent view from the store. A refusal of bad input
// (kInvalidArgument and the like) wrote nothing and changes nothing. Reads pass through.
// Safe for concurrent use when the wrapped store is.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "runtime/store/store.h"

namespace skyrl::store {

class StickyStore final : public Store {
 public:
  // `on_lost` (optional) is called once, with the first lost write's error, on the thread
  // that wrote it (with whatever locks the writer holds: it must not call back into them).
  explicit StickyStore(Store& inner, std::function<void(const absl::Status&)> on_lost = nullptr)
      : inner_(inner), on_lost_(std::move(on_lost)) {}

  absl::Status Put(absl::string_view table, absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view table, absl::string_view key) override {
    return inner_.Get(table, key);
  }
  absl::StatusOr<bool> Delete(absl::string_view table, absl::string_view key) override;
  absl::StatusOr<std::vector<Entry>> Scan(absl::string_view table, absl::string_view prefix) override {
    return inner_.Scan(table, prefix);
  }
  absl::StatusOr<bool> CompareAndSet(absl::string_view table, absl::string_view key,
                                     std::optional<absl::string_view> expected,
                                     std::optional<absl::string_view> desired) override;
  absl::Status Apply(const std::vector<Write>& batch) override;
  std::string Describe() const override { return inner_.Describe(); }

  // OK until a write was lost; then that write's error.
  absl::Status lost() const;
  // Whether a failed write's code says it may have been lost (above).
  static bool MayBeLost(absl::StatusCode code);

 private:
  // The refusal of every write after a lost one; OK while none was lost.
  absl::Status Refusal() const;
  // Records `s` if it is the first lost write's error; returns `s`.
  absl::Status Note(absl::Status s, absl::string_view op, absl::string_view table, absl::string_view key);

  Store& inner_;
  const std::function<void(const absl::Status&)> on_lost_;
  mutable absl::Mutex mu_;
  absl::Status lost_ ABSL_GUARDED_BY(mu_);
};

}  // namespace skyrl::store
