#include "runtime/head/placement_group_manager.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "runtime/common/logging.h"

namespace skyrl::head {
namespace {

constexpr int kMaxBundles = 10000;

bool Live(v1::PlacementGroupState s) { return s != v1::PG_REMOVED; }

// The live-name index key of a named group ("" for an unnamed one).
std::string NameKey(const v1::PlacementGroupSpec& spec) {
  return spec.name().empty() ? std::string() : absl::StrCat(spec.namespace_(), "/", spec.name());
}

std::vector<std::optional<scheduler::Slot>> SlotsOf(const v1::PlacementGroupInfo& info) {
  std::vector<std::optional<scheduler::Slot>> out;
  for (const v1::BundlePlacement& b : info.bundles()) {
    if (b.node_id().empty()) {
      out.emplace_back();
    } else {
      out.push_back(scheduler::Slot{b.node_id(), {b.gpu_ids().begin(), b.gpu_ids().end()}});
    }
  }
  out.resize(info.spec().bundles_size());
  return out;
}

void SetSlots(v1::PlacementGroupInfo& info, const std::vector<scheduler::Slot>& slots) {
  info.clear_bundles();
  for (const scheduler::Slot& s : slots) {
    v1::BundlePlacement* b = info.add_bundles();
    b->set_node_id(s.node_id);
    for (int g : s.gpu_ids) b->add_gpu_ids(g);
  }
}

}  // namespace

absl::Status ValidatePlacementGroupSpec(v1::PlacementGroupSpec& spec) {
  if (spec.namespace_().empty()) spec.set_namespace_("default");
  if (absl::Status s = ValidateName("spec.namespace", spec.namespace_()); !s.ok()) return s;
  if (!spec.name().empty())
    if (absl::Status s = ValidateName("spec.name", spec.name()); !s.ok()) return s;
  if (spec.bundles_size() == 0)
    return absl::InvalidArgumentError("spec.bundles: a group needs at least one bundle");
  if (spec.bundles_size() > kMaxBundles)
    return absl::InvalidArgumentError(
        absl::StrCat("spec.bundles: at most ", kMaxBundles, ", got ", spec.bundles_size()));
  if (!v1::PlacementStrategy_IsValid(spec.strategy()))
    return absl::InvalidArgumentError(absl::StrCat("spec.strategy: unknown value ", int(spec.strategy())));
  for (int i = 0; i < spec.bundles_size(); ++i) {
    const v1::Bundle& b = spec.bundles(i);
    std::string field = absl::StrCat("spec.bundles[", i, "]");
    absl::StatusOr<ResourceSet> r = ResourceSet::FromMap({b.resources().begin(), b.resources().end()});
    if (!r.ok()) return absl::InvalidArgumentError(absl::StrCat(field, ".resources: ", r.status().message()));
    if (r->empty())
      return absl::InvalidArgumentError(absl::StrCat(field, ".resources: a bundle must ask for something"));
    if (absl::Status s =
            scheduler::ValidateDemand(field, scheduler::Demand{*r, ToLabels(b.label_selector())});
        !s.ok())
      return s;
  }
  if (!spec.domain_label().empty())
    if (absl::Status s = ValidateName("spec.domain_label", spec.domain_label()); !s.ok()) return s;
  if (!spec.job_id().empty())
    if (absl::Status s = ValidateName("spec.job_id", spec.job_id()); !s.ok()) return s;
  if (!spec.affinity_group_id().empty())
    if (auto id = PlacementGroupId::Parse(spec.affinity_group_id()); !id.ok())
      return absl::InvalidArgumentError(absl::StrCat("spec.affinity_group_id: ", id.status().message()));
  return absl::OkStatus();
}

PlacementGroupManager::PlacementGroupManager(store::Store& store, ResourceTracker& resources,
                                             ActorManager& actors, DemandQueue& demand, const Clock& clock,
                                             RetentionOptions retention)
    : store_(store),
      resources_(resources),
      actors_(actors),
      demand_(demand),
      clock_(clock),
      removed_(retention.keep_terminal) {}

PlacementGroupManager::~PlacementGroupManager() {
  demand_.Detach(this);  // no attempt of ours runs after this
  StopWaits();
  std::thread t;
  {
    absl::MutexLock lock(&mu_);
    t.swap(wait_thread_);
  }
  if (t.joinable()) t.join();
}

void PlacementGroupManager::Changed() {
  if (!waits_.empty()) waits_changed_.Signal();
}

absl::Status PlacementGroupManager::Persist(const v1::PlacementGroupInfo& info) {
  absl::Status s = store_.Put(kPlacementGroupsTable, info.placement_group_id(), info.SerializeAsString());
  if (!s.ok())
    spdlog::error("placement group {}: the store did not take its {} record: {}", info.placement_group_id(),
                  v1::PlacementGroupState_Name(info.state()), s.message());
  return s;
}

void PlacementGroupManager::Trim(std::vector<store::Write>* deletes) {
  while (removed_.OverCap()) {
    PlacementGroupId id = removed_.PopOldest();
    auto it = groups_.find(id);
    if (it == groups_.end() || Live(it->second.state())) continue;  // never a live one
    // A removed group is in neither waiting_ nor live_names_ (RemoveAsync took it out).
    // A failed delete leaves the record in the store only: the next head's Recover evicts it.
    if (deletes) {
      deletes->push_back(store::Write::Delete(kPlacementGroupsTable, id.ToString()));
    } else if (absl::StatusOr<bool> d = store_.Delete(kPlacementGroupsTable, id.ToString()); !d.ok()) {
      spdlog::warn("placement group {}: evicted, but the store kept it: {}", id.ToString(),
                   d.status().message());
    }
    groups_.erase(it);
  }
}

absl::Status PlacementGroupManager::Recover() {
  absl::StatusOr<std::vector<store::Entry>> entries = store_.Scan(kPlacementGroupsTable, "");
  if (!entries.ok()) return entries.status();
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<int64_t, PlacementGroupId>> removed;  // (removal time, id): the eviction order
  for (const store::Entry& e : *entries) {
    v1::PlacementGroupInfo info;
    absl::StatusOr<PlacementGroupId> id = PlacementGroupId::Parse(e.key);
    if (!id.ok() || !info.ParseFromString(e.value)) {
      spdlog::error("placement_groups table: skipping unreadable entry {}",
                    store::Where(kPlacementGroupsTable, e.key));
      continue;
    }
    if (info.state() == v1::PG_CREATED || info.state() == v1::PG_RESCHEDULING) {
      std::vector<std::optional<scheduler::Slot>> slots = SlotsOf(info);
      bool lost = false;
      absl::Status s = resources_.With([&](scheduler::Cluster& c) {
        for (auto& slot : slots)
          if (slot && !c.HasNode(slot->node_id)) slot.reset(), lost = true;
        return c.ReserveGroup(info.placement_group_id(), ToGroupRequest(info), slots);
      });
      if (!s.ok()) {
        spdlog::error("placement group {}: cannot reserve its bundles again: {}", e.key, s.message());
      } else if (lost) {
        for (int i = 0; i < info.bundles_size(); ++i)
          if (!slots[i]) info.mutable_bundles(i)->Clear();
        info.set_state(v1::PG_RESCHEDULING);
        info.set_pending_reason("node lost while the head was down");
        Persist(info);
      }
    }
    if (info.state() == v1::PG_PENDING || info.state() == v1::PG_RESCHEDULING) Queue(*id);
    if (std::string key = NameKey(info.spec()); !key.empty() && Live(info.state())) live_names_[key] = *id;
    if (!Live(info.state()))
      removed.emplace_back(info.removed_unix_ms() != 0 ? info.removed_unix_ms() : info.created_unix_ms(),
                           *id);
    groups_[*id] = std::move(info);
  }
  removed_.PushInOrder(std::move(removed));
  std::vector<store::Write> deletes;
  Trim(&deletes);
  if (absl::Status s = ApplyEvictions(store_, deletes); !s.ok())
    spdlog::warn(
        "placement_groups table: {} REMOVED groups over --keep-terminal evicted, but the store kept some: {}",
        deletes.size(), s.message());
  spdlog::info("recovered {} placement groups from the store ({} REMOVED kept up to {})", groups_.size(),
               removed_.size(), removed_.keep());
  return absl::OkStatus();
}

absl::StatusOr<v1::PlacementGroupInfo> PlacementGroupManager::Create(v1::PlacementGroupSpec spec) {
  if (absl::Status s = ValidatePlacementGroupSpec(spec); !s.ok()) return s;
  PlacementGroupId id = PlacementGroupId::Random();
  absl::MutexLock lock(&mu_);
  const std::string name_key = NameKey(spec);
  if (!name_key.empty())
    if (auto other = live_names_.find(name_key); other != live_names_.end())
      return absl::AlreadyExistsError(absl::StrCat("a placement group named ", spec.namespace_(), "/",
                                                   spec.name(),
                                                   " already exists: ", other->second.ToString()));
  v1::PlacementGroupInfo info;
  info.set_placement_group_id(id.ToString());
  *info.mutable_spec() = std::move(spec);
  info.set_created_unix_ms(absl::ToUnixMillis(clock_.Now()));
  scheduler::GroupRequest request = ToGroupRequest(info);
  absl::StatusOr<std::vector<scheduler::Slot>> slots = resources_.With([&](scheduler::Cluster& c) {
    absl::StatusOr<std::vector<scheduler::Slot>> planned = c.PlanGroup(request);
    if (planned.ok()) {
      std::vector<std::optional<scheduler::Slot>> opt(planned->begin(), planned->end());
      if (absl::Status s = c.ReserveGroup(info.placement_group_id(), request, opt); !s.ok())
        return absl::StatusOr<std::vector<scheduler::Slot>>(
            absl::InternalError(absl::StrCat("planned placement refused: ", s.message())));
    }
    return planned;
  });
  if (slots.ok()) {
    info.set_state(v1::PG_CREATED);
    SetSlots(info, *slots);
  } else if (absl::IsUnavailable(slots.status()) ||
             (absl::IsResourceExhausted(slots.status()) && info.spec().wait_for_nodes())) {
    info.set_state(v1::PG_PENDING);
    info.set_pending_reason(std::string(slots.status().message()));
    for (int i = 0; i < info.spec().bundles_size(); ++i) info.add_bundles();
  } else {
    return slots.status();  // nothing stored
  }
  if (absl::Status s = Persist(info); !s.ok()) {
    if (slots.ok()) resources_.With([&](scheduler::Cluster& c) { c.RemoveGroup(info.placement_group_id()); });
    return s;
  }
  // A created group is routine (thousands a second in busy clusters): debug. A pending one
  // says why, for operators: info.
  spdlog::log(info.state() == v1::PG_PENDING ? spdlog::level::info : spdlog::level::debug,
              "placement group {} ({}) {}{}", info.placement_group_id(), info.spec().name(),
              v1::PlacementGroupState_Name(info.state()),
              info.pending_reason().empty() ? "" : absl::StrCat(": ", info.pending_reason()));
  if (!name_key.empty()) live_names_[name_key] = id;
  groups_[id] = info;
  if (info.state() == v1::PG_PENDING) Queue(id);
  Changed();
  return info;
}

bool PlacementGroupManager::TryPlace(v1::PlacementGroupInfo& info) {
  scheduler::GroupRequest request = ToGroupRequest(info);
  const std::string gid = info.placement_group_id();
  absl::StatusOr<std::vector<scheduler::Slot>> slots = resources_.With([&](scheduler::Cluster& c) {
    absl::StatusOr<std::vector<scheduler::Slot>> planned;
    absl::Status s;
    if (info.state() == v1::PG_PENDING) {
      planned = c.PlanGroup(request);
      if (planned.ok()) s = c.ReserveGroup(gid, request, {planned->begin(), planned->end()});
    } else {
      absl::StatusOr<std::vector<std::optional<scheduler::Slot>>> placed = c.GroupSlots(gid);
      if (!placed.ok()) return absl::StatusOr<std::vector<scheduler::Slot>>(placed.status());
      planned = c.PlanGroup(request, *placed);
      if (planned.ok()) s = c.PlaceBundles(gid, *planned);
    }
    if (!s.ok()) return absl::StatusOr<std::vector<scheduler::Slot>>(s);
    return planned;
  });
  if (!slots.ok()) {
    if (info.pending_reason() == slots.status().message()) return false;
    info.set_pending_reason(std::string(slots.status().message()));
    Persist(info);
    return true;
  }
  v1::PlacementGroupInfo placed = info;
  placed.set_state(v1::PG_CREATED);
  placed.clear_pending_reason();
  SetSlots(placed, *slots);
  if (absl::Status s = Persist(placed); !s.ok()) {
    // Not recorded, so not reserved either: a new group gives its bundles back and waits.
    // (A RESCHEDULING group keeps the new bundles in memory; the store catches up with the
    // next successful write of this group.)
    spdlog::warn("placement group {}: placed, but the store refused: {}", gid, s.message());
    if (info.state() == v1::PG_PENDING) {
      resources_.With([&](scheduler::Cluster& c) { c.RemoveGroup(gid); });
      return false;
    }
  }
  info = std::move(placed);
  spdlog::info("placement group {} ({}) CREATED", gid, info.spec().name());
  return true;
}

void PlacementGroupManager::Queue(const PlacementGroupId& id) {
  if (!waiting_.insert(id).second) return;  // already queued
  demand_.Push(this, absl::StrCat("group;", id.ToString()), [this, id] { return TryPlaceQueued(id); });
}

DemandQueue::Outcome PlacementGroupManager::TryPlaceQueued(const PlacementGroupId& id) {
  absl::MutexLock lock(&mu_);
  if (!waiting_.contains(id)) return DemandQueue::Outcome::kGone;  // placed or removed meanwhile
  v1::PlacementGroupInfo& g = groups_.at(id);
  const bool changed = TryPlace(g);
  if (changed) Changed();
  if (g.state() != v1::PG_CREATED) return DemandQueue::Outcome::kWaiting;
  waiting_.erase(id);
  demand_.Kick();  // actors waiting for this group
  return DemandQueue::Outcome::kPlaced;
}

bool PlacementGroupManager::IsWaiting(const std::string& group_id) const {
  absl::StatusOr<PlacementGroupId> id = PlacementGroupId::Parse(group_id);
  if (!id.ok()) return false;
  absl::MutexLock lock(&mu_);
  return waiting_.contains(*id);
}

void PlacementGroupManager::RetryPending() {
  demand_.Kick();  // the actors waiting, and this again on the queue's thread
  absl::MutexLock lock(&mu_);
  std::vector<v1::PlacementGroupInfo*> waiting;
  for (const PlacementGroupId& id : waiting_) waiting.push_back(&groups_.at(id));
  std::sort(waiting.begin(), waiting.end(), [](const auto* a, const auto* b) {
    return a->created_unix_ms() != b->created_unix_ms() ? a->created_unix_ms() < b->created_unix_ms()
                                                        : a->placement_group_id() < b->placement_group_id();
  });
  bool any = false;
  for (v1::PlacementGroupInfo* g : waiting) {
    any |= TryPlace(*g);
    if (g->state() == v1::PG_CREATED) waiting_.erase(*PlacementGroupId::Parse(g->placement_group_id()));
  }
  if (any) Changed();
  // (A group placed here leaves its queue entry to find it placed: kGone.)
}

void PlacementGroupManager::OnBundlesLost(const std::vector<std::pair<std::string, int>>& bundles,
                                          const std::string& reason) {
  if (bundles.empty()) return;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [gid, index] : bundles) {
      absl::StatusOr<PlacementGroupId> id = PlacementGroupId::Parse(gid);
      if (!id.ok()) continue;
      auto it = groups_.find(*id);
      if (it == groups_.end() || !Live(it->second.state())) continue;
      v1::PlacementGroupInfo& g = it->second;
      if (index < g.bundles_size()) g.mutable_bundles(index)->Clear();
      g.set_state(v1::PG_RESCHEDULING);
      Queue(*id);
      g.set_pending_reason(absl::StrCat("bundle(s) lost with their node: ", reason));
      Persist(g);
      spdlog::warn("placement group {}: bundle {} lost: {}", gid, index, reason);
    }
    Changed();
  }
  RetryPending();
}

