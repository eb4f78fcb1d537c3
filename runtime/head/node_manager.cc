#include "runtime/head/node_manager.h"

#include <cmath>
#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/common/resources.h"
#include "runtime/common/logging.h"

namespace skyrl::head {
absl::Status ValidateNodeInfo(const v1::NodeInfo& info) {
  if (!info.node_id().empty())
    if (auto id = NodeId::Parse(info.node_id()); !id.ok())
      return absl::InvalidArgumentError(absl::StrCat("node.node_id: ", id.status().message()));
  std::map<std::string, double> res(info.resources_total().begin(), info.resources_total().end());
  absl::StatusOr<ResourceSet> resources = ResourceSet::FromMap(res);
  if (!resources.ok())
    return absl::InvalidArgumentError(absl::StrCat("node.resources_total: ", resources.status().message()));
  for (const auto& [k, v] : info.labels()) {
    if (absl::Status s = ValidateName("node.labels key", k); !s.ok()) return s;
    if (absl::StartsWith(k, kReservedLabelPrefix) && k != kNodeIdLabel)
      return absl::InvalidArgumentError(absl::StrCat("node.labels key ", k, ": keys starting \"",
                                                     kReservedLabelPrefix, "\" are the head's"));
    if (v.size() > 256)
      return absl::InvalidArgumentError(absl::StrCat("node.labels[", k, "]: longer than 256"));
  }
  absl::flat_hash_set<int> seen;
  for (int g : info.gpu_ids()) {
    if (g < 0 || !seen.insert(g).second)
      return absl::InvalidArgumentError(absl::StrCat("node.gpu_ids: ", g, " is negative or repeated"));
  }
  if (double(info.gpu_ids_size()) != resources->Get(kGPU))
    return absl::InvalidArgumentError(
        absl::StrCat("node.gpu_ids: ", info.gpu_ids_size(), " ids for GPU=", resources->Get(kGPU)));
  if (info.hostname().size() > 256)
    return absl::InvalidArgumentError("node.hostname: longer than 256 characters");
  if (info.headless_keep_ms() < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("node.headless_keep_ms: ", info.headless_keep_ms(), " is negative"));
  if (info.head_retry_window_ms() < 0 || info.head_retry_window_ms() > int64_t{366} * 24 * 3600 * 1000)
    return absl::InvalidArgumentError(absl::StrCat("node.head_retry_window_ms: ", info.head_retry_window_ms(),
                                                   " is not within [0, a year]"));
  return absl::OkStatus();
}

NodeManager::NodeManager(store::Store& store, const Clock& clock, NodeManagerOptions options,
                         const Clock* steady, ResourceTracker* placement)
    : store_(store),
      clock_(clock),
      steady_(steady != nullptr ? *steady : clock),
      placement_(placement),
      options_(options),
      // Versions of one head never repeat those of an earlier one, whose lists workers may hold.
      quorum_(uint64_t(absl::ToUnixNanos(clock.Now())) | 1),
      longest_period_(options.heartbeat_period) {}

absl::Duration NodeManager::PeriodLocked() const {
  const absl::Duration base = options_.heartbeat_period;
  if (options_.heartbeats_per_s <= 0) return base;
  // Whole periods, so that the period (and every node's record) changes seldom.
  const double per_period = options_.heartbeats_per_s * absl::ToDoubleSeconds(base);
  const int64_t periods =
      std::max<int64_t>(1, int64_t(std::ceil(double(quorum_.alive_count()) / std::max(1.0, per_period))));
  return base * periods;
}

absl::Duration NodeManager::HeartbeatPeriod() const {
  absl::MutexLock lock(&mu_);
  return PeriodLocked();
}

absl::Duration NodeManager::PeriodOf(const v1::NodeInfo& info) const {
  return std::max(options_.heartbeat_period, absl::Milliseconds(info.heartbeat_period_ms()));
}

absl::Status NodeManager::Persist(const v1::NodeInfo& info) {
  absl::Status s = store_.Put(kNodesTable, info.node_id(), info.SerializeAsString());
  if (!s.ok()) return s;
  absl::StatusOr<NodeId> id = NodeId::Parse(info.node_id());
  if (!id.ok()) return s;
  // Every state or address change passes here (the caller then applies it); a limit
  // recorded from a heartbeat changes no peer list.
  auto known = nodes_.find(*id);
  if (known == nodes_.end() || known->second.state() != info.state() ||
      known->second.address() != info.address())
    quorum_.Changed(*id, info.state() == v1::NODE_ALIVE);
  return s;
}

absl::Status NodeManager::Recover() {
  absl::StatusOr<std::vector<store::Entry>> entries = store_.Scan(kNodesTable, "");
  if (!entries.ok()) return entries.status();
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_.Now(), steady_now = steady_.Now();
  const int64_t now_ms = absl::ToUnixMillis(now);
  for (const store::Entry& e : *entries) {
    v1::NodeInfo info;
    absl::StatusOr<NodeId> id = NodeId::Parse(e.key);
    if (!id.ok() || !info.ParseFromString(e.value)) {
      spdlog::error("nodes table: skipping unreadable entry {}", store::Where(kNodesTable, e.key));
      continue;
    }
    // Heartbeat times are not persisted: give every alive node a full window to reconnect.
    // Any of these may be on the lists the previous head sent (gone with it): the ALIVE,
    // the unconfirmed dead, and the dead whose worker may not have given up yet (cut off, it
    // still supports its peers).
    const absl::Duration window = absl::Milliseconds(info.head_retry_window_ms());
    const absl::Duration limit = LimitOf(info);
    longest_period_ = std::max(longest_period_, PeriodOf(info));
    const bool alive = info.state() == v1::NODE_ALIVE;
    quorum_.Recovered(*id, alive,
                      /*on_lists=*/alive || info.death_unconfirmed() || window == absl::ZeroDuration() ||
                          absl::FromUnixMillis(info.last_heartbeat_unix_ms()) + window + limit > now);
    if (alive) {
      info.set_last_heartbeat_unix_ms(now_ms);
      // A previous head answered it last before this one started.
      answered_[*id] = steady_now;
    }
    nodes_[*id] = std::move(info);
  }
  // Deaths the previous head had not confirmed: afresh, against the nodes recovered, waiting
  // out any support given meanwhile.
  for (const auto& [id, info] : nodes_) {
    if (!info.death_unconfirmed()) continue;
    const absl::Time give_up_at = info.head_retry_window_ms() > 0
                                      ? now + absl::Milliseconds(info.head_retry_window_ms()) + LimitOf(info)
                                      : absl::InfiniteFuture();
    // Registered again and not yet heard since: back. A previous head answered it last
    // before this one started.
    quorum_.RecoveredPending(id, /*back=*/info.state() == v1::NODE_ALIVE, now + LimitMax(),
                             {.give_up_at = give_up_at, .horizon = Horizon(info, steady_now)},
                             info.death_reason());
    spdlog::info("node {}: its death is not confirmed yet; waiting for {} of its peers", id.ToString(),
                 quorum_.Find(id)->needed);
  }
  // Announced before the restart (a node back from a death still unconfirmed is announced
  // once it is confirmed).
  for (const auto& [id, info] : nodes_)
    if (info.state() == v1::NODE_ALIVE && !info.death_unconfirmed()) JoinPlacement(info);
  spdlog::info("recovered {} nodes from the store", nodes_.size());
  return absl::OkStatus();
}

absl::StatusOr<NodeId> NodeManager::Register(v1::NodeInfo info, bool* was_dead, uint64_t peers_version,
                                             absl::Duration* period) {
  if (absl::Status s = ValidateNodeInfo(info); !s.ok()) return s;
  // A worker's first registration: a fresh process, with no actors, that applies this head's
  // limit from the reply on. Registering again, it may still apply the one it says.
  const bool fresh = info.node_id().empty();
  NodeId id = fresh ? NodeId::Random() : *NodeId::Parse(info.node_id());
  int64_t now_ms = absl::ToUnixMillis(clock_.Now());
  info.set_node_id(id.ToString());
  (*info.mutable_labels())[kNodeIdLabel] = id.ToString();
  info.set_state(v1::NODE_ALIVE);
  info.set_registered_unix_ms(now_ms);
  info.set_last_heartbeat_unix_ms(now_ms);
  info.clear_death_reason();
  // The limit it applies (its own word), or this head's once it has the reply.
  info.set_headless_keep_ms(KeepBoundMs(fresh && fencing() ? absl::ToInt64Milliseconds(options_.headless_keep)
                                                           : info.headless_keep_ms()));
  absl::MutexLock events(&events_mu_);
  bool announce = true;
  {
    absl::MutexLock lock(&mu_);
    // Back from an unconfirmed death: it stops the actors it had on this reply, then
    // heartbeats; its death is confirmed (they restart elsewhere) and it is announced ALIVE
    // only then, in CheckLiveness. Stored so, in case the head restarts meanwhile.
    const bool pending = quorum_.pending(id);
    info.set_death_unconfirmed(pending);
    auto known = nodes_.find(id);
    // The period the reply tells; registering again, it may still apply the one from before.
    const absl::Duration told = PeriodLocked();
    longest_period_ = std::max(longest_period_, told);
    if (period != nullptr) *period = told;
    info.set_heartbeat_period_ms(
        absl::ToInt64Milliseconds(known != nodes_.end() ? std::max(told, PeriodOf(known->second)) : told));
    // Also when a registration since the death was made but not yet followed by a heartbeat:
    // its reply (with was_dead) may have been lost, and the worker is asking again.
    const bool dead = (known != nodes_.end() && known->second.state() == v1::NODE_DEAD) ||
                      unacknowledged_deaths_.contains(id) || pending;
    if (was_dead) *was_dead = dead;
    if (absl::Status s = Persist(info); !s.ok()) return s;
    if (dead) unacknowledged_deaths_.insert(id);
    if (quorum_.Registered(id, peers_version)) {
      announce = false;
      spdlog::info(
          "node {} is back before its death was confirmed: confirmed once it has stopped its old actors",
          id.ToString());
    }
    answered_[id] = steady_.Now();
    gone_.erase(id);  // a report about its previous process says nothing of this one
    spdlog::info(
        "node {} registered: {} resources {}", id.ToString(), info.hostname(),
        ResourceSet::FromMap({info.resources_total().begin(), info.resources_total().end()})->ToString());
    nodes_[id] = info;
    if (announce) JoinPlacement(info);
  }
  if (listener_ && announce) listener_->OnNodeAlive(info);
  return id;
}

absl::StatusOr<HeartbeatOut> NodeManager::Heartbeat(const HeartbeatIn& in) {
  const NodeId& id = in.node;
  HeartbeatOut out;
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end() || it->second.state() != v1::NODE_ALIVE)
    return absl::NotFoundError(absl::StrCat(
        "node ", id.ToString(), it == nodes_.end() ? " is unknown" : " is dead", ": register again"));
  out.period = PeriodLocked();
  longest_period_ = std::max(longest_period_, out.period);
  // The longest period and keep limit its worker may apply once it has this reply: the one
  // it applies now (or, not said, the longest it may), or the one told, whichever is longer.
  int64_t period_ms = it->second.heartbeat_period_ms();
  if (in.period) {
    const absl::Duration may = *in.period > absl::ZeroDuration() ? *in.period : PeriodOf(it->second);
    period_ms = absl::ToInt64Milliseconds(std::max(may, out.period));
  }
  int64_t keep_ms = it->second.headless_keep_ms();
  if (in.keep) keep_ms = KeepBoundMs(std::max<int64_t>(0, absl::ToInt64Milliseconds(*in.keep)));
  if (period_ms != it->second.heartbeat_period_ms() || keep_ms != it->second.headless_keep_ms()) {
    v1::NodeInfo updated = it->second;
    updated.set_heartbeat_period_ms(period_ms);
    updated.set_headless_keep_ms(keep_ms);
    if (absl::Status s = Persist(updated); !s.ok()) return s;
    it->second = std::move(updated);
  }
  const absl::Time now = clock_.Now();
  it->second.set_last_heartbeat_unix_ms(absl::ToUnixMillis(now));
  answered_[id] = steady_.Now();
  gone_.erase(id);  // heard: whatever was reported gone was not its process
  // A heartbeat follows a registration whose reply the worker got: it knows of the death.
  unacknowledged_deaths_.erase(id);
  const uint64_t held = quorum_.Heard(id, in.peers_version, in.send_peers, in.supports, now, LimitMax());
  if (in.send_peers) FillPeers(id, held, out.peers);
  ReportGoneLocked(id, in.gone);
  out.checks = ProcessChecksLocked(id);
  return out;
}

