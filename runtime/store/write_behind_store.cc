#include "runtime/store/write_behind_store.h"

#include "absl/strings/str_cat.h"
#include "runtime/common/logging.h"

namespace skyrl::store {
namespace {

constexpr size_t kReplayChunk = 256;

size_t Bytes(const Write& w) { return w.table.size() + w.key.size() + w.value.size() + 32; }

}  // namespace

absl::StatusOr<std::unique_ptr<WriteBehindStore>> WriteBehindStore::Open(std::unique_ptr<Store> backend,
                                                                         WriteBehindOptions options) {
  std::unique_ptr<WriteBehindStore> s(new WriteBehindStore(std::move(backend), std::move(options)));
  for (const std::string& table : s->options_.tables) {
    absl::StatusOr<std::vector<Entry>> entries = s->backend_->Scan(table, "");
    if (!entries.ok()) return entries.status();
    for (const Entry& e : *entries)
      if (absl::Status put = s->memory_.Put(table, e.key, e.value); !put.ok()) return put;
  }
  s->replayer_ = std::thread([p = s.get()] { p->ReplayLoop(); });
  return s;
}

WriteBehindStore::WriteBehindStore(std::unique_ptr<Store> backend, WriteBehindOptions options)
    : backend_(std::move(backend)), options_(std::move(options)) {}

WriteBehindStore::~WriteBehindStore() {
  {
    absl::MutexLock lock(&queue_mu_);
    stopping_ = true;
  }
  if (replayer_.joinable()) replayer_.join();
  // Flush what is queued while each attempt makes progress.
  for (size_t left = pending(); left > 0;) {
    if (ReplayOnce()) break;
    size_t now = pending();
    if (now >= left) {
      spdlog::error("store: stopping with {} writes the backend never received", now);
      break;
    }
    left = now;
  }
}

size_t WriteBehindStore::pending() const {
  absl::MutexLock lock(&queue_mu_);
  return queue_.size();
}

std::string WriteBehindStore::Describe() const {
  size_t n = pending();
  return n == 0 ? backend_->Describe()
                : absl::StrCat(backend_->Describe(), " (unreachable: ", n, " writes kept in memory)");
}

absl::Status WriteBehindStore::Replicate(std::vector<Write> writes) {
  bool queued;
  {
    absl::MutexLock lock(&queue_mu_);
    queued = !queue_.empty();
  }
  absl::Status direct;
  if (!queued) {
    direct = writes.size() == 1 && writes[0].op == Write::Op::kPut
                 ? backend_->Put(writes[0].table, writes[0].key, writes[0].value)
                 : backend_->Apply(writes);
    if (direct.ok()) return absl::OkStatus();
  }
  absl::MutexLock lock(&queue_mu_);
  size_t bytes = 0;
  for (const Write& w : writes) bytes += Bytes(w);
  if (queue_.empty())
    spdlog::warn("store: {} is unreachable ({}); serving from memory and queueing writes until it is back",
                 backend_->Describe(), direct.message());
  for (Write& w : writes) queue_.push_back(std::move(w));
  queued_bytes_ += bytes;
  return absl::OkStatus();
}

bool WriteBehindStore::ReplayOnce() {
  std::vector<Write> chunk;
  {
    absl::MutexLock lock(&queue_mu_);
    if (queue_.empty()) return true;
    for (size_t i = 0; i < queue_.size() && i < kReplayChunk; ++i) chunk.push_back(queue_[i]);
  }
  if (absl::Status s = backend_->Apply(chunk); !s.ok()) return false;
  absl::MutexLock lock(&queue_mu_);
  for (size_t i = 0; i < chunk.size(); ++i) {
    queued_bytes_ -= Bytes(queue_.front());
    queue_.pop_front();
  }
  if (queue_.empty()) spdlog::info("store: {} is back; caught up", backend_->Describe());
  return queue_.empty();
}

void WriteBehindStore::ReplayLoop() {
  while (true) {
    {
      absl::MutexLock lock(&queue_mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_) { return stopping_ || !queue_.empty(); };
      queue_mu_.AwaitWithTimeout(absl::Condition(&ready), options_.retry_every);
      if (stopping_) return;
      if (queue_.empty()) continue;
    }
    // Replay while it works; after a failure, wait a period before the next attempt.
    while (true) {
      size_t before = pending();
      bool empty = ReplayOnce();
      if (empty) break;
      if (pending() == before) {
        absl::SleepFor(options_.retry_every);
        break;
      }
    }
  }
}

absl::Status WriteBehindStore::CheckRoom(size_t bytes) const {
  absl::MutexLock lock(&queue_mu_);
  if (!queue_.empty() && queued_bytes_ + bytes > options_.max_pending_bytes)
    return absl::UnavailableError(absl::StrCat("store: ", backend_->Describe(), " is unreachable and ",
                                               queue_.size(), " writes (", queued_bytes_,
                                               " bytes) already wait for it; refusing more"));
  return absl::OkStatus();
}

absl::Status WriteBehindStore::Put(absl::string_view table, absl::string_view key, absl::string_view value) {
  absl::MutexLock lock(&write_mu_);
  if (absl::Status s = CheckRoom(table.size() + key.size() + value.size() + 32); !s.ok()) return s;
  if (absl::Status s = memory_.Put(table, key, value); !s.ok()) return s;
  return Replicate({Write::Put(std::string(table), std::string(key), std::string(value))});
}

absl::StatusOr<std::string> WriteBehindStore::Get(absl::string_view table, absl::string_view key) {
  return memory_.Get(table, key);
}

absl::StatusOr<bool> WriteBehindStore::Delete(absl::string_view table, absl::string_view key) {
  absl::MutexLock lock(&write_mu_);
  if (absl::Status s = CheckRoom(table.size() + key.size() + 32); !s.ok()) return s;
  absl::StatusOr<bool> existed = memory_.Delete(table, key);
  if (!existed.ok()) return existed;
  if (absl::Status s = Replicate({Write::Delete(std::string(table), std::string(key))}); !s.ok()) return s;
  return existed;
}

absl::StatusOr<std::vector<Entry>> WriteBehindStore::Scan(absl::string_view table, absl::string_view prefix) {
  return memory_.Scan(table, prefix);
}

absl::StatusOr<bool> WriteBehindStore::CompareAndSet(absl::string_view table, absl::string_view key,
                                                     std::optional<absl::string_view> expected,
                                                     std::optional<absl::string_view> desired) {
  absl::MutexLock lock(&write_mu_);
  if (absl::Status s = CheckRoom(table.size() + key.size() + (desired ? desired->size() : 0) + 32); !s.ok())
    return s;
  absl::StatusOr<bool> swapped = memory_.CompareAndSet(table, key, expected, desired);
  if (!swapped.ok() || !*swapped) return swapped;
  Write w = desired ? Write::Put(std::string(table), std::string(key), std::string(*desired))
                    : Write::Delete(std::string(table), std::string(key));
  if (absl::Status s = Replicate({std::move(w)}); !s.ok()) return s;
  return true;
}

absl::Status WriteBehindStore::Apply(const std::vector<Write>& batch) {
  absl::MutexLock lock(&write_mu_);
  size_t bytes = 0;
  for (const Write& w : batch) bytes += Bytes(w);
  if (absl::Status s = CheckRoom(bytes); !s.ok()) return s;
  if (absl::Status s = memory_.Apply(batch); !s.ok()) return s;
  return Replicate(batch);
}

}  // namespace skyrl::store
