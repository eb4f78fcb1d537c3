#include "runtime/store/redis/redis_store.h"

#include <hiredis/hiredis.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "runtime/common/logging.h"

namespace skyrl::store {
namespace {

timeval AsTimeval(absl::Duration d) { return absl::ToTimeval(d); }

std::string ReplyError(const redisReply* r) { return std::string(r->str, r->len); }

bool IsLoading(const redisReply* r) {
  return r->type == REDIS_REPLY_ERROR && absl::StartsWith(absl::string_view(r->str, r->len), "LOADING");
}

// Escapes glob metacharacters so a key prefix matches literally in HSCAN MATCH.
std::string GlobPrefix(absl::string_view prefix) {
  std::string out;
  for (char c : prefix) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('*');
  return out;
}

constexpr char kCasScript[] = R"lua(
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if ARGV[2] == '1' then
  if cur == false or cur ~= ARGV[3] then return 0 end
elseif cur ~= false then
  return 0
end
if ARGV[4] == '1' then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[5])
else
  redis.call('HDEL', KEYS[1], ARGV[1])
end
return 1
)lua";

}  // namespace

absl::StatusOr<RedisOptions> ParseRedisUrl(absl::string_view url) {
  RedisOptions o;
  constexpr absl::string_view kScheme = "redis://";
  if (!absl::StartsWith(url, kScheme))
    return absl::InvalidArgumentError(absl::StrCat("redis url: \"", url, "\" must start with redis://"));
  absl::string_view rest = url.substr(kScheme.size());
  if (size_t at = rest.rfind('@'); at != absl::string_view::npos) {
    absl::string_view userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    size_t colon = userinfo.find(':');
    if (colon == absl::string_view::npos)
      return absl::InvalidArgumentError("redis url: credentials must be written [user]:password@");
    o.user = std::string(userinfo.substr(0, colon));
    o.password = std::string(userinfo.substr(colon + 1));
    if (o.password.empty()) return absl::InvalidArgumentError("redis url: password after ':' is empty");
  }
  absl::string_view hostport = rest;
  if (size_t slash = rest.find('/'); slash != absl::string_view::npos) {
    hostport = rest.substr(0, slash);
    absl::string_view db = rest.substr(slash + 1);
    if (!db.empty() && (!absl::SimpleAtoi(db, &o.db) || o.db < 0 || o.db > 15))
      return absl::InvalidArgumentError(
          absl::StrCat("redis url: database \"", db, "\" is not a number in 0-15"));
  }
  absl::string_view host = hostport;
  if (size_t colon = hostport.rfind(':'); colon != absl::string_view::npos) {
    host = hostport.substr(0, colon);
    absl::string_view port = hostport.substr(colon + 1);
    if (!absl::SimpleAtoi(port, &o.port) || o.port < 1 || o.port > 65535)
      return absl::InvalidArgumentError(
          absl::StrCat("redis url: port \"", port, "\" is not a number in 1-65535"));
  }
  if (host.empty()) return absl::InvalidArgumentError("redis url: host is empty");
  o.host = std::string(host);
  return o;
}

void RedisStore::ReplyDeleter::operator()(redisReply* r) const { freeReplyObject(r); }

absl::StatusOr<std::unique_ptr<RedisStore>> RedisStore::Connect(const RedisOptions& options) {
  if (absl::Status s = ValidateTable("redis namespace", options.ns); !s.ok()) return s;
  std::unique_ptr<RedisStore> store(new RedisStore(options));
  absl::StatusOr<std::vector<Reply>> ping = store->Exec("connect", {{"PING"}}, Retry::kAlways);
  if (!ping.ok()) return ping.status();
  spdlog::info("metadata store: {} (namespace {})", store->Describe(), options.ns);
  return store;
}

RedisStore::~RedisStore() {
  absl::MutexLock lock(&mu_);
  Disconnect();
}

std::string RedisStore::Describe() const {
  return absl::StrCat("redis://", options_.host, ":", options_.port, "/", options_.db);
}

int RedisStore::reconnects() const {
  absl::MutexLock lock(&mu_);
  return reconnects_;
}

std::string RedisStore::HashKey(absl::string_view table) const {
  return absl::StrCat("skyrl:", options_.ns, ":", table);
}

void RedisStore::Disconnect() {
  if (ctx_) redisFree(ctx_);
  ctx_ = nullptr;
}

