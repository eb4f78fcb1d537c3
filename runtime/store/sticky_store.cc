#include "runtime/store/sticky_store.h"

#include "absl/strings/str_cat.h"

namespace skyrl::store {

bool StickyStore::MayBeLost(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kCancelled:
      return true;
    default:
      return false;
  }
}

absl::Status StickyStore::lost() const {
  absl::MutexLock lock(&mu_);
  return lost_;
}

absl::Status StickyStore::Refusal() const {
  absl::MutexLock lock(&mu_);
  if (lost_.ok()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("the metadata store lost a write earlier (", lost_.message(),
                   "), so this head takes no more changes: restart it to recover from the store"));
}

absl::Status StickyStore::Note(absl::Status s, absl::string_view op, absl::string_view table,
                               absl::string_view key) {
  if (s.ok() || !MayBeLost(s.code())) return s;
  absl::Status first;
  {
    absl::MutexLock lock(&mu_);
    if (!lost_.ok()) return s;
    lost_ = absl::Status(s.code(), absl::StrCat(op, " ", Where(table, key), ": ", s.message()));
    first = lost_;
  }
  if (on_lost_) on_lost_(first);
  return s;
}

absl::Status StickyStore::Put(absl::string_view table, absl::string_view key, absl::string_view value) {
  if (absl::Status r = Refusal(); !r.ok()) return r;
  return Note(inner_.Put(table, key, value), "put", table, key);
}

absl::StatusOr<bool> StickyStore::Delete(absl::string_view table, absl::string_view key) {
  if (absl::Status r = Refusal(); !r.ok()) return r;
  absl::StatusOr<bool> out = inner_.Delete(table, key);
  if (!out.ok()) return Note(out.status(), "delete", table, key);
  return out;
}

absl::StatusOr<bool> StickyStore::CompareAndSet(absl::string_view table, absl::string_view key,
                                                std::optional<absl::string_view> expected,
                                                std::optional<absl::string_view> desired) {
  if (absl::Status r = Refusal(); !r.ok()) return r;
  absl::StatusOr<bool> out = inner_.CompareAndSet(table, key, expected, desired);
  if (!out.ok()) return Note(out.status(), "compare_and_set", table, key);
  return out;
}

absl::Status StickyStore::Apply(const std::vector<Write>& batch) {
  if (absl::Status r = Refusal(); !r.ok()) return r;
  absl::Status s = inner_.Apply(batch);
  if (s.ok() || batch.empty()) return s;
  // The batch named by its first write (built only on a failure).
  return Note(std::move(s), "apply", batch.front().table,
              batch.size() == 1 ? batch.front().key
                                : absl::StrCat(batch.front().key, " and ", batch.size() - 1, " more"));
}

}  // namespace skyrl::store