std::optional<absl::StatusOr<v1::PlacementGroupInfo>> PlacementGroupManager::WaitOutcome(
    const PlacementGroupId& id, bool expired) const {
  auto it = groups_.find(id);
  if (it == groups_.end()) return absl::NotFoundError(absl::StrCat("no placement group ", id.ToString()));
  const v1::PlacementGroupInfo& g = it->second;
  if (g.state() == v1::PG_CREATED) return g;
  if (g.state() == v1::PG_REMOVED)
    return absl::FailedPreconditionError(absl::StrCat("placement group ", id.ToString(), " was removed"));
  if (expired)
    return absl::DeadlineExceededError(absl::StrCat("placement group ", id.ToString(), " is ",
                                                    v1::PlacementGroupState_Name(g.state()).substr(3), ": ",
                                                    g.pending_reason()));
  return std::nullopt;
}

void PlacementGroupManager::WaitAsync(const PlacementGroupId& id, absl::Duration timeout, GroupDone done) {
  absl::Time deadline = absl::Now() + timeout;
  std::optional<absl::StatusOr<v1::PlacementGroupInfo>> now;
  {
    absl::MutexLock lock(&mu_);
    if (waits_stopped_) {
      now = absl::UnavailableError("the head is stopping");
    } else {
      now = WaitOutcome(id, absl::Now() >= deadline);
    }
    if (!now) {
      waits_.push_back(OpenWait{id, deadline, std::move(done)});
      if (!wait_thread_.joinable()) wait_thread_ = std::thread([this] { ServeWaits(); });
      waits_changed_.Signal();  // the thread may sleep until a later deadline
      return;
    }
  }
  done(std::move(*now));
}