absl::Status RedisStore::EnsureConnected() {
  if (ctx_) {
    // A server that went away has closed its end: notice before sending, so a request is not
    // written into a dead socket (which would make its outcome unknowable).
    char probe;
    ssize_t n = ::recv(ctx_->fd, &probe, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) Disconnect();
  }
  if (ctx_) return absl::OkStatus();
  redisContext* c =
      redisConnectWithTimeout(options_.host.c_str(), options_.port, AsTimeval(options_.connect_timeout));
  if (c == nullptr) return absl::UnavailableError("cannot allocate a redis context");
  if (c->err) {
    std::string err = c->errstr;
    redisFree(c);
    return absl::UnavailableError(absl::StrCat("connect to ", options_.host, ":", options_.port, ": ", err));
  }
  redisSetTimeout(c, AsTimeval(options_.command_timeout));
  redisEnableKeepAlive(c);
  auto command = [&](std::vector<std::string> args) -> absl::StatusOr<Reply> {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    Reply r(static_cast<redisReply*>(redisCommandArgv(c, int(argv.size()), argv.data(), lens.data())));
    if (!r) return absl::UnavailableError(absl::StrCat(args[0], ": ", c->errstr));
    return r;
  };
  if (!options_.password.empty()) {
    absl::StatusOr<Reply> r = options_.user.empty() ? command({"AUTH", options_.password})
                                                    : command({"AUTH", options_.user, options_.password});
    absl::Status s = r.ok() ? absl::OkStatus() : r.status();
    if (r.ok() && (*r)->type == REDIS_REPLY_ERROR)
      s = absl::PermissionDeniedError(absl::StrCat("redis AUTH failed: ", ReplyError(r->get())));
    if (!s.ok()) {
      redisFree(c);
      return s;
    }
  }
  if (options_.db != 0) {
    absl::StatusOr<Reply> r = command({"SELECT", absl::StrCat(options_.db)});
    absl::Status s = r.ok() ? absl::OkStatus() : r.status();
    if (r.ok() && (*r)->type == REDIS_REPLY_ERROR)
      s = absl::InvalidArgumentError(absl::StrCat("redis SELECT ", options_.db, ": ", ReplyError(r->get())));
    if (!s.ok()) {
      redisFree(c);
      return s;
    }
  }
  ctx_ = c;
  if (ever_connected_) {
    ++reconnects_;
    spdlog::info("metadata store: reconnected to {}", Describe());
  }
  ever_connected_ = true;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<RedisStore::Reply>> RedisStore::Exec(const std::string& what,
                                                                const std::vector<Command>& commands,
                                                                Retry retry) {
  absl::MutexLock lock(&mu_);
  const absl::Time deadline = absl::Now() + options_.reconnect_window;
  absl::Duration backoff = options_.backoff_initial;
  absl::Status last;
  auto wait_or_give_up = [&]() -> bool {
    if (absl::Now() + backoff > deadline) return false;
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, options_.backoff_max);
    return true;
  };
  while (true) {
    last = EnsureConnected();
    if (!last.ok()) {
      if (absl::IsUnavailable(last) && wait_or_give_up()) continue;
      break;
    }
    for (const Command& cmd : commands) {
      std::vector<const char*> argv;
      std::vector<size_t> lens;
      for (const auto& a : cmd) {
        argv.push_back(a.data());
        lens.push_back(a.size());
      }
      redisAppendCommandArgv(ctx_, int(argv.size()), argv.data(), lens.data());
    }
    std::vector<Reply> replies;
    bool io_error = false;
    for (size_t i = 0; i < commands.size(); ++i) {
      void* raw = nullptr;
      if (redisGetReply(ctx_, &raw) != REDIS_OK || raw == nullptr) {
        last = absl::UnavailableError(ctx_->errstr[0] ? ctx_->errstr : "connection lost");
        io_error = true;
        break;
      }
      replies.emplace_back(static_cast<redisReply*>(raw));
    }
    if (io_error) {
      Disconnect();
      if (retry == Retry::kOnlyIfUnsent)
        return absl::UnavailableError(
            absl::StrCat("redis ", what, ": connection lost after the request was sent (", last.message(),
                         "); its outcome is unknown, re-read before retrying"));
      if (wait_or_give_up()) continue;
      break;
    }
    bool loading = false;
    for (const Reply& r : replies) loading |= IsLoading(r.get());
    if (loading) {
      last = absl::UnavailableError("server is loading its data set");
      if (wait_or_give_up()) continue;
      break;
    }
    return replies;
  }
  if (absl::IsUnavailable(last))
    return absl::UnavailableError(absl::StrCat("redis ", what, ": ", last.message(), " (gave up after ",
                                               absl::FormatDuration(options_.reconnect_window), ")"));
  return absl::Status(last.code(), absl::StrCat("redis ", what, ": ", last.message()));
}

absl::Status RedisStore::Put(absl::string_view table, absl::string_view key, absl::string_view value) {
  if (absl::Status s = ValidateValue("put", table, key, value); !s.ok()) return s;
  std::string what = absl::StrCat("put ", Where(table, key));
  auto replies = Exec(what, {{"HSET", HashKey(table), std::string(key), std::string(value)}}, Retry::kAlways);
  if (!replies.ok()) return replies.status();
  const redisReply* r = (*replies)[0].get();
  if (r->type == REDIS_REPLY_ERROR)
    return absl::InternalError(absl::StrCat("redis ", what, ": ", ReplyError(r)));
  return absl::OkStatus();
}

