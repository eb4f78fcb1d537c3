#include "runtime/store/memory/memory_store.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace skyrl::store {

absl::Status MemoryStore::Put(absl::string_view table, absl::string_view key, absl::string_view value) {
  if (absl::Status s = ValidateValue("put", table, key, value); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  tables_[std::string(table)].insert_or_assign(std::string(key), std::string(value));
  return absl::OkStatus();
}

absl::StatusOr<std::string> MemoryStore::Get(absl::string_view table, absl::string_view key) {
  if (absl::Status s = ValidateKey("get", table, key); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  auto t = tables_.find(table);
  if (t != tables_.end()) {
    auto it = t->second.find(key);
    if (it != t->second.end()) return it->second;
  }
  return absl::NotFoundError(absl::StrCat("get ", Where(table, key), ": not found"));
}

absl::StatusOr<bool> MemoryStore::Delete(absl::string_view table, absl::string_view key) {
  if (absl::Status s = ValidateKey("delete", table, key); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  auto t = tables_.find(table);
  if (t == tables_.end()) return false;
  auto it = t->second.find(key);
  if (it == t->second.end()) return false;
  t->second.erase(it);
  return true;
}

absl::StatusOr<std::vector<Entry>> MemoryStore::Scan(absl::string_view table, absl::string_view prefix) {
  if (absl::Status s = ValidateTable("scan", table); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  std::vector<Entry> out;
  auto t = tables_.find(table);
  if (t == tables_.end()) return out;
  for (auto it = t->second.lower_bound(prefix); it != t->second.end() && absl::StartsWith(it->first, prefix);
       ++it)
    out.push_back({it->first, it->second});
  return out;
}

absl::StatusOr<bool> MemoryStore::CompareAndSet(absl::string_view table, absl::string_view key,
                                                std::optional<absl::string_view> expected,
                                                std::optional<absl::string_view> desired) {
  if (absl::Status s = ValidateCompareAndSet(table, key, desired); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  Table& t = tables_[std::string(table)];
  auto it = t.find(key);
  bool present = it != t.end();
  if (expected.has_value() != present) return false;
  if (present && it->second != *expected) return false;
  if (desired)
    t.insert_or_assign(std::string(key), std::string(*desired));
  else if (present)
    t.erase(it);
  return true;
}

absl::Status MemoryStore::Apply(const std::vector<Write>& batch) {
  if (absl::Status s = ValidateBatch(batch); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  for (const Write& w : batch) {
    if (w.op == Write::Op::kPut)
      tables_[w.table].insert_or_assign(w.key, w.value);
    else if (auto t = tables_.find(w.table); t != tables_.end())
      t->second.erase(w.key);
  }
  return absl::OkStatus();
}

}  // namespace skyrl::store
