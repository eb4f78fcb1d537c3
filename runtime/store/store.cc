#include "runtime/store/store.h"

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/store/memory/memory_store.h"
#include "runtime/store/redis/redis_store.h"

namespace skyrl::store {

std::string Where(absl::string_view table, absl::string_view key) {
  std::string k = absl::CHexEscape(key.substr(0, 128));
  if (key.size() > 128) k += "...";
  return absl::StrCat(table, "/", k);
}

absl::Status ValidateTable(absl::string_view op, absl::string_view table) {
  if (table.empty() || table.size() > 64)
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": table name must be 1-64 characters, got ", table.size()));
  for (char c : table) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok)
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": table \"", table, "\" has a character outside [A-Za-z0-9_-]"));
  }
  return absl::OkStatus();
}

absl::Status ValidateKey(absl::string_view op, absl::string_view table, absl::string_view key) {
  if (absl::Status s = ValidateTable(op, table); !s.ok()) return s;
  if (key.empty() || key.size() > kMaxKeyBytes)
    return absl::InvalidArgumentError(
        absl::StrCat(op, " ", table, ": key must be 1-", kMaxKeyBytes, " bytes, got ", key.size()));
  return absl::OkStatus();
}

absl::Status ValidateValue(absl::string_view op, absl::string_view table, absl::string_view key,
                           absl::string_view value) {
  if (absl::Status s = ValidateKey(op, table, key); !s.ok()) return s;
  if (value.size() > kMaxValueBytes)
    return absl::InvalidArgumentError(absl::StrCat(op, " ", Where(table, key), ": value of ", value.size(),
                                                   " bytes exceeds the limit of ", kMaxValueBytes));
  return absl::OkStatus();
}

absl::Status ValidateCompareAndSet(absl::string_view table, absl::string_view key,
                                   std::optional<absl::string_view> desired) {
  return desired ? ValidateValue("compare-and-set", table, key, *desired)
                 : ValidateKey("compare-and-set", table, key);
}

absl::Status ValidateBatch(const std::vector<Write>& batch) {
  for (const Write& w : batch) {
    absl::Status s = w.op == Write::Op::kPut ? ValidateValue("apply", w.table, w.key, w.value)
                                             : ValidateKey("apply", w.table, w.key);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Store>> OpenStore(absl::string_view spec, absl::string_view ns,
                                                 absl::Duration redis_retry_window) {
  if (absl::Status s = ValidateTable("store namespace", ns); !s.ok()) return s;
  if (spec == "memory") return std::unique_ptr<Store>(std::make_unique<MemoryStore>());
  if (absl::StartsWith(spec, "redis://")) {
    absl::StatusOr<RedisOptions> options = ParseRedisUrl(spec);
    if (!options.ok()) return options.status();
    options->ns = std::string(ns);
    options->reconnect_window = redis_retry_window;
    absl::StatusOr<std::unique_ptr<RedisStore>> store = RedisStore::Connect(*options);
    if (!store.ok()) return store.status();
    return std::unique_ptr<Store>(std::move(*store));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--store: \"", spec, "\" is neither \"memory\" nor a redis://host:port URL"));
}

}  // namespace skyrl::store
