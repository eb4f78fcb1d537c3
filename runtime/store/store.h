// The metadata store: namespaced tables of key -> value bytes.
//
// The head keeps every table (nodes, actors, placement groups, jobs, KV) here and nowhere
// else durable. Two backends share this contract and one test suite
// (tests/runtime/store/store_contract_test.cc): the in-memory store, the embedded default, and
// Redis through hiredis.
//
// Contract, for every backend:
// - Tables and keys are independent: the same key in two tables are two entries.
// - Table names are 1-64 characters of [A-Za-z0-9_-]; keys are 1-1024 arbitrary bytes;
//   values up to kMaxValueBytes. Anything else is InvalidArgument naming the field, and
//   nothing is written.
// - Get of an absent key is NotFound. Scan returns entries sorted by key.
// - Apply writes a batch atomically: every write or none.
// - CompareAndSet is atomic with respect to every other call.
// - A backend failure is a Status (usually Unavailable) naming the operation, the table and
//   the key; never a crash, never an unbounded wait.
// Implementations are safe for concurrent use.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace skyrl::store {

inline constexpr size_t kMaxKeyBytes = 1024;
inline constexpr size_t kMaxValueBytes = 64 << 20;

struct Entry {
  std::string key;
  std::string value;
  friend bool operator==(const Entry&, const Entry&) = default;
};

struct Write {
  enum class Op { kPut, kDelete };
  Op op = Op::kPut;
  std::string table;
  std::string key;
  std::string value;  // kPut only

  static Write Put(std::string table, std::string key, std::string value) {
    return {Op::kPut, std::move(table), std::move(key), std::move(value)};
  }
  static Write Delete(std::string table, std::string key) {
    return {Op::kDelete, std::move(table), std::move(key), {}};
  }
};

class Store {
 public:
  virtual ~Store() = default;

  virtual absl::Status Put(absl::string_view table, absl::string_view key, absl::string_view value) = 0;
  // NotFound when absent.
  virtual absl::StatusOr<std::string> Get(absl::string_view table, absl::string_view key) = 0;
  // True when the key existed.
  virtual absl::StatusOr<bool> Delete(absl::string_view table, absl::string_view key) = 0;
  // Every entry whose key starts with `prefix` (all entries for an empty prefix), by key.
  virtual absl::StatusOr<std::vector<Entry>> Scan(absl::string_view table, absl::string_view prefix) = 0;
  // Atomically: if the current value equals `expected` (nullopt: the key is absent), set it
  // to `desired` (nullopt: delete it) and return true; otherwise change nothing and return
  // false. A backend that loses its connection after sending the request cannot know
  // whether it applied, and says so with Unavailable: the caller re-reads and decides.
  virtual absl::StatusOr<bool> CompareAndSet(absl::string_view table, absl::string_view key,
                                             std::optional<absl::string_view> expected,
                                             std::optional<absl::string_view> desired) = 0;
  // All writes or none.
  virtual absl::Status Apply(const std::vector<Write>& batch) = 0;
  // "memory" or "redis://host:port/db" (never the password): for logs and status.
  virtual std::string Describe() const = 0;
};

// Validation shared by every backend; `op` names the operation in the message.
absl::Status ValidateTable(absl::string_view op, absl::string_view table);
absl::Status ValidateKey(absl::string_view op, absl::string_view table, absl::string_view key);
absl::Status ValidateValue(absl::string_view op, absl::string_view table, absl::string_view key,
                           absl::string_view value);
absl::Status ValidateBatch(const std::vector<Write>& batch);
absl::Status ValidateCompareAndSet(absl::string_view table, absl::string_view key,
                                   std::optional<absl::string_view> desired);
// "table/key" for messages: the key C-escaped and cut at 128 bytes.
std::string Where(absl::string_view table, absl::string_view key);

// Opens a store from its command-line form: "memory", or
// "redis://[[user]:password@]host:port[/db]". Each cluster (`ns`) has its own tables.
// `redis_retry_window`: how long a Redis call retries a lost connection before failing.
absl::StatusOr<std::unique_ptr<Store>> OpenStore(absl::string_view spec, absl::string_view ns,
                                                 absl::Duration redis_retry_window = absl::Seconds(30));

}  // namespace skyrl::store
