#include "runtime/head/stop_mailbox.h"

namespace skyrl::head {

void StopMailbox::Request(const NodeId& node, const ActorStart& start, bool awaited) {
  absl::MutexLock lock(&mu_);
  if (gone_.contains(node)) return;
  if (auto done = done_.find(node); done != done_.end() && done->second.contains(start)) return;
  bool& a = asked_[node][start];
  a = a || awaited;
}

bool StopMailbox::Reported(const NodeId& node, const ActorStart& start) const {
  absl::MutexLock lock(&mu_);
  auto done = done_.find(node);
  return done != done_.end() && done->second.contains(start);
}

void StopMailbox::Forget(const NodeId& node, const ActorStart& start) {
  absl::MutexLock lock(&mu_);
  auto forget = [&](auto& table) {
    if (auto it = table.find(node); it != table.end()) {
      it->second.erase(start);
      if (it->second.empty()) table.erase(it);
    }
  };
  forget(asked_);
  forget(done_);
}

std::vector<ActorStart> StopMailbox::Exchange(const NodeId& node, const std::vector<ActorStart>& stopped) {
  std::vector<ActorStart> ask, done;
  {
    absl::MutexLock lock(&mu_);
    auto asked = asked_.find(node);
    if (asked == asked_.end()) return ask;
    for (const ActorStart& s : stopped)
      if (auto a = asked->second.find(s); a != asked->second.end()) {
        if (a->second) {
          done_[node].insert(s);
          done.push_back(s);
        }
        asked->second.erase(a);
      }
    for (const auto& [s, awaited] : asked->second) ask.push_back(s);
    if (asked->second.empty()) asked_.erase(asked);
  }
  if (reported_)
    for (const ActorStart& s : done) reported_(node, s);
  return ask;
}

void StopMailbox::NodeGone(const NodeId& node) {
  absl::MutexLock lock(&mu_);
  const uint64_t n = ++gone_count_;
  gone_[node] = n;
  gone_order_.emplace_back(node, n);
  while (gone_order_.size() > keep_gone_) {
    const auto& [oldest, when] = gone_order_.front();
    if (auto g = gone_.find(oldest); g != gone_.end() && g->second == when) gone_.erase(g);
    gone_order_.pop_front();
  }
  // Awaited requests end with their wait.
  auto asked = asked_.find(node);
  if (asked == asked_.end()) return;
  absl::erase_if(asked->second, [](const auto& entry) { return !entry.second; });
  if (asked->second.empty()) asked_.erase(asked);
}

void StopMailbox::NodeBack(const NodeId& node) {
  absl::MutexLock lock(&mu_);
  gone_.erase(node);
}

}  // namespace skyrl::head
