#include "runtime/head/death_quorum.h"

#include <algorithm>

namespace skyrl::head {

DeathQuorum::DeathQuorum(uint64_t first_version) : version_(first_version), log_floor_(first_version) {}

void DeathQuorum::Changed(const NodeId& id, bool alive) {
  ++version_;
  if (alive_.contains(id) == alive) return;
  if (alive) {
    alive_.insert(id);
  } else {
    alive_.erase(id);
  }
  changes_.push_back({version_, id, alive});
  if (changes_.size() > kMaxChanges) {
    log_floor_ = changes_.front().version;
    changes_.pop_front();
  }
}

absl::flat_hash_set<NodeId> DeathQuorum::ListOf(const NodeId& id, const std::set<NodeId>& alive) {
  absl::flat_hash_set<NodeId> list = {id};
  const size_t others = alive.size() - (alive.contains(id) ? 1 : 0);
  if (others <= 2 * kPeersEachSide) {
    list.insert(alive.begin(), alive.end());
    return list;
  }
  // kPeersEachSide after it on the ring (wrapping round), and as many before it.
  auto after = alive.upper_bound(id);
  for (size_t k = 0; k < kPeersEachSide; ++k, ++after) {
    if (after == alive.end()) after = alive.begin();
    list.insert(*after);
  }
  auto before = alive.lower_bound(id);
  for (size_t k = 0; k < kPeersEachSide; ++k) {
    if (before == alive.begin()) before = alive.end();
    list.insert(*--before);
  }
  return list;
}

std::vector<NodeId> DeathQuorum::PeersOf(const NodeId& id) const {
  std::vector<NodeId> out;
  for (const NodeId& other : ListOf(id, alive_))
    if (other != id) out.push_back(other);
  return out;
}

void DeathQuorum::Recovered(const NodeId& id, bool alive, bool on_lists) {
  if (on_lists) {
    recovered_.push_back(id);
    recovered_set_.reset();
  }
  if (!alive) return;
  held_[id] = Held{kPreviousHeadsList, kPreviousHeadsList};
  alive_.insert(id);
}

void DeathQuorum::RecoveredPending(const NodeId& id, bool back, absl::Time not_before, Deadlines deadlines,
                                   std::string reason) {
  Pending p;
  p.back = back;
  // Back: only its own heartbeat (or its deadlines) confirms it, as in Registered.
  p.version = back ? kNoConfirmations : version_;
  // The list a previous head sent it: its ring neighbours among the nodes recovered.
  const absl::flat_hash_set<NodeId> list = ListOf(id, RecoveredSet());
  for (const NodeId& other : list)
    if (other != id) p.eligible.insert(other);
  p.needed = list.size() <= 1 ? 0 : (list.size() + 1) / 2;
  p.not_before = not_before;
  p.deadlines = deadlines;
  p.reason = std::move(reason);
  pending_[id] = std::move(p);
}

bool DeathQuorum::Registered(const NodeId& id, uint64_t holds) {
  auto p = pending_.find(id);
  if (p != pending_.end()) {
    // Its peers' lists have it again: only its heartbeat (or its deadlines) confirms.
    p->second.back = true;
    p->second.stopped = false;
    p->second.confirmed.clear();
    p->second.version = kNoConfirmations;
  }
  // It drops the list it holds once it has the reply, which may be lost: until it is heard
  // saying which it holds, it may still count on that one.
  held_[id] = Held{.reported = holds};
  left_.erase(id);
  return p != pending_.end();
}

uint64_t DeathQuorum::Heard(const NodeId& id, uint64_t holds, bool sent,
                            const std::vector<PeerSupport>& supports, absl::Time now, absl::Duration limit) {
  // Back from a pending death, it heartbeats holding no list (a worker drops its list on
  // registering) after stopping its old actors; a heartbeat sent before is not that.
  if (auto p = pending_.find(id); p != pending_.end() && p->second.back && holds == 0)
    p->second.stopped = true;
  // A version this head never sent (a previous head's, or nonsense): a list it cannot know.
  if (holds > version_) holds = kPreviousHeadsList;
  held_[id] = Held{.reported = holds, .sent = sent ? version_ : holds};
  // Holding a list without them, it no longer counts the pending dead alive.
  for (auto& [dead, p] : pending_)
    if (holds >= p.version && p.eligible.contains(id)) p.confirmed.insert(id);
  for (const PeerSupport& s : supports)
    if (auto p = pending_.find(s.node); p != pending_.end())
      p->second.not_before =
          std::max(p->second.not_before, now - std::max(s.ago, absl::ZeroDuration()) + limit);
  return holds;
}

void DeathQuorum::Left(const NodeId& id, absl::Time now, absl::Duration limit) {
  Forget(id);
  left_[id] = now;
  // Gone, it supports no one: as good as a confirmation of every death it could confirm,
  // once the supports it may have given since it was last heard run out.
  for (auto& [dead, p] : pending_)
    if (p.version != kNoConfirmations && p.eligible.contains(id)) {
      p.confirmed.insert(id);
      p.not_before = std::max(p.not_before, now + limit);
    }
}

DeathQuorum::Pending DeathQuorum::Declare(const NodeId& id, absl::Time now, Deadlines deadlines, bool confirm,
                                          absl::Duration limit) const {
  if (auto earlier = pending_.find(id); earlier != pending_.end()) {
    Pending p = earlier->second;
    p.back = p.stopped = false;
    p.deadlines = deadlines;
    return p;
  }
  if (confirm) return Confirmation(id, now, deadlines, limit);
  return Pending{};
}

void DeathQuorum::Await(const NodeId& id, Pending pending) {
  // Lists from the current version (the one that left it out) on confirm it.
  if (pending.version != kNoConfirmations) pending.version = version_;
  pending_[id] = std::move(pending);
}

const DeathQuorum::Pending* DeathQuorum::Find(const NodeId& id) const {
  auto it = pending_.find(id);
  return it == pending_.end() ? nullptr : &it->second;
}

std::vector<DeathQuorum::Confirmed> DeathQuorum::Ready(
    absl::Time now, absl::Time steady_now, const std::function<bool(const NodeId&)>& process_gone) const {
  std::vector<Confirmed> out;
  for (const auto& [id, p] : pending_) {
    const bool peers = p.confirmed.size() >= p.needed && now >= p.not_before;
    if (p.stopped) {
      out.push_back({id, Why::kStopped});
    } else if (!p.back && process_gone(id)) {
      out.push_back({id, Why::kProcessGone});
    } else if (peers) {
      out.push_back({id, Why::kPeers, p.confirmed.size()});
    } else if (steady_now >= p.deadlines.horizon) {
      out.push_back({id, Why::kHorizon});
    } else if (now >= p.deadlines.give_up_at) {
      out.push_back({id, Why::kGaveUp});
    }
  }
  return out;
}

void DeathQuorum::Forget(const NodeId& id) {
  held_.erase(id);
  pending_.erase(id);
}

const std::set<NodeId>& DeathQuorum::RecoveredSet() const {
  if (!recovered_set_) recovered_set_.emplace(recovered_.begin(), recovered_.end());
  return *recovered_set_;
}

const std::set<NodeId>* DeathQuorum::AliveAt(uint64_t version) const {
  if (version < log_floor_ || version > version_) return nullptr;
  if (version == version_) return &alive_;
  // Many deaths in one check (a rack lost) mostly ask for the same few versions.
  if (auto cached = alive_at_.find(version); cached != alive_at_.end()) return &cached->second;
  std::set<NodeId>& alive = alive_at_[version];
  alive = alive_;
  // Undo the changes made after `version`, newest first.
  for (auto it = changes_.rbegin(); it != changes_.rend() && it->version > version; ++it) {
    if (it->alive) {
      alive.erase(it->node);
    } else {
      alive.insert(it->node);
    }
  }
  return &alive;
}

DeathQuorum::Pending DeathQuorum::Confirmation(const NodeId& id, absl::Time now, Deadlines deadlines,
                                               absl::Duration limit) const {
  Pending p;
  p.not_before = now;
  p.deadlines = deadlines;
  Held held;
  if (auto h = held_.find(id); h != held_.end()) held = h->second;
  // The lists it may hold, but for none (0: a worker holding none fences when cut off) and
  // lists of itself alone (it may count itself a lone node, which keeps its actors whatever
  // its peers say: they cannot confirm anything). None left: at once, as for a lone node.
  std::vector<absl::flat_hash_set<NodeId>> views;
  for (uint64_t v : {held.reported, held.sent}) {
    if (v == 0) continue;
    const std::set<NodeId>* alive = AliveAt(v);
    if (alive == nullptr && !recovered_.empty()) alive = &RecoveredSet();
    if (alive == nullptr) alive = &alive_;  // a list this head cannot know: from the nodes alive now
    absl::flat_hash_set<NodeId> list = ListOf(id, *alive);
    if (list.size() > 1) views.push_back(std::move(list));
  }
  if (views.empty()) return p;
  size_t largest = 0;
  for (const auto& view : views) largest = std::max(largest, view.size());
  p.needed = (largest + 1) / 2;
  for (const NodeId& peer : views[0]) {
    if (peer == id) continue;
    bool everywhere = true;
    for (const auto& view : views) everywhere = everywhere && view.contains(peer);
    if (!everywhere) continue;
    p.eligible.insert(peer);
    // Left since: it confirms (as in Left), once the supports it may have given run out.
    if (auto left = left_.find(peer); left != left_.end()) {
      p.confirmed.insert(peer);
      p.not_before = std::max(p.not_before, left->second + limit);
    }
  }
  return p;
}

}  // namespace skyrl::head