void PlacementGroupManager::ServeWaits() {
  mu_.Lock();
  while (true) {
    std::vector<std::pair<GroupDone, absl::StatusOr<v1::PlacementGroupInfo>>> settled;
    absl::Time now = absl::Now(), next = absl::InfiniteFuture();
    for (auto it = waits_.begin(); it != waits_.end();) {
      std::optional<absl::StatusOr<v1::PlacementGroupInfo>> out =
          waits_stopped_ ? absl::UnavailableError("the head is stopping")
                         : WaitOutcome(it->id, now >= it->deadline);
      if (out) {
        settled.emplace_back(std::move(it->done), std::move(*out));
        it = waits_.erase(it);
      } else {
        next = std::min(next, it->deadline);
        ++it;
      }
    }
    if (!settled.empty()) {
      mu_.Unlock();  // completions finish RPCs: never under this manager's lock
      for (auto& [done, out] : settled) done(std::move(out));
      mu_.Lock();
      continue;
    }
    if (waits_stopped_) break;
    waits_changed_.WaitWithDeadline(&mu_, next);
  }
  mu_.Unlock();
}

void PlacementGroupManager::StopWaits() {
  absl::MutexLock lock(&mu_);
  waits_stopped_ = true;
  waits_changed_.Signal();
}

absl::Status PlacementGroupManager::Remove(const PlacementGroupId& id) {
  absl::Status out;
  absl::Notification done;
  RemoveAsync(id, [&](absl::Status s) {
    out = std::move(s);
    done.Notify();
  });
  done.WaitForNotification();
  return out;
}

