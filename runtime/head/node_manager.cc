#include "runtime/head/node_manager.h"

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
  return absl::OkStatus();
}

NodeManager::NodeManager(store::Store& store, const Clock& clock, NodeManagerOptions options)
    : store_(store), clock_(clock), options_(options) {
  // Versions of one head never repeat those of an earlier one, whose lists workers may hold.
  absl::MutexLock lock(&mu_);
  peers_version_ = uint64_t(absl::ToUnixNanos(clock_.Now())) | 1;
}

absl::Status NodeManager::Persist(const v1::NodeInfo& info) {
  absl::Status s = store_.Put(kNodesTable, info.node_id(), info.SerializeAsString());
  if (s.ok()) ++peers_version_;  // every state or address change passes here
  return s;
}

absl::Status NodeManager::Recover() {
  absl::StatusOr<std::vector<store::Entry>> entries = store_.Scan(kNodesTable, "");
  if (!entries.ok()) return entries.status();
  absl::MutexLock lock(&mu_);
  int64_t now_ms = absl::ToUnixMillis(clock_.Now());
  for (const store::Entry& e : *entries) {
    v1::NodeInfo info;
    absl::StatusOr<NodeId> id = NodeId::Parse(e.key);
    if (!id.ok() || !info.ParseFromString(e.value)) {
      spdlog::error("nodes table: skipping unreadable entry {}", store::Where(kNodesTable, e.key));
      continue;
    }
    // Heartbeat times are not persisted: give every alive node a full window to reconnect.
    if (info.state() == v1::NODE_ALIVE) info.set_last_heartbeat_unix_ms(now_ms);
    nodes_[*id] = std::move(info);
  }
  spdlog::info("recovered {} nodes from the store", nodes_.size());
  return absl::OkStatus();
}

absl::StatusOr<NodeId> NodeManager::Register(v1::NodeInfo info, bool* was_dead) {
  if (absl::Status s = ValidateNodeInfo(info); !s.ok()) return s;
  NodeId id = info.node_id().empty() ? NodeId::Random() : *NodeId::Parse(info.node_id());
  int64_t now_ms = absl::ToUnixMillis(clock_.Now());
  info.set_node_id(id.ToString());
  (*info.mutable_labels())[kNodeIdLabel] = id.ToString();
  info.set_state(v1::NODE_ALIVE);
  info.set_registered_unix_ms(now_ms);
  info.set_last_heartbeat_unix_ms(now_ms);
  info.clear_death_reason();
  absl::MutexLock events(&events_mu_);
  {
    absl::MutexLock lock(&mu_);
    auto known = nodes_.find(id);
    // Also when a registration since the death was made but not yet followed by a heartbeat:
    // its reply (with was_dead) may have been lost, and the worker is asking again.
    const bool dead = (known != nodes_.end() && known->second.state() == v1::NODE_DEAD) ||
                      unacknowledged_deaths_.contains(id);
    if (was_dead) *was_dead = dead;
    if (absl::Status s = Persist(info); !s.ok()) return s;
    if (dead) unacknowledged_deaths_.insert(id);
    spdlog::info(
        "node {} registered: {} resources {}", id.ToString(), info.hostname(),
        ResourceSet::FromMap({info.resources_total().begin(), info.resources_total().end()})->ToString());
    nodes_[id] = info;
  }
  if (listener_) listener_->OnNodeAlive(info);
  return id;
}

absl::Status NodeManager::Heartbeat(const NodeId& id, uint64_t known_peers_version, PeerList* peers) {
  absl::MutexLock lock(&mu_);
  auto it = nodes_.find(id);
  if (it == nodes_.end() || it->second.state() != v1::NODE_ALIVE)
    return absl::NotFoundError(absl::StrCat(
        "node ", id.ToString(), it == nodes_.end() ? " is unknown" : " is dead", ": register again"));
  it->second.set_last_heartbeat_unix_ms(absl::ToUnixMillis(clock_.Now()));
  // A heartbeat follows a registration whose reply the worker got: it knows of the death.
  unacknowledged_deaths_.erase(id);
  if (peers != nullptr) {
    peers->version = peers_version_;
    peers->changed = known_peers_version != peers_version_;
    peers->addresses.clear();
    if (peers->changed)
      for (const auto& [other, info] : nodes_)
        if (other != id && info.state() == v1::NODE_ALIVE) peers->addresses.push_back(info.address());
  }
  return absl::OkStatus();
}

