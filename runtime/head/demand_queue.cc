#include "runtime/head/demand_queue.h"

#include <cstdint>
#include <utility>

namespace skyrl::head {

DemandQueue::DemandQueue(const Clock& clock, bool paused, EventLoop* loop)
    : clock_(clock), loop_(loop), paused_(paused), thread_([this] { Run(); }) {}

DemandQueue::~DemandQueue() { Stop(); }

void DemandQueue::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
  absl::MutexLock lock(&mu_);
  by_shape_.clear();
  heads_.clear();
  delayed_.clear();
  queued_ = 0;
}

void DemandQueue::Enqueue(Entry e) {
  e.seq = next_seq_++;
  std::deque<Entry>& q = by_shape_[e.shape];
  if (q.empty()) heads_.emplace(e.seq, e.shape);
  q.push_back(std::move(e));
  ++queued_;
  dirty_ = true;
}

void DemandQueue::Push(const void* owner, std::string shape, Attempt attempt, absl::Duration delay) {
  absl::MutexLock lock(&mu_);
  if (stopping_ || detached_.contains(owner)) return;
  Entry e{.owner = owner, .shape = std::move(shape), .attempt = std::move(attempt)};
  if (delay > absl::ZeroDuration()) {
    delayed_.emplace(clock_.Now() + delay, std::move(e));
    dirty_ = true;  // the thread's wait is cut to the new deadline
    return;
  }
  Enqueue(std::move(e));
}

void DemandQueue::Kick() {
  absl::MutexLock lock(&mu_);
  // Nothing queued: nothing to wake for (a push wakes the thread itself). Delayed entries
  // are looked at again: the clock may have moved (a test's FakeClock).
  if (queued_ > 0 || !delayed_.empty()) dirty_ = true;
}

void DemandQueue::Resume() {
  absl::MutexLock lock(&mu_);
  paused_ = false;
  dirty_ = true;
}

void DemandQueue::Detach(const void* owner) {
  absl::MutexLock lock(&mu_);
  detached_.insert(owner);
  heads_.clear();
  for (auto it = by_shape_.begin(); it != by_shape_.end();) {
    std::deque<Entry>& q = it->second;
    size_t before = q.size();
    std::erase_if(q, [owner](const Entry& e) { return e.owner == owner; });
    queued_ -= before - q.size();
    if (q.empty()) {
      by_shape_.erase(it++);
    } else {
      heads_.emplace(q.front().seq, it->first);
      ++it;
    }
  }
  std::erase_if(delayed_, [owner](const auto& d) { return d.second.owner == owner; });
  const Detaching detaching{this, owner};
  mu_.Await(absl::Condition(&DemandQueue::NotRunning, &detaching));
}

DemandQueue::Stats DemandQueue::stats() const {
  absl::MutexLock lock(&mu_);
  Stats s = stats_;
  s.busy = passing_ || (dirty_ && !paused_ && queued_ > 0);
  s.waiting = queued_ + delayed_.size();
  s.delayed = delayed_.size();
  if (!delayed_.empty()) s.next_due = delayed_.begin()->first;
  return s;
}

absl::Time DemandQueue::ReleaseDue() {
  const absl::Time now = clock_.Now();
  while (!delayed_.empty() && delayed_.begin()->first <= now) {
    Enqueue(std::move(delayed_.begin()->second));
    delayed_.erase(delayed_.begin());
  }
  return delayed_.empty() ? absl::InfiniteFuture() : delayed_.begin()->first;
}

void DemandQueue::Run() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    const absl::Time next = paused_ ? absl::InfiniteFuture() : ReleaseDue();
    if (dirty_ && !paused_) {
      dirty_ = false;
      if (queued_ == 0) continue;
      ++stats_.passes;
      absl::flat_hash_set<std::string> failed;  // shapes that found no room in this pass
      if (loop_ == nullptr) {
        Pass(failed, SIZE_MAX);
        continue;
      }
      // Slices of the pass as tasks on the loop; this thread waits for each without the lock.
      passing_ = true;
      for (bool over = false; !over && !stopping_;) {
        mu_.Unlock();
        loop_->RunOnLoopThread([&] {
          absl::MutexLock slice(&mu_);
          over = Pass(failed, kSlice);
        });
        mu_.Lock();
      }
      passing_ = false;
      continue;
    }
    const absl::Duration wait =
        next == absl::InfiniteFuture() ? absl::InfiniteDuration() : next - clock_.Now();
    mu_.AwaitWithTimeout(absl::Condition(this, &DemandQueue::Woken), wait);
  }
}

bool DemandQueue::Pass(absl::flat_hash_set<std::string>& failed, size_t budget) {
  for (size_t tried = 0; !stopping_; ++tried) {
    auto head = heads_.begin();
    while (head != heads_.end() && failed.contains(head->second)) ++head;
    if (head == heads_.end()) return true;
    if (tried == budget) return false;
    const std::string shape = head->second;
    heads_.erase(head);
    auto q = by_shape_.find(shape);
    Entry e = std::move(q->second.front());
    q->second.pop_front();
    --queued_;
    if (q->second.empty()) {
      by_shape_.erase(q);
    } else {
      heads_.emplace(q->second.front().seq, shape);
    }
    running_owner_ = e.owner;
    mu_.Unlock();
    const Outcome outcome = e.attempt();
    mu_.Lock();
    running_owner_ = nullptr;
    ++stats_.attempts;
    if (outcome == Outcome::kPlaced) ++stats_.placed;
    if (outcome != Outcome::kWaiting || detached_.contains(e.owner)) continue;
    // Back in front of its shape (everything pushed meanwhile is younger), done for this pass.
    failed.insert(shape);
    std::deque<Entry>& same = by_shape_[shape];
    if (!same.empty()) heads_.erase(same.front().seq);
    heads_.emplace(e.seq, shape);
    same.push_front(std::move(e));
    ++queued_;
  }
  return true;
}

}  // namespace skyrl::head
