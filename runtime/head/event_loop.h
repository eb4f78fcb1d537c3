// The head's event loop: one thread that runs state changes one at a time, in the order they
// were posted (as Ray's GCS runs its managers on one io_context). A manager whose state lives
// on the loop takes no lock of its own: RPC handlers and callbacks post to it (Post) or run on
// it and wait for the answer (Run); code on the loop runs to completion before the next task
// starts, so nothing changes under it.
//
//   Post(task) ----> [queue] ----> loop thread: task()
//   Run(fn)    --/                    (fn's result handed back to the waiting caller)
//   Run(fn), loop idle: fn() on the caller's thread, which holds the loop meanwhile
//
// "On the loop" means holding it, not being its thread: as an Asio strand dispatches, Run
// with nothing queued and no task running runs `fn` at once on the calling thread, which
// holds the loop until `fn` returns (the loop thread starts nothing meanwhile), then runs
// what was posted meanwhile before it lets go (a bounded number of batches). That saves the
// thread hand-offs when the loop is idle, the common case, and keeps the order: anything
// posted earlier is queued, and then Run queues behind it.
//
// Work outside the loop whose completion posts back (an RPC in flight) holds the loop
// (Hold), so Drain can wait for it: a manager's destructor drains before it goes, and no
// completion runs on a manager that is gone.
//
// Static analysis: the loop is a capability. State that lives on it is ABSL_GUARDED_BY the
// loop; a task proves it runs there with AssertOnLoop() (checked at run time too).
// Safe for concurrent use; its mutex is a leaf (tasks run without it).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace skyrl::head {

class ABSL_LOCKABLE EventLoop {
 public:
  using Task = std::function<void()>;

  EventLoop();
  ~EventLoop();  // Shutdown()
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Runs `task` on the loop thread after every task posted before it. Never blocks; after
  // Shutdown the task is dropped (destroyed without running).
  void Post(Task task);

  // Runs `task` at once on this thread when the loop is idle and this thread does not hold
  // it (Run's inline path), else posts it: on the loop itself, the task runs after the one
  // running, as with Post. Must not be called with a lock held that a task takes.
  void Dispatch(Task task);

  // Runs `fn` on the loop and returns what it returns, waiting for it; on the loop itself,
  // runs it inline (a task may call a manager's blocking method); with the loop idle, runs it
  // at once on this thread (above). Must not be called with a lock held that a task takes.
  // REQUIRES: the loop is not shut down.
  template <typename F>
  std::invoke_result_t<F> Run(F&& fn) {
    if (!OnLoop() && TryEnter()) {
      Entered entered(this);
      return fn();
    }
    return RunOnLoopThread(std::forward<F>(fn));  // inline there when on the loop
  }

  // Run, but always on the loop thread, never this one (inline only when called on the
  // loop): for long work made of slices (the demand queue's passes), which the loop thread
  // then interleaves with what posts to it (the answers a slice's starts bring).
  // REQUIRES: the loop is not shut down.
  template <typename F>
  std::invoke_result_t<F> RunOnLoopThread(F&& fn) {
    using R = std::invoke_result_t<F>;
    if (OnLoop()) return fn();
    absl::Notification done;
    if constexpr (std::is_void_v<R>) {
      PostOrDie([&] {
        fn();
        done.Notify();
      });
      done.WaitForNotification();
    } else {
      std::optional<R> result;
      PostOrDie([&] {
        result.emplace(fn());
        done.Notify();
      });
      done.WaitForNotification();
      return *std::move(result);
    }
  }

  // Whether this thread holds the loop: the loop thread running a task, or a thread in Run's
  // inline path.
  bool OnLoop() const { return holder_ == this; }
  // Aborts off the loop; for the static analysis, holds the loop from here on.
  void AssertOnLoop() const ABSL_ASSERT_EXCLUSIVE_LOCK();
  // Aborts on the loop, naming `what`: for methods that wait for something only a later
  // task can bring (a worker's answer), which would wait forever there.
  void AssertOffLoop(const char* what) const;

  // Work outside the loop that will post back when it completes. Movable; releasing it
  // (destruction) tells Drain the work is done. Take it before starting the work and release
  // it after the completion has posted.
  class Hold {
   public:
    Hold() = default;
    explicit Hold(EventLoop* loop) : loop_(loop) {}
    Hold(Hold&& o) noexcept : loop_(std::exchange(o.loop_, nullptr)) {}
    Hold& operator=(Hold&& o) noexcept {
      Release();
      loop_ = std::exchange(o.loop_, nullptr);
      return *this;
    }
    ~Hold() { Release(); }
    void Release();

   private:
    EventLoop* loop_ = nullptr;
  };
  Hold Acquire();

  // Waits until no hold is left and every task posted has run (tasks those post run too).
  // REQUIRES: not on the loop.
  void Drain();
  // Ends the thread once no hold is left and every task posted has run; tasks posted after
  // that are dropped. Idempotent; concurrent calls all return once the thread has ended.
  void Shutdown();

  struct Stats {
    uint64_t tasks = 0;        // run so far, on the loop thread or inline
    uint64_t inline_runs = 0;  // of those, Runs that ran on their caller's thread
    size_t queued = 0;
    int holds = 0;
  };
  Stats stats() const;

 private:
  void PostOrDie(Task task);  // Run's: a shut-down loop would never answer
  // Run's inline path: takes the loop when nothing is queued or running, and gives it back,
  // first running (up to kCombine batches of) what was posted meanwhile: the loop thread is
  // not woken for tasks that arrived while this thread held the loop.
  bool TryEnter();
  void Leave();
  static constexpr int kCombine = 4;
  class Entered {
   public:
    explicit Entered(EventLoop* loop) : loop_(loop), outer_(std::exchange(holder_, loop)) {}
    ~Entered() {
      loop_->Leave();  // still the holder while it runs what was posted meanwhile
      holder_ = outer_;
    }
    Entered(const Entered&) = delete;
    Entered& operator=(const Entered&) = delete;

   private:
    EventLoop* loop_;
    const EventLoop* outer_;
  };
  void Loop();
  // Takes everything queued into `batch` and runs it with mu_ released (what each task
  // captured goes with it), then counts it: one lock round trip however many tasks.
  void RunBatch(std::deque<Task>& batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Idle() const ABSL_SHARED_LOCKS_REQUIRED(mu_) { return queue_.empty() && !running_ && holds_ == 0; }
  // Something to run while nothing runs, or nothing left to wait for once stopping (a hold
  // still out will post).
  bool HasWork() const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return !running_ && (!queue_.empty() || (stopping_ && holds_ == 0));
  }

  // The loop this thread holds (at most one at a time per thread; nested Runs of another loop
  // hand it back on return).
  static inline thread_local const EventLoop* holder_ = nullptr;

  mutable absl::Mutex mu_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  int holds_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t tasks_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t inline_runs_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Mutex shutdown_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // one Shutdown joins; the others wait for it
  std::thread thread_ ABSL_GUARDED_BY(shutdown_mu_);
};

}  // namespace skyrl::head
