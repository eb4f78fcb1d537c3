// A store that fails on demand, for unit tests of what wraps or uses one: while `down` is
// set every call fails, while `writes_down` is set only writes do, with `code` (Unavailable
// unless set). Counts calls. Safe for concurrent use when the real store is.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "runtime/store/store.h"

namespace skyrl::testing {

class FlakyStore final : public store::Store {
 public:
  explicit FlakyStore(store::Store& real) : real_(real) {}
  std::atomic<bool> down{false};
  std::atomic<bool> writes_down{false};
  std::atomic<absl::StatusCode> code{absl::StatusCode::kUnavailable};
  std::atomic<int> calls{0};

  absl::Status Put(absl::string_view t, absl::string_view k, absl::string_view v) override {
    if (Down(true)) return Error();
    return real_.Put(t, k, v);
  }
  absl::StatusOr<std::string> Get(absl::string_view t, absl::string_view k) override {
    if (Down(false)) return Error();
    return real_.Get(t, k);
  }
  absl::StatusOr<bool> Delete(absl::string_view t, absl::string_view k) override {
    if (Down(true)) return Error();
    return real_.Delete(t, k);
  }
  absl::StatusOr<std::vector<store::Entry>> Scan(absl::string_view t, absl::string_view p) override {
    if (Down(false)) return Error();
    return real_.Scan(t, p);
  }
  absl::StatusOr<bool> CompareAndSet(absl::string_view t, absl::string_view k,
                                     std::optional<absl::string_view> e,
                                     std::optional<absl::string_view> d) override {
    if (Down(true)) return Error();
    return real_.CompareAndSet(t, k, e, d);
  }
  absl::Status Apply(const std::vector<store::Write>& b) override {
    if (Down(true)) return Error();
    return real_.Apply(b);
  }
  std::string Describe() const override { return "flaky"; }

 private:
  bool Down(bool write) {
    ++calls;
    return down.load() || (write && writes_down.load());
  }
  absl::Status Error() const { return absl::Status(code.load(), "backend down"); }
  store::Store& real_;
};

}  // namespace skyrl::testing