void PlacementGroupManager::RemoveAsync(const PlacementGroupId& id, StatusDone done) {
  {
    absl::MutexLock lock(&mu_);
    auto it = groups_.find(id);
    if (it == groups_.end())
      return done(absl::NotFoundError(absl::StrCat("no placement group ", id.ToString())));
    v1::PlacementGroupInfo& g = it->second;
    if (g.state() == v1::PG_REMOVED) return done(absl::OkStatus());
    // Changed in place (no copy of the group) and put back when the store refuses.
    v1::PlacementGroupState was = g.state();
    std::string reason = std::move(*g.mutable_pending_reason());
    g.set_state(v1::PG_REMOVED);
    g.clear_pending_reason();
    g.set_removed_unix_ms(absl::ToUnixMillis(clock_.Now()));
    if (absl::Status s = Persist(g); !s.ok()) {
      g.set_state(was);
      g.set_pending_reason(std::move(reason));
      g.clear_removed_unix_ms();
      return done(s);
    }
    waiting_.erase(id);
    if (auto name = live_names_.find(NameKey(g.spec())); name != live_names_.end() && name->second == id)
      live_names_.erase(name);
    resources_.With([&](scheduler::Cluster& c) { c.RemoveGroup(id.ToString()); });
    Changed();
    spdlog::debug("placement group {} removed", id.ToString());
    removed_.Push(id);
    Trim();  // `g` is not used from here on
  }
  actors_.KillGroupAsync(id.ToString(), absl::StrCat("placement group ", id.ToString(), " was removed"),
                         [this, done = std::move(done)] {
                           RetryPending();  // its resources may be what a pending group waits for
                           done(absl::OkStatus());
                         });
}

