#include "runtime/head/event_loop.h"

#include <cstdio>
#include <cstdlib>

namespace skyrl::head {

EventLoop::EventLoop() : thread_([this] { Loop(); }) {}

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

void EventLoop::Dispatch(Task task) {
  if (!OnLoop() && TryEnter()) {
    Entered entered(this);
    task();
    return;
  }
  Post(std::move(task));
}

bool EventLoop::TryEnter() {
  absl::MutexLock lock(&mu_);
  if (stopped_ || running_ || !queue_.empty()) return false;
  running_ = true;
  return true;
}

void EventLoop::Leave() {
  std::deque<Task> batch;
  absl::MutexLock lock(&mu_);
  ++tasks_;
  ++inline_runs_;
  for (int round = 0; round < kCombine && !queue_.empty(); ++round) RunBatch(batch);
  running_ = false;  // what is still queued wakes the loop thread
}

void EventLoop::AssertOnLoop() const {
  if (!OnLoop()) {
    std::fprintf(stderr, "EventLoop: state of the loop touched off the loop\n");
    std::abort();
  }
}

void EventLoop::AssertOffLoop(const char* what) const {
  if (OnLoop()) {
    std::fprintf(stderr, "EventLoop: %s waits for later tasks and cannot run on the loop\n", what);
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
  return Stats{tasks_, inline_runs_, queue_.size(), holds_};
}

void EventLoop::RunBatch(std::deque<Task>& batch) {
  batch.swap(queue_);
  mu_.Unlock();
  uint64_t ran = 0;
  for (; !batch.empty(); batch.pop_front(), ++ran) batch.front()();
  mu_.Lock();
  tasks_ += ran;
}

void EventLoop::Loop() {
  holder_ = this;
  std::deque<Task> batch;
  absl::MutexLock lock(&mu_);
  while (true) {
    mu_.Await(absl::Condition(this, &EventLoop::HasWork));
    if (queue_.empty()) break;  // stopping, drained, and no hold out
    running_ = true;
    RunBatch(batch);
    running_ = false;
  }
  stopped_ = true;
}

}  // namespace skyrl::head
