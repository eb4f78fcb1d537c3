// A store that keeps serving when its backend (Redis) is down, and catches up when it is
// back: the head wraps its Redis store in one.
//
// The head is the only writer of its namespace, so an in-memory copy of the tables it uses
// is authoritative: reads are served from memory, and every write is applied to memory and
// then replicated to the backend in order.
// - Backend up: a write returns once the backend has it (as without the wrapper).
// - Backend down: the write that finds it down waits for the backend's own retry window,
//   then is queued; every later write is queued at once, in order, and returns OK. A
//   background thread replays the queue, oldest first, until it is empty ("caught up").
// - The price: writes acknowledged during an outage live only in this process until the
//   backend is back. If the head dies before then, they are lost (docs/operations.md).
// - The queue is bounded (max_pending_bytes): past it, writes fail with Unavailable rather
//   than grow without end.
// Safe for concurrent use.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/store/memory/memory_store.h"
#include "runtime/store/store.h"

namespace skyrl::store {

struct WriteBehindOptions {
  std::vector<std::string> tables;  // loaded from the backend when opened
  absl::Duration retry_every = absl::Seconds(1);
  size_t max_pending_bytes = size_t(1) << 30;  // keys and values of queued writes
};

class WriteBehindStore final : public Store {
 public:
  // Loads `options.tables` from `backend` into memory; fails with the backend's error.
  static absl::StatusOr<std::unique_ptr<WriteBehindStore>> Open(std::unique_ptr<Store> backend,
                                                                WriteBehindOptions options);
  // Stops replaying; one last attempt is made to flush what is queued.
  ~WriteBehindStore() override;

  absl::Status Put(absl::string_view table, absl::string_view key, absl::string_view value) override;
  absl::StatusOr<std::string> Get(absl::string_view table, absl::string_view key) override;
  absl::StatusOr<bool> Delete(absl::string_view table, absl::string_view key) override;
  absl::StatusOr<std::vector<Entry>> Scan(absl::string_view table, absl::string_view prefix) override;
  absl::StatusOr<bool> CompareAndSet(absl::string_view table, absl::string_view key,
                                     std::optional<absl::string_view> expected,
                                     std::optional<absl::string_view> desired) override;
  absl::Status Apply(const std::vector<Write>& batch) override;
  std::string Describe() const override;

  // Writes waiting for the backend.
  size_t pending() const;

 private:
  WriteBehindStore(std::unique_ptr<Store> backend, WriteBehindOptions options);
  // Sends `writes` (already in memory) to the backend, or queues them behind earlier ones.
  absl::Status Replicate(std::vector<Write> writes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Unavailable when writes are queued and `bytes` more would pass max_pending_bytes:
  // checked before memory changes, so a refused write changes nothing.
  absl::Status CheckRoom(size_t bytes) const;
  void ReplayLoop();
  // One attempt to send the oldest queued writes; true when the queue is empty afterwards.
  bool ReplayOnce();

  std::unique_ptr<Store> backend_;
  const WriteBehindOptions options_;
  MemoryStore memory_;
  // Serializes writes, so memory and the backend see them in the same order.
  absl::Mutex write_mu_;
  mutable absl::Mutex queue_mu_;
  std::deque<Write> queue_ ABSL_GUARDED_BY(queue_mu_);
  size_t queued_bytes_ ABSL_GUARDED_BY(queue_mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(queue_mu_) = false;
  std::thread replayer_;
};

}  // namespace skyrl::store