absl::Status NodeManager::Unregister(const NodeId& id, absl::string_view reason) {
  absl::MutexLock events(&events_mu_);
  std::string why;
  {
    absl::MutexLock lock(&mu_);
    auto it = nodes_.find(id);
    if (it == nodes_.end()) return absl::NotFoundError(absl::StrCat("node ", id.ToString(), " is unknown"));
    if (it->second.state() == v1::NODE_DEAD) return absl::OkStatus();
    v1::NodeInfo updated = it->second;
    updated.set_state(v1::NODE_DEAD);
    updated.set_death_reason(absl::StrCat("node left: ", reason.substr(0, 512)));
    if (absl::Status s = Persist(updated); !s.ok()) return s;
    why = updated.death_reason();
    it->second = std::move(updated);
    spdlog::info("node {} unregistered: {}", id.ToString(), reason.substr(0, 512));
  }
  if (listener_) listener_->OnNodeDead(id, why);
  return absl::OkStatus();
}

std::vector<NodeId> NodeManager::CheckLiveness() {
  absl::MutexLock events(&events_mu_);
  std::vector<std::pair<NodeId, std::string>> died = CheckLivenessLocked();
  std::vector<NodeId> ids;
  for (const auto& [id, reason] : died) {
    if (listener_) listener_->OnNodeDead(id, reason);
    ids.push_back(id);
  }
  return ids;
}

std::vector<std::pair<NodeId, std::string>> NodeManager::CheckLivenessLocked() {
  std::vector<std::pair<NodeId, std::string>> died;
  absl::MutexLock lock(&mu_);
  absl::Time now = clock_.Now();
  absl::Duration limit = options_.heartbeat_period * options_.heartbeat_misses;
  if (options_.isolation_guard) {
    int alive = 0;
    bool heard = false;  // some ALIVE node within half the threshold
    for (const auto& [id, info] : nodes_) {
      if (info.state() != v1::NODE_ALIVE) continue;
      ++alive;
      heard = heard || now - absl::FromUnixMillis(info.last_heartbeat_unix_ms()) <= limit / 2;
    }
    if (alive >= 2 && !heard) {
      if (!isolated_)
        spdlog::warn(
            "liveness: no node heard for {}; this head may be cut off from them: declaring none dead "
            "until one is heard again",
            absl::FormatDuration(limit / 2));
      isolated_ = true;
      last_check_ = now;
      return died;
    }
    if (isolated_) {
      // A node is heard again. The silent ones may only now learn (from their peers) that the
      // head is back for others and fence their actors: a full window for that.
      spdlog::info("liveness: nodes heard again; every ALIVE node gets a fresh window");
      isolated_ = false;
      last_check_ = now;
      for (auto& [id, info] : nodes_)
        if (info.state() == v1::NODE_ALIVE) info.set_last_heartbeat_unix_ms(absl::ToUnixMillis(now));
      return died;
    }
  }
  std::optional<absl::Time> previous = last_check_;
  last_check_ = now;
  if (options_.stall_grace > absl::ZeroDuration() && previous && now - *previous > options_.stall_grace) {
    spdlog::warn("liveness: the head itself stalled for {}; giving every node a fresh window",
                 absl::FormatDuration(absl::Trunc(now - *previous, absl::Milliseconds(1))));
    for (auto& [id, info] : nodes_)
      if (info.state() == v1::NODE_ALIVE) info.set_last_heartbeat_unix_ms(absl::ToUnixMillis(now));
    return died;
  }
  for (auto& [id, info] : nodes_) {
    if (info.state() != v1::NODE_ALIVE) continue;
    absl::Duration silent = now - absl::FromUnixMillis(info.last_heartbeat_unix_ms());
    if (silent <= limit) continue;
    v1::NodeInfo updated = info;
    updated.set_state(v1::NODE_DEAD);
    updated.set_death_reason(absl::StrCat("node lost: no heartbeat for ",
                                          absl::FormatDuration(absl::Trunc(silent, absl::Milliseconds(1))),
                                          " (", options_.heartbeat_misses, " missed)"));
    // Keep the node alive in memory if the store refuses; the next check retries.
    if (absl::Status s = Persist(updated); !s.ok()) {
      spdlog::warn("node {}: cannot record death: {}", id.ToString(), s.message());
      continue;
    }
    spdlog::warn("node {} is dead: {}", id.ToString(), updated.death_reason());
    died.emplace_back(id, updated.death_reason());
    info = std::move(updated);
  }
  return died;
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