void NodeManager::FillPeers(const NodeId& id, uint64_t known, PeerList& peers) const {
  peers.version = quorum_.version();
  peers.changed = known != peers.version;
  peers.addresses.clear();
  peers.node_ids.clear();
  if (!peers.changed) return;
  for (const NodeId& other : quorum_.PeersOf(id)) {
    peers.addresses.push_back(nodes_.at(other).address());
    peers.node_ids.push_back(other.ToString());
  }
}

DeathQuorum::Deadlines NodeManager::DeadlinesOf(const NodeId& id, const v1::NodeInfo& info) const {
  DeathQuorum::Deadlines d;
  if (info.head_retry_window_ms() > 0)
    d.give_up_at = absl::FromUnixMillis(info.last_heartbeat_unix_ms()) +
                   absl::Milliseconds(info.head_retry_window_ms()) + LimitOf(info);
  auto answered = answered_.find(id);
  d.horizon = Horizon(info, answered != answered_.end() ? answered->second : steady_.Now());
  return d;
}

void NodeManager::JoinPlacement(const v1::NodeInfo& info) {
  if (placement_ == nullptr) return;
  // The node's row was checked when it came in (ValidateNodeInfo); a re-registration the
  // scheduler refuses (it no longer holds what is placed there) keeps its previous entry.
  absl::Status s = placement_->With([&](scheduler::Cluster& c) { return c.AddNode(ToNodeSpec(info)); });
  if (!s.ok()) spdlog::error("node {}: the scheduler cannot take it: {}", info.node_id(), s.message());
}

