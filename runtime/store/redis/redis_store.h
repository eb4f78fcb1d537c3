// The Redis store, through hiredis. Each table is one Redis hash, "skyrl:<ns>:<table>",
// so a scan reads one key and a cluster's tables never mix with another's.
//
// Failure handling:
// - Every call has a timeout (command_timeout); a call never waits longer than
//   reconnect_window plus one command_timeout in all.
// - A lost connection is re-established with exponential backoff (backoff_initial doubling
//   to backoff_max) for up to reconnect_window, then the call fails with Unavailable naming
//   the operation and the key. Idempotent operations (put, get, delete, scan, batch) are
//   retried after a reconnect; compare-and-set is retried only when Redis surely did not run
//   it (connect failure, LOADING), otherwise it reports that its outcome is unknown.
// - Replies "LOADING" (a restarted server reading its append-only file) count as transient.
// Safe for concurrent use: calls share one connection under a mutex.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/store/store.h"

struct redisContext;
struct redisReply;

namespace skyrl::store {

struct RedisOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  int db = 0;
  std::string user;      // empty: AUTH with the password alone
  std::string password;  // empty: no AUTH
  std::string ns = "default";
  absl::Duration connect_timeout = absl::Seconds(2);
  absl::Duration command_timeout = absl::Seconds(5);
  absl::Duration reconnect_window = absl::Seconds(30);
  absl::Duration backoff_initial = absl::Milliseconds(20);
  absl::Duration backoff_max = absl::Seconds(1);
};

// Parses "redis://[[user]:password@]host[:port][/db]". Errors name the part that is wrong.
absl::StatusOr<RedisOptions> ParseRedisUrl(absl::string_view url);

class RedisStore final : public Store {
 public:
  // Connects (retrying within reconnect_window) and checks AUTH and SELECT.
  static absl::StatusOr<std::unique_ptr<RedisStore>> Connect(const RedisOptions& options);
  ~RedisStore() override;

  absl::Status Put(absl::string_view table, absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view table, absl::string_view key) override;
  absl::StatusOr<bool> Delete(absl::string_view table, absl::string_view key) override;
  absl::StatusOr<std::vector<Entry>> Scan(absl::string_view table, absl::string_view prefix) override;
  absl::StatusOr<bool> CompareAndSet(absl::string_view table, absl::string_view key,
                                     std::optional<absl::string_view> expected,
                                     std::optional<absl::string_view> desired) override;
  absl::Status Apply(const std::vector<Write>& batch) override;
  std::string Describe() const override;

  // Number of successful reconnects since Connect: for tests and status.
  int reconnects() const;

 private:
  struct ReplyDeleter {
    void operator()(redisReply* r) const;
  };
  using Reply = std::unique_ptr<redisReply, ReplyDeleter>;
  using Command = std::vector<std::string>;
  enum class Retry { kAlways, kOnlyIfUnsent };

  explicit RedisStore(RedisOptions options) : options_(std::move(options)) {}
  std::string HashKey(absl::string_view table) const;

  // Sends `commands` pipelined and returns one reply each. `what` names the operation and
  // key for error messages. Error replies are returned as replies, except LOADING.
  absl::StatusOr<std::vector<Reply>> Exec(const std::string& what, const std::vector<Command>& commands,
                                          Retry retry);
  absl::Status EnsureConnected() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Disconnect() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RedisOptions options_;
  mutable absl::Mutex mu_;
  redisContext* ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool ever_connected_ ABSL_GUARDED_BY(mu_) = false;
  int reconnects_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace skyrl::store