absl::StatusOr<std::string> RedisStore::Get(absl::string_view table, absl::string_view key) {
  if (absl::Status s = ValidateKey("get", table, key); !s.ok()) return s;
  std::string what = absl::StrCat("get ", Where(table, key));
  auto replies = Exec(what, {{"HGET", HashKey(table), std::string(key)}}, Retry::kAlways);
  if (!replies.ok()) return replies.status();
  const redisReply* r = (*replies)[0].get();
  if (r->type == REDIS_REPLY_NIL) return absl::NotFoundError(absl::StrCat(what, ": not found"));
  if (r->type != REDIS_REPLY_STRING)
    return absl::InternalError(absl::StrCat("redis ", what, ": unexpected reply ",
                                            r->type == REDIS_REPLY_ERROR ? ReplyError(r) : ""));
  return std::string(r->str, r->len);
}

absl::StatusOr<bool> RedisStore::Delete(absl::string_view table, absl::string_view key) {
  if (absl::Status s = ValidateKey("delete", table, key); !s.ok()) return s;
  std::string what = absl::StrCat("delete ", Where(table, key));
  auto replies = Exec(what, {{"HDEL", HashKey(table), std::string(key)}}, Retry::kAlways);
  if (!replies.ok()) return replies.status();
  const redisReply* r = (*replies)[0].get();
  if (r->type != REDIS_REPLY_INTEGER)
    return absl::InternalError(absl::StrCat("redis ", what, ": unexpected reply ",
                                            r->type == REDIS_REPLY_ERROR ? ReplyError(r) : ""));
  return r->integer > 0;
}

absl::StatusOr<std::vector<Entry>> RedisStore::Scan(absl::string_view table, absl::string_view prefix) {
  if (absl::Status s = ValidateTable("scan", table); !s.ok()) return s;
  std::string what = absl::StrCat("scan ", Where(table, prefix), "*");
  std::map<std::string, std::string> found;  // HSCAN may repeat an entry; the map dedupes
  std::string cursor = "0", pattern = GlobPrefix(prefix);
  do {
    auto replies =
        Exec(what, {{"HSCAN", HashKey(table), cursor, "MATCH", pattern, "COUNT", "1000"}}, Retry::kAlways);
    if (!replies.ok()) return replies.status();
    const redisReply* r = (*replies)[0].get();
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_ARRAY)
      return absl::InternalError(absl::StrCat("redis ", what, ": unexpected reply ",
                                              r->type == REDIS_REPLY_ERROR ? ReplyError(r) : ""));
    cursor.assign(r->element[0]->str, r->element[0]->len);
    const redisReply* items = r->element[1];
    for (size_t i = 0; i + 1 < items->elements; i += 2)
      found.insert_or_assign(std::string(items->element[i]->str, items->element[i]->len),
                             std::string(items->element[i + 1]->str, items->element[i + 1]->len));
  } while (cursor != "0");
  std::vector<Entry> out;
  out.reserve(found.size());
  for (auto& [k, v] : found) out.push_back({k, std::move(v)});
  return out;
}

absl::StatusOr<bool> RedisStore::CompareAndSet(absl::string_view table, absl::string_view key,
                                               std::optional<absl::string_view> expected,
                                               std::optional<absl::string_view> desired) {
  if (absl::Status s = ValidateCompareAndSet(table, key, desired); !s.ok()) return s;
  std::string what = absl::StrCat("compare-and-set ", Where(table, key));
  auto replies =
      Exec(what,
           {{"EVAL", kCasScript, "1", HashKey(table), std::string(key), expected ? "1" : "0",
             std::string(expected.value_or("")), desired ? "1" : "0", std::string(desired.value_or(""))}},
           Retry::kOnlyIfUnsent);
  if (!replies.ok()) return replies.status();
  const redisReply* r = (*replies)[0].get();
  if (r->type != REDIS_REPLY_INTEGER)
    return absl::InternalError(absl::StrCat("redis ", what, ": unexpected reply ",
                                            r->type == REDIS_REPLY_ERROR ? ReplyError(r) : ""));
  return r->integer == 1;
}

absl::Status RedisStore::Apply(const std::vector<Write>& batch) {
  if (absl::Status s = ValidateBatch(batch); !s.ok()) return s;
  if (batch.empty()) return absl::OkStatus();
  std::vector<Command> commands;
  commands.reserve(batch.size() + 2);
  commands.push_back({"MULTI"});
  for (const Write& w : batch) {
    if (w.op == Write::Op::kPut)
      commands.push_back({"HSET", HashKey(w.table), w.key, w.value});
    else
      commands.push_back({"HDEL", HashKey(w.table), w.key});
  }
  commands.push_back({"EXEC"});
  std::string what =
      absl::StrCat("apply batch of ", batch.size(), " starting at ", Where(batch[0].table, batch[0].key));
  // A batch of puts and deletes leaves the same state when run twice: safe to retry.
  auto replies = Exec(what, commands, Retry::kAlways);
  if (!replies.ok()) return replies.status();
  for (const Reply& r : *replies)
    if (r->type == REDIS_REPLY_ERROR)
      return absl::InternalError(absl::StrCat("redis ", what, ": ", ReplyError(r.get())));
  const redisReply* exec = replies->back().get();
  if (exec->type != REDIS_REPLY_ARRAY)
    return absl::InternalError(absl::StrCat("redis ", what, ": transaction was aborted"));
  return absl::OkStatus();
}

}  // namespace skyrl::store