Displaced NodeManager::LeavePlacement(const NodeId& id) {
  if (placement_ == nullptr) return {};
  return placement_->With([&](scheduler::Cluster& c) { return c.RemoveNode(id.ToString()); });
}

bool NodeManager::Confirm(const NodeId& id) {
  auto it = nodes_.find(id);
  if (it == nodes_.end()) return true;
  v1::NodeInfo updated = it->second;
  updated.set_death_unconfirmed(false);
  if (absl::Status s = Persist(updated); !s.ok()) {
    spdlog::warn("node {}: cannot record its confirmed death: {}", id.ToString(), s.message());
    return false;
  }
  it->second = std::move(updated);
  ForgetLocked(id);
  return true;
}

int64_t NodeManager::KeepBoundMs(int64_t applied_ms) const {
  const int64_t own = fencing() ? absl::ToInt64Milliseconds(options_.headless_keep) : 0;
  if (applied_ms == own) return own;
  // 0 is no limit: larger than any.
  return applied_ms <= 0 || own <= 0 ? 0 : std::max(applied_ms, own);
}

absl::Time NodeManager::Horizon(const v1::NodeInfo& info, absl::Time last_answered) const {
  if (info.headless_keep_ms() <= 0 || !fencing()) return absl::InfiniteFuture();
  // The lease runs 0.9 T past its last renewal, which is at most K after the request sent
  // before `last_answered`; T (not 0.9 T) leaves a tenth for the clocks' rates and the actors'
  // lease checks (every 25 ms).
  return last_answered + absl::Milliseconds(info.headless_keep_ms()) + LimitOf(info);
}

