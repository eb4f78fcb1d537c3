// The head's one queue of work waiting for room: actors to place (creations that wait, and
// restarts) and placement groups to place. Entries are tried again, oldest first, when
// something may have made room (Kick: a node joined, resources were released, a group was
// placed), never by polling; one thread for every entry, however many wait.
//
// Each entry has a shape: entries of one shape ask for the same thing, so when the oldest
// of a shape finds no room, the others of that shape are not tried in that pass. A pass is
//
//   repeat: the oldest entry whose shape has not failed in this pass
//             -> kPlaced or kGone: dropped       -> kWaiting: stays first of its shape,
//                                                   and its shape is done for this pass
//   until every shape has failed or the queue is empty
//
// so a pass costs one attempt per shape plus one per entry placed, and within a shape,
// entries are placed in the order they were pushed. A shape that finds no room does not hold
// up another that does (no head-of-line blocking across shapes).
//
// Entries pushed with a `delay` join the queue once it has passed (behind entries pushed
// earlier that are already due), measured by the injected clock: a restart's back-off. With a FakeClock, the
// test advances it and Kicks.
//
// Attempts run with no lock of the queue held: they may Push and Kick. They run on the queue's
// thread, or, given the head's event loop, on the loop thread (EventLoop::RunOnLoopThread),
// in slices of at most kSlice attempts per task: an attempt that changes state on the loop
// (the actor table's) is a plain call, not a hop, a long pass does not hold the loop from the
// RPCs waiting for it, and the answers its starts bring run between slices. (Slices run on
// the queue's own thread while the loop was idle placed waiting actors about 10 % slower.)
// Safe for concurrent use; its mutex is a leaf (callers may hold their own locks).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/common/clock.h"
#include "runtime/head/event_loop.h"

namespace skyrl::head {

class DemandQueue {
 public:
  enum class Outcome {
    kPlaced,   // done: placed (its start may still fail; that pushes it again)
    kWaiting,  // no room yet: try again after a Kick
    kGone,     // nothing to place any more (killed, removed): dropped
  };
  using Attempt = std::function<Outcome()>;

  // A `paused` queue keeps what is pushed and tries nothing until Resume(): the head pauses
  // it while it recovers its tables, so nothing is placed on resources not yet taken back.
  // With a `loop` (which must outlive the queue), passes run on it.
  explicit DemandQueue(const Clock& clock, bool paused = false, EventLoop* loop = nullptr);
  ~DemandQueue();  // Stop()
  DemandQueue(const DemandQueue&) = delete;
  DemandQueue& operator=(const DemandQueue&) = delete;

  // Adds an entry and tries it in the next pass (at once when the queue thread is idle).
  // `owner` names who pushed it (for Detach); `shape` as above.
  void Push(const void* owner, std::string shape, Attempt attempt,
            absl::Duration delay = absl::ZeroDuration());
  // Something may have made room: run another pass. Cheap; passes coalesce.
  void Kick();
  void Resume();
  // Drops `owner`'s entries and waits until none of its attempts is running; later pushes of
  // that owner are ignored. For an owner's destructor.
  void Detach(const void* owner);
  // Ends the thread (an attempt in progress finishes first); entries left are dropped.
  void Stop();

  static constexpr size_t kSlice = 256;

  struct Stats {
    bool busy = false;                             // a pass is under way or about to start
    size_t waiting = 0;                            // entries in the queue, delayed ones included
    size_t delayed = 0;                            // of those, entries whose delay has not passed
    absl::Time next_due = absl::InfiniteFuture();  // when the first delayed one is due
    uint64_t passes = 0;                           // passes run
    uint64_t attempts = 0;
    uint64_t placed = 0;
  };
  Stats stats() const;

 private:
  struct Entry {
    uint64_t seq = 0;
    const void* owner = nullptr;
    std::string shape;
    Attempt attempt;
  };
  void Run();
  // Appends `e` behind everything queued (REQUIRES mu_).
  void Enqueue(Entry e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves delayed entries that are due into the queue; returns when the next one is due.
  absl::Time ReleaseDue() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One pass, as above, or its next `budget` attempts (`failed`: the shapes that found no
  // room in it so far). Returns with mu_ held: whether the pass is over.
  bool Pass(absl::flat_hash_set<std::string>& failed, size_t budget) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Woken() const ABSL_SHARED_LOCKS_REQUIRED(mu_) { return (dirty_ && !paused_) || stopping_; }
  struct Detaching {
    const DemandQueue* queue;
    const void* owner;
  };
  // (Await's condition; it runs with mu_ held.)
  static bool NotRunning(const Detaching* d) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return d->queue->running_owner_ != d->owner;
  }

  const Clock& clock_;
  EventLoop* const loop_;
  mutable absl::Mutex mu_;
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  // Entries by shape, each deque oldest first; `heads_` orders the shapes by their oldest.
  absl::flat_hash_map<std::string, std::deque<Entry>> by_shape_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, std::string> heads_ ABSL_GUARDED_BY(mu_);
  std::multimap<absl::Time, Entry> delayed_ ABSL_GUARDED_BY(mu_);
  size_t queued_ ABSL_GUARDED_BY(mu_) = 0;
  bool dirty_ ABSL_GUARDED_BY(mu_) = false;
  bool paused_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool passing_ ABSL_GUARDED_BY(mu_) = false;
  const void* running_owner_ ABSL_GUARDED_BY(mu_) = nullptr;
  absl::flat_hash_set<const void*> detached_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace skyrl::head
