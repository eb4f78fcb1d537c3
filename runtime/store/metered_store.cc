#include "runtime/store/metered_store.h"

namespace skyrl::store {
namespace {

absl::StatusCode CodeOf(const absl::Status& s) { return s.code(); }
template <typename T>
absl::StatusCode CodeOf(const absl::StatusOr<T>& s) {
  return s.status().code();
}

}  // namespace

MeteredStore::MeteredStore(std::unique_ptr<Store> backend, const Clock& clock)
    : backend_(std::move(backend)), clock_(clock), stats_(LatencyStats::RpcBounds(), /*max_names=*/16) {}

template <typename Fn>
auto MeteredStore::Timed(absl::string_view op, Fn&& fn) {
  const absl::Time start = clock_.Now();
  auto result = fn();
  stats_.Record(op, absl::StatusCodeToString(CodeOf(result)), absl::ToDoubleSeconds(clock_.Now() - start));
  return result;
}

absl::Status MeteredStore::Put(absl::string_view table, absl::string_view key, absl::string_view value) {
  return Timed("put", [&] { return backend_->Put(table, key, value); });
}

absl::StatusOr<std::string> MeteredStore::Get(absl::string_view table, absl::string_view key) {
  return Timed("get", [&] { return backend_->Get(table, key); });
}

absl::StatusOr<bool> MeteredStore::Delete(absl::string_view table, absl::string_view key) {
  return Timed("delete", [&] { return backend_->Delete(table, key); });
}

absl::StatusOr<std::vector<Entry>> MeteredStore::Scan(absl::string_view table, absl::string_view prefix) {
  return Timed("scan", [&] { return backend_->Scan(table, prefix); });
}

absl::StatusOr<bool> MeteredStore::CompareAndSet(absl::string_view table, absl::string_view key,
                                                 std::optional<absl::string_view> expected,
                                                 std::optional<absl::string_view> desired) {
  return Timed("compare_and_set", [&] { return backend_->CompareAndSet(table, key, expected, desired); });
}

absl::Status MeteredStore::Apply(const std::vector<Write>& batch) {
  return Timed("apply", [&] { return backend_->Apply(batch); });
}

}  // namespace skyrl::store