std::vector<ProcessCheck> NodeManager::ProcessChecksLocked(const NodeId& asker) const {
  std::vector<ProcessCheck> out;
  auto me = nodes_.find(asker);
  if (me == nodes_.end() || me->second.process_space().empty()) return out;
  const absl::Time now = clock_.Now();
  // Only the few nodes the last check found silent: a heartbeat costs no scan of the table.
  for (const NodeId& id : suspects_) {
    auto it = nodes_.find(id);
    if (it == nodes_.end() || id == asker) continue;
    const v1::NodeInfo& info = it->second;
    if (info.process_space() != me->second.process_space() || info.pid() <= 0 ||
        info.pid_start_ticks() <= 0 || !Silent(id, info, now))
      continue;
    out.push_back({id, info.pid(), info.pid_start_ticks()});
  }
  return out;
}

bool NodeManager::Silent(const NodeId& id, const v1::NodeInfo& info, absl::Time now) const {
  if (const DeathQuorum::Pending* p = quorum_.Find(id)) return !p->back;
  return info.state() == v1::NODE_ALIVE &&
         now - absl::FromUnixMillis(info.last_heartbeat_unix_ms()) > PeriodOf(info) * 2;
}

void NodeManager::ReportGoneLocked(const NodeId& reporter, const std::vector<ProcessCheck>& gone) {
  if (gone.empty()) return;
  auto me = nodes_.find(reporter);
  if (me == nodes_.end() || me->second.state() != v1::NODE_ALIVE || me->second.process_space().empty())
    return;
  const absl::Time now = clock_.Now();
  for (const ProcessCheck& g : gone) {
    auto it = nodes_.find(g.node);
    // Only the current process of a silent node in the reporter's space: a late report about
    // an earlier process, or about a node that is heard, proves nothing.
    if (it == nodes_.end() || g.node == reporter ||
        it->second.process_space() != me->second.process_space() || it->second.pid() != g.pid ||
        it->second.pid_start_ticks() != g.start_ticks || g.pid <= 0 || !Silent(g.node, it->second, now))
      continue;
    if (gone_.contains(g.node)) continue;
    gone_[g.node] = absl::StrCat("its worker process (pid ", g.pid, ") is gone, as node ",
                                 reporter.ToString(), " on the same machine found");
    spdlog::info("node {}: {}", g.node.ToString(), gone_[g.node]);
  }
}