void PlacementGroupManager::RemoveJobGroups(const std::string& job_id) {
  if (job_id.empty()) return;
  std::vector<PlacementGroupId> ids;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, g] : groups_)
      if (Live(g.state()) && g.spec().job_id() == job_id && !g.spec().detached()) ids.push_back(id);
  }
  for (const PlacementGroupId& id : ids)
    if (absl::Status s = Remove(id); !s.ok())
      spdlog::warn("placement group {} of job {}: cannot remove: {}", id.ToString(), job_id, s.message());
}

absl::StatusOr<v1::PlacementGroupInfo> PlacementGroupManager::Get(const PlacementGroupId& id) const {
  absl::MutexLock lock(&mu_);
  auto it = groups_.find(id);
  if (it == groups_.end()) return absl::NotFoundError(absl::StrCat("no placement group ", id.ToString()));
  return it->second;
}

absl::StatusOr<v1::PlacementGroupInfo> PlacementGroupManager::GetByName(absl::string_view ns,
                                                                        absl::string_view name) const {
  std::string space = ns.empty() ? "default" : std::string(ns);
  absl::MutexLock lock(&mu_);
  for (const auto& [id, g] : groups_)
    if (Live(g.state()) && g.spec().name() == name && g.spec().namespace_() == space) return g;
  return absl::NotFoundError(absl::StrCat("no placement group named ", space, "/", name));
}

std::vector<v1::PlacementGroupInfo> PlacementGroupManager::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::PlacementGroupInfo> out;
  for (const auto& [id, g] : groups_) out.push_back(g);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.created_unix_ms() != b.created_unix_ms() ? a.created_unix_ms() < b.created_unix_ms()
                                                      : a.placement_group_id() < b.placement_group_id();
  });
  return out;
}

}  // namespace skyrl::head
