#include "runtime/head/event_loop.h"

#include <cstdio>
#include <cstdlib>

namespace skyrl::head {

EventLoop::EventLoop() {
  // Set before any task can be posted (the caller gets the loop once this returns).
  thread_ = std::thread([this] { Loop(); });
  loop_id_ = thread_.get_id();
}

EventLoop::~EventLoop() { Shutdown(); }

void EventLoop::Post(Task task) {
  absl::MutexLock lock(&mu_);
  if (stopped_) return;
  queue_.push_back(std::move(task));
}

void EventLoop::PostOrDie(Task task) {
  absl::MutexLock lock(&mu_);
  if (stopped_) {
    std::fprintf(stderr, "EventLoop: Run after Shutdown\n");
    std::abort();
  }
  queue_.push_back(std::move(task));
}

void EventLoop::AssertOnLoop() const {
  if (!OnLoop()) {
    std::fprintf(stderr, "EventLoop: state of the loop touched off the loop thread\n");
    std::abort();
  }
}

void EventLoop::AssertOffLoop(const char* what) const {
  if (OnLoop()) {
    std::fprintf(stderr, "EventLoop: %s waits for later tasks and cannot run on the loop thread\n", what);
    std::abort();
  }
}

void EventLoop::Hold::Release() {
  if (loop_ == nullptr) return;
  absl::MutexLock lock(&loop_->mu_);
  --loop_->holds_;
  loop_ = nullptr;
}

EventLoop::Hold EventLoop::Acquire() {
  absl::MutexLock lock(&mu_);
  ++holds_;
  return Hold(this);
}

void EventLoop::Drain() {
  AssertOffLoop("EventLoop::Drain");
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(this, &EventLoop::Idle));
}

void EventLoop::Shutdown() {
  AssertOffLoop("EventLoop::Shutdown");
  absl::MutexLock once(&shutdown_mu_);
  if (!thread_.joinable()) return;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;  // the thread ends once the queue is empty and no hold is out
  }
  thread_.join();
}

EventLoop::Stats EventLoop::stats() const {
  absl::MutexLock lock(&mu_);
  return Stats{tasks_, queue_.size(), holds_};
}

void EventLoop::Loop() {
  std::deque<Task> batch;
  absl::MutexLock lock(&mu_);
  while (true) {
    mu_.Await(absl::Condition(this, &EventLoop::HasWork));
    if (queue_.empty()) break;  // stopping, drained, and no hold out
    // Everything queued at once, for one lock round trip however many tasks there are.
    batch.swap(queue_);
    running_ = true;
    mu_.Unlock();
    uint64_t ran = 0;
    for (; !batch.empty(); batch.pop_front(), ++ran) batch.front()();  // what it captured goes too
    mu_.Lock();
    running_ = false;
    tasks_ += ran;
  }
  stopped_ = true;
}

}  // namespace skyrl::head