void NodeManager::ForgetLocked(const NodeId& id) {
  quorum_.Forget(id);
  gone_.erase(id);
  answered_.erase(id);
}

bool NodeManager::DeathUnconfirmed(absl::string_view node_id) const {
  absl::StatusOr<NodeId> id = NodeId::Parse(node_id);
  if (!id.ok()) return false;
  absl::MutexLock lock(&mu_);
  return quorum_.pending(*id);
}

absl::Status NodeManager::Unregister(const NodeId& id, absl::string_view reason) {
  absl::MutexLock events(&events_mu_);
  std::string why;
  Displaced displaced;  // (none when it left the scheduler's view earlier, declared dead)
  {
    absl::MutexLock lock(&mu_);
    auto it = nodes_.find(id);
    if (it == nodes_.end()) return absl::NotFoundError(absl::StrCat("node ", id.ToString(), " is unknown"));
    if (it->second.state() == v1::NODE_DEAD) {
      // Declared dead while cut off, and now leaving: it has stopped its actors.
      const DeathQuorum::Pending* pending = quorum_.Find(id);
      if (pending == nullptr) return absl::OkStatus();
      why = pending->reason;
      if (!Confirm(id))
        return absl::UnavailableError(absl::StrCat("node ", id.ToString(), ": cannot record its death"));
      quorum_.Left(id, clock_.Now(), LimitMax());
      spdlog::info("node {} unregistered: its death is confirmed", id.ToString());
    } else {
      v1::NodeInfo updated = it->second;
      updated.set_state(v1::NODE_DEAD);
      updated.set_death_reason(absl::StrCat("node left: ", reason.substr(0, 512)));
      updated.set_death_unconfirmed(false);  // back, now leaving: its actors are stopped
      if (absl::Status s = Persist(updated); !s.ok()) return s;
      why = updated.death_reason();
      it->second = std::move(updated);
      displaced = LeavePlacement(id);
      ForgetLocked(id);
      quorum_.Left(id, clock_.Now(), LimitMax());
      spdlog::info("node {} unregistered: {}", id.ToString(), reason.substr(0, 512));
    }
  }
  if (listener_) listener_->OnNodeDead(id, why, std::move(displaced));
  return absl::OkStatus();
}

std::vector<NodeId> NodeManager::CheckLiveness() {
  absl::MutexLock events(&events_mu_);
  Check check = CheckLivenessLocked();
  if (listener_) {
    absl::flat_hash_set<NodeId> confirmed;
    for (const auto& [id, reason] : check.confirmed) confirmed.insert(id);
    auto displaced = [&](const NodeId& id) {
      auto d = check.displaced.find(id);
      return d == check.displaced.end() ? Displaced{} : std::move(d->second);
    };
    for (const NodeId& id : check.declared)
      if (!confirmed.contains(id)) listener_->OnNodeSilent(id, displaced(id));
    for (const auto& [id, reason] : check.confirmed) listener_->OnNodeDead(id, reason, displaced(id));
    for (const v1::NodeInfo& node : check.back) listener_->OnNodeAlive(node);
  }
  return check.declared;
}

NodeManager::Check NodeManager::CheckLivenessLocked() {
  Check check;
  std::vector<std::pair<NodeId, std::string>>& died = check.confirmed;
  absl::MutexLock lock(&mu_);
  quorum_.ClearCache();
  absl::Time now = clock_.Now();
  if (options_.isolation_guard) {
    int alive = 0;
    bool heard = false;  // some ALIVE node within half the threshold
    for (const auto& [id, info] : nodes_) {
      if (info.state() != v1::NODE_ALIVE) continue;
      ++alive;
      heard = heard || now - absl::FromUnixMillis(info.last_heartbeat_unix_ms()) <= LimitOf(info) / 2;
    }
    if (alive >= 2 && !heard) {
      if (!isolated_)
        spdlog::warn(
            "liveness: no node heard for {}; this head may be cut off from them: declaring none dead "
            "until one is heard again",
            absl::FormatDuration(LimitMax() / 2));
      isolated_ = true;
      last_check_ = now;
      return check;
    }
    if (isolated_) {
      // A node is heard again. The silent ones may only now learn (from their peers) that the
      // head is back for others and fence their actors: a full window for that.
      spdlog::info("liveness: nodes heard again; every ALIVE node gets a fresh window");
      isolated_ = false;
      last_check_ = now;
      for (auto& [id, info] : nodes_)
        if (info.state() == v1::NODE_ALIVE) info.set_last_heartbeat_unix_ms(absl::ToUnixMillis(now));
      return check;
    }
  }
  std::optional<absl::Time> previous = last_check_;
  last_check_ = now;
  if (options_.stall_grace > absl::ZeroDuration() && previous && now - *previous > options_.stall_grace) {
    spdlog::warn("liveness: the head itself stalled for {}; giving every node a fresh window",
                 absl::FormatDuration(absl::Trunc(now - *previous, absl::Milliseconds(1))));
    for (auto& [id, info] : nodes_)
      if (info.state() == v1::NODE_ALIVE) info.set_last_heartbeat_unix_ms(absl::ToUnixMillis(now));
    return check;
  }
  // Deaths confirmed since the last check (one declared in this check waits for the next).
  const absl::Time steady_now = steady_.Now();
  absl::flat_hash_set<NodeId> just_confirmed;
  auto process_gone = [&](const NodeId& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return gone_.contains(id); };
  for (const DeathQuorum::Confirmed& c : quorum_.Ready(now, steady_now, process_gone)) {
    const NodeId& id = c.node;
    auto row = nodes_.find(id);
    if (row == nodes_.end()) {  // (a pending death always has its row; nothing to record without one)
      quorum_.Forget(id);
      continue;
    }
    const v1::NodeInfo& info = row->second;
    std::string how;
    switch (c.why) {
      case DeathQuorum::Why::kStopped:
        how = "it came back and stopped its old actors";
        break;
      case DeathQuorum::Why::kProcessGone:
        how = gone_.at(id);
        break;
      case DeathQuorum::Why::kPeers:
        how = absl::StrCat(c.peers, " of its peers know of it");
        break;
      case DeathQuorum::Why::kHorizon:
        how = absl::StrCat("no lease its worker renewed runs past now, ",
                           absl::FormatDuration(absl::Milliseconds(info.headless_keep_ms())),
                           " (--headless-keep-ms) + ", absl::FormatDuration(LimitOf(info)),
                           " after it was last heard");
        break;
      case DeathQuorum::Why::kGaveUp:
        how = "its worker has given up on the head and exited by now";
        break;
    }
    const DeathQuorum::Pending& pending = *quorum_.Find(id);
    std::string reason = pending.reason;
    const bool back = pending.back;
    just_confirmed.insert(id);  // (refused by the store: tried again in the next check)
    if (!Confirm(id)) continue;
    spdlog::warn("node {}: death confirmed ({}); its actors restart elsewhere", id.ToString(), how);
    died.emplace_back(id, std::move(reason));
    if (back) {
      JoinPlacement(nodes_.at(id));
      check.back.push_back(nodes_.at(id));
    }
  }
  const bool confirm = options_.confirm_deaths && fencing();
  for (auto& [id, info] : nodes_) {
    if (info.state() != v1::NODE_ALIVE || just_confirmed.contains(id)) continue;
    absl::Duration silent = now - absl::FromUnixMillis(info.last_heartbeat_unix_ms());
    auto gone = gone_.find(id);
    if (silent <= LimitOf(info) && gone == gone_.end()) continue;
    v1::NodeInfo updated = info;
    updated.set_state(v1::NODE_DEAD);
    updated.set_death_reason(
        gone != gone_.end() ? absl::StrCat("node lost: ", gone->second)
                            : absl::StrCat("node lost: no heartbeat for ",
                                           absl::FormatDuration(absl::Trunc(silent, absl::Milliseconds(1))),
                                           " (", options_.heartbeat_misses, " missed)"));
    // What confirms it (copied: nothing changes if the store refuses below). Its worker
    // process gone: certain at once.
    DeathQuorum::Pending pending = quorum_.Declare(id, now, DeadlinesOf(id, info), confirm, LimitMax());
    const bool wait = DeathQuorum::Waits(pending) && gone == gone_.end();
    updated.set_death_unconfirmed(wait);
    // Keep the node alive in memory if the store refuses; the next check retries.
    if (absl::Status s = Persist(updated); !s.ok()) {
      spdlog::warn("node {}: cannot record death: {}", id.ToString(), s.message());
      continue;
    }
    check.declared.push_back(id);
    check.displaced[id] = LeavePlacement(id);
    if (!wait) {
      spdlog::warn("node {} is dead: {}", id.ToString(), updated.death_reason());
      died.emplace_back(id, updated.death_reason());
      ForgetLocked(id);
    } else {
      pending.reason = updated.death_reason();
      const absl::Duration horizon_in = pending.deadlines.horizon - steady_now,
                           give_up_in = pending.deadlines.give_up_at - now;
      const absl::Duration latest = std::min(horizon_in, give_up_in);
      spdlog::warn(
          "node {} is dead: {}; its actors restart elsewhere once {} of the {} peers it knows of have heard "
          "so, or a worker on its machine finds its process gone{}",
          id.ToString(), updated.death_reason(), pending.needed, pending.eligible.size(),
          latest == absl::InfiniteDuration()
              ? ""
              : absl::StrCat(", or at the latest ",
                             absl::FormatDuration(absl::Trunc(latest, absl::Milliseconds(1))),
                             " from now, when ",
                             latest == horizon_in ? "no lease its worker renewed can still run"
                                                  : "its worker has given up on the head"));
      quorum_.Await(id, std::move(pending));
    }
    info = std::move(updated);
  }
  // The nodes whose worker processes heartbeat replies ask about (HeartbeatOut.checks).
  suspects_.clear();
  for (const auto& [id, info] : nodes_)
    if (!info.process_space().empty() && Silent(id, info, now)) suspects_.push_back(id);
  return check;
}

std::optional<v1::NodeInfo> NodeManager::Find(absl::string_view node_id) const {
  absl::StatusOr<NodeId> id = NodeId::Parse(node_id);
  if (!id.ok()) return std::nullopt;
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(*id);
  if (it == nodes_.end()) return std::nullopt;
  return it->second;
}

std::vector<v1::NodeInfo> NodeManager::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::NodeInfo> out;
  for (const auto& [id, info] : nodes_) out.push_back(info);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.registered_unix_ms() != b.registered_unix_ms() ? a.registered_unix_ms() < b.registered_unix_ms()
                                                            : a.node_id() < b.node_id();
  });
  return out;
}

}  // namespace skyrl::head
