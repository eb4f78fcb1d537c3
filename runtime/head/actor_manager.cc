#include "runtime/head/actor_manager.h"

#include <algorithm>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "runtime/common/logging.h"
#include "runtime/common/resources.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"
#include "runtime/rpc/status.h"

namespace skyrl::head {
namespace {

bool Holds(v1::ActorState s) { return s == v1::ACTOR_PENDING || s == v1::ACTOR_ALIVE; }

// The live-name index key of a named actor ("" for an unnamed one). The namespace is set by
// validation ("default" when empty) before an actor is admitted or stored.
std::string NameKey(const v1::ActorSpec& spec) {
  return spec.name().empty() ? std::string() : absl::StrCat(spec.namespace_(), "/", spec.name());
}

constexpr int kMaxFallbackSelectors = 16;

// What placing the actor asks of a node or bundle: its resources, raised to its placement
// resources name by name, on nodes with `labels` (its label selector, or a fallback one).
scheduler::Demand DemandOf(const v1::ActorSpec& spec,
                           const google::protobuf::Map<std::string, std::string>& labels) {
  std::map<std::string, double> need(spec.resources().begin(), spec.resources().end());
  for (const auto& [name, amount] : spec.placement_resources()) need[name] = std::max(need[name], amount);
  return scheduler::Demand{ToResources(google::protobuf::Map<std::string, double>(need.begin(), need.end())),
                           ToLabels(labels)};
}

scheduler::Demand DemandOf(const v1::ActorSpec& spec) { return DemandOf(spec, spec.label_selector()); }

template <typename V>
void AppendSorted(std::string& out, const google::protobuf::Map<std::string, V>& m) {
  std::vector<std::pair<std::string, V>> items(m.begin(), m.end());
  std::sort(items.begin(), items.end());
  for (const auto& [k, v] : items) absl::StrAppend(&out, k, "=", v, ",");
  out += ";";
}

// The demand queue's shape of an actor: what it asks for and where. Actors of one shape fit
// exactly where each other fit.
std::string ShapeOf(const v1::ActorSpec& spec) {
  std::string out = "actor;";
  AppendSorted(out, spec.resources());
  AppendSorted(out, spec.placement_resources());
  AppendSorted(out, spec.label_selector());
  for (const auto& f : spec.fallback_label_selectors()) AppendSorted(out, f.labels());
  absl::StrAppend(&out, "|", spec.placement_group_id(), "|",
                  spec.has_bundle_index() ? spec.bundle_index() : -1);
  return out;
}

// Waits in the demand queue: RESTARTING, or PENDING with no node (a creation waiting for room).
bool Waiting(const v1::ActorInfo& a) {
  return a.state() == v1::ACTOR_RESTARTING || (a.state() == v1::ACTOR_PENDING && a.node_id().empty());
}

absl::Status ValidateSpec(v1::ActorSpec& spec) {
  if (absl::Status s = ValidateName("spec.class_name", spec.class_name()); !s.ok()) return s;
  if (spec.namespace_().empty()) spec.set_namespace_("default");
  if (absl::Status s = ValidateName("spec.namespace", spec.namespace_()); !s.ok()) return s;
  if (!spec.name().empty())
    if (absl::Status s = ValidateName("spec.name", spec.name()); !s.ok()) return s;
  absl::StatusOr<ResourceSet> r = ResourceSet::FromMap({spec.resources().begin(), spec.resources().end()});
  if (!r.ok()) return absl::InvalidArgumentError(absl::StrCat("spec.resources: ", r.status().message()));
  if (absl::StatusOr<ResourceSet> p =
          ResourceSet::FromMap({spec.placement_resources().begin(), spec.placement_resources().end()});
      !p.ok())
    return absl::InvalidArgumentError(absl::StrCat("spec.placement_resources: ", p.status().message()));
  if (absl::Status s =
          scheduler::ValidateDemand("spec", scheduler::Demand{*r, ToLabels(spec.label_selector())});
      !s.ok())
    return s;
  if (!spec.placement_resources().empty())
    if (absl::Status s = scheduler::ValidateDemand("spec.placement_resources", DemandOf(spec)); !s.ok())
      return s;
  if (spec.fallback_label_selectors_size() > kMaxFallbackSelectors)
    return absl::InvalidArgumentError(
        absl::StrCat("spec.fallback_label_selectors: ", spec.fallback_label_selectors_size(),
                     " selectors (at most ", kMaxFallbackSelectors, ")"));
  for (int i = 0; i < spec.fallback_label_selectors_size(); ++i)
    if (absl::Status s = scheduler::ValidateDemand(absl::StrCat("spec.fallback_label_selectors[", i, "]"),
                                                   DemandOf(spec, spec.fallback_label_selectors(i).labels()));
        !s.ok())
      return s;
  if (!spec.placement_group_id().empty())
    if (auto pg = PlacementGroupId::Parse(spec.placement_group_id()); !pg.ok())
      return absl::InvalidArgumentError(absl::StrCat("spec.placement_group_id: ", pg.status().message()));
  // A job id (a submission id: a name) reaches the actor's process as SKYRL_JOB_ID.
  if (!spec.job_id().empty())
    if (absl::Status s = ValidateName("spec.job_id", spec.job_id()); !s.ok()) return s;
  if (absl::Status s = ValidateHostFlavour("spec.host", spec.host()); !s.ok()) return s;
  if (spec.env_size() > 256) return absl::InvalidArgumentError("spec.env: at most 256 variables");
  for (const auto& [k, v] : spec.env())
    if (absl::Status s = ValidateActorEnvVar("spec.env", k, v); !s.ok()) return s;
  if (!spec.working_dir().empty())
    if (absl::Status s = ValidateWorkingDirDigest("spec.working_dir", spec.working_dir()); !s.ok()) return s;
  if (spec.has_bundle_index() && spec.placement_group_id().empty())
    return absl::InvalidArgumentError("spec.bundle_index: needs spec.placement_group_id");
  if (spec.has_bundle_index() && spec.bundle_index() < 0)
    return absl::InvalidArgumentError("spec.bundle_index: must be 0 or more");
  if (spec.max_restarts() < -1)
    return absl::InvalidArgumentError("spec.max_restarts: must be -1 (unlimited) or more");
  // Up to 100,000: a host starts executor threads as calls need them (an async Python actor,
  // 1,000 by default as in Ray, waits on its event loop).
  if (spec.max_concurrency() < 0 || spec.max_concurrency() > 100000)
    return absl::InvalidArgumentError("spec.max_concurrency: must be in 0-100000");
  if (spec.max_pending_calls() < 0)
    return absl::InvalidArgumentError("spec.max_pending_calls: must be 0 (no limit) or more");
  return absl::OkStatus();
}

}  // namespace

ActorManager::ActorManager(store::Store& store, NodeManager& nodes, ResourceTracker& resources,
                           WorkerClient& workers, DemandQueue& demand, EventLoop& loop, const Clock& clock,
                           RetentionOptions retention)
    : store_(store),
      nodes_(nodes),
      resources_(resources),
      workers_(workers),
      demand_(demand),
      loop_(loop),
      clock_(clock),
      dead_(retention.keep_terminal) {
  stops_.SetOnReported([this](const NodeId& node, const ActorStart& start) { OnStopReported(node, start); });
}

ActorManager::~ActorManager() { Stop(); }

void ActorManager::Stop() {
  loop_.AssertOffLoop("ActorManager::Stop");
  loop_.Run([this] {
    loop_.AssertOnLoop();
    stopping_ = true;
  });
  demand_.Detach(this);  // no attempt of ours runs after this
  loop_.Drain();         // starts and kills in flight have answered, and their answers run
}

template <typename F>
std::invoke_result_t<F> ActorManager::OnLoop(F&& fn) {
  // Inside a task of ours: that task trims when it ends.
  if (loop_.OnLoop() && in_task_) return fn();
  return loop_.Run([&]() -> std::invoke_result_t<F> {
    loop_.AssertOnLoop();
    in_task_ = true;
    absl::Cleanup trim = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      in_task_ = false;
      Trim();
    };
    return fn();
  });
}

EventLoop::Task ActorManager::Trimming(std::function<void()> task) {
  return [this, task = std::move(task)]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    in_task_ = true;
    task();
    in_task_ = false;
    Trim();
  };
}

void ActorManager::PostTask(std::function<void()> task) { loop_.Post(Trimming(std::move(task))); }

void ActorManager::DispatchTask(std::function<void()> task) { loop_.Dispatch(Trimming(std::move(task))); }

template <typename Answer>
std::function<void(Answer)> ActorManager::AnswerOnLoop(std::function<void(Answer)> fn) {
  auto hold = std::make_shared<EventLoop::Hold>(loop_.Acquire());
  return [this, hold, fn = std::move(fn)](Answer answer) {
    PostTask([hold, fn, answer = std::move(answer)]() mutable { fn(std::move(answer)); });
  };
}

absl::Status ActorManager::Persist(const v1::ActorInfo& info) {
  absl::Status s = store_.Put(kActorsTable, info.actor_id(), info.SerializeAsString());
  if (!s.ok())
    spdlog::error("actor {}: the store did not take its {} record: {}", info.actor_id(),
                  v1::ActorState_Name(info.state()), s.message());
  return s;
}

const char* ActorManager::DeathCauseName(DeathCause cause) {
  switch (cause) {
    case DeathCause::kKilled:
      return "killed";
    case DeathCause::kExited:
      return "exited";
    case DeathCause::kNodeLost:
      return "node_lost";
    case DeathCause::kStartFailed:
      return "start_failed";
    case DeathCause::kUnplaceable:
      return "unplaceable";
  }
  return "unknown";
}

ActorManager::LifeCounts ActorManager::Counts() const {
  return loop_.Run([this] {
    loop_.AssertOnLoop();
    LifeCounts out;
    out.restarts = restarts_total_;
    for (int c = 0; c < kDeathCauses; ++c)
      out.deaths[DeathCauseName(static_cast<DeathCause>(c))] = deaths_[c];
    return out;
  });
}

absl::Status ActorManager::Transition(const ActorId& id, v1::ActorInfo& a, v1::ActorState to,
                                      std::string reason, DeathCause cause) {
  if (a.state() == v1::ACTOR_DEAD) return absl::OkStatus();  // final
  if (Holds(a.state()) && !Holds(to)) Release(id);
  if (to == v1::ACTOR_DEAD || to == v1::ACTOR_RESTARTING) a.clear_address();
  if (to == v1::ACTOR_RESTARTING) a.clear_node_id();
  if (to == v1::ACTOR_DEAD) {
    ++deaths_[static_cast<int>(cause)];
    a.set_died_unix_ms(absl::ToUnixMillis(clock_.Now()));
    if (auto name = live_names_.find(NameKey(a.spec())); name != live_names_.end() && name->second == id)
      live_names_.erase(name);
    dead_.Push(id);
  }
  a.set_state(to);
  if (!reason.empty()) a.set_death_reason(std::move(reason));
  return Persist(a);
}

void ActorManager::Trim(std::vector<store::Write>* deletes) {
  while (dead_.OverCap()) {
    ActorId id = dead_.PopOldest();
    auto it = actors_.find(id);
    if (it == actors_.end() || it->second.state() != v1::ACTOR_DEAD) continue;  // never a live one
    if (const std::string& group = it->second.spec().placement_group_id(); !group.empty())
      if (auto members = by_group_.find(group); members != by_group_.end()) {
        members->second.erase(id);
        if (members->second.empty()) by_group_.erase(members);
      }
    exited_while_starting_.erase(id);
    // A failed delete leaves the record in the store only: the next head's Recover evicts it.
    if (deletes) {
      deletes->push_back(store::Write::Delete(kActorsTable, id.ToString()));
    } else if (absl::StatusOr<bool> d = store_.Delete(kActorsTable, id.ToString()); !d.ok()) {
      spdlog::warn("actor {}: evicted, but the store kept it: {}", id.ToString(), d.status().message());
    }
    actors_.erase(it);
  }
}

absl::Status ActorManager::Recover() {
  absl::StatusOr<std::vector<store::Entry>> entries = store_.Scan(kActorsTable, "");
  if (!entries.ok()) return entries.status();
  // Nodes gone for good before the restart take no stop requests (their actors are stopped).
  for (const v1::NodeInfo& node : nodes_.List())
    if (node.state() == v1::NODE_DEAD && !node.death_unconfirmed())
      if (absl::StatusOr<NodeId> n = NodeId::Parse(node.node_id()); n.ok()) stops_.NodeGone(*n);
  return OnLoop([&] {
    loop_.AssertOnLoop();
    return RecoverTable(*entries);
  });
}

absl::Status ActorManager::RecoverTable(const std::vector<store::Entry>& entries) {
  std::vector<std::pair<int64_t, ActorId>> dead;  // (died_unix_ms, id): the eviction order
  for (const auto& e : entries) {
    v1::ActorInfo info;
    absl::StatusOr<ActorId> id = ActorId::Parse(e.key);
    if (!id.ok() || !info.ParseFromString(e.value)) {
      spdlog::error("actors table: skipping unreadable entry {}", store::Where(kActorsTable, e.key));
      continue;
    }
    if (Holds(info.state())) {
      // Its resources are still in use on its node: take them again before anything new is placed.
      absl::Status s = resources_.With([&](scheduler::Cluster& c) {
        if (!c.HasNode(info.node_id())) return absl::OkStatus();  // the liveness check will handle it
        return c.AllocateActor(
            info.actor_id(), ToResources(info.spec().resources()),
            scheduler::Slot{info.node_id(), {info.gpu_ids().begin(), info.gpu_ids().end()}},
            info.spec().placement_group_id(),
            info.spec().placement_group_id().empty() ? -1 : info.bundle_index());
      });
      if (!s.ok())
        spdlog::error("actor {}: cannot take its resources back: {}", info.actor_id(), s.message());
    }
    if (!info.spec().placement_group_id().empty()) by_group_[info.spec().placement_group_id()].insert(*id);
    if (info.state() == v1::ACTOR_DEAD) {
      dead.emplace_back(info.died_unix_ms(), *id);
    } else if (std::string key = NameKey(info.spec()); !key.empty()) {
      // Two live records of one name can only come from a store that missed a death (a kill
      // whose write failed): keep the first, say so; the other stays reachable by id.
      if (auto [it, fresh] = live_names_.emplace(key, *id); !fresh)
        spdlog::error("actors table: {} and {} are both live under the name {}; the name resolves to {}",
                      it->second.ToString(), id->ToString(), key, it->second.ToString());
    }
    actors_[*id] = std::move(info);
  }
  // Old records without died_unix_ms (0) go first.
  dead_.PushInOrder(std::move(dead));
  std::vector<store::Write> deletes;
  Trim(&deletes);
  if (absl::Status s = ApplyEvictions(store_, deletes); !s.ok())
    spdlog::warn("actors table: {} DEAD actors over --keep-terminal evicted, but the store kept some: {}",
                 deletes.size(), s.message());
  // Resume what the previous head left half done.
  int resumed = 0;
  for (auto& [id, a] : actors_) {
    if (Waiting(a)) {
      StartRestart(id, std::nullopt);
      ++resumed;
    } else if (a.state() == v1::ACTOR_PENDING) {
      // Its start's outcome died with the previous head: stop whatever started, place it again.
      ProcessAt started{a.node_id(), id, a.incarnation()};
      Transition(id, a, v1::ACTOR_RESTARTING, "its start was interrupted by a head restart");
      StartRestart(id, started.node_id.empty() ? std::nullopt : std::optional(started));
      ++resumed;
    } else if (a.state() == v1::ACTOR_ALIVE && WorkerAddress(a.node_id()).empty() &&
               !nodes_.DeathUnconfirmed(a.node_id())) {
      // (A node whose death is unconfirmed keeps its actors until it is: OnNodeDead.)
      HandleDeath(id, absl::StrCat("node lost while the head was down: ", a.node_id()),
                  DeathCause::kNodeLost);
      ++resumed;
    }
  }
  spdlog::info("recovered {} actors from the store ({} restarts resumed, {} DEAD kept up to {})",
               actors_.size(), resumed, std::min(dead_.size(), dead_.keep()), dead_.keep());
  return absl::OkStatus();
}

absl::StatusOr<ActorManager::Placement> ActorManager::Place(const ActorId& id, const v1::ActorSpec& spec) {
  absl::flat_hash_set<std::string> avoid;
  // (A few tries: each passes over one more node that died after the scheduler placed it there.)
  for (int tries = 0;; ++tries) {
    absl::StatusOr<scheduler::Slot> slot = PlanAndTake(id, spec, avoid);
    if (!slot.ok()) return slot.status();
    std::string address = WorkerAddress(slot->node_id);
    if (!address.empty()) return Placement{*std::move(slot), std::move(address)};
    Release(id, /*kick=*/false);
    if (!spec.placement_group_id().empty() || tries == 8)  // a bundle stays on its node: wait for it to move
      return absl::UnavailableError(
          absl::StrCat("node ", slot->node_id, " is not alive (leaving the cluster)"));
    avoid.insert(slot->node_id);
  }
}

absl::StatusOr<scheduler::Slot> ActorManager::PlanAndTake(const ActorId& id, const v1::ActorSpec& spec,
                                                          const absl::flat_hash_set<std::string>& avoid) {
  scheduler::Demand demand = DemandOf(spec);
  std::optional<int> bundle;
  if (spec.has_bundle_index()) bundle = spec.bundle_index();
  return resources_.With([&](scheduler::Cluster& c) -> absl::StatusOr<scheduler::Slot> {
    if (!spec.placement_group_id().empty() && !c.HasGroup(spec.placement_group_id()))
      return absl::FailedPreconditionError(
          absl::StrCat("spec.placement_group_id: ", spec.placement_group_id(),
                       " is not placed (unknown, still PENDING, or removed); wait until it is CREATED"));
    absl::StatusOr<scheduler::Slot> slot = c.PlanActor(demand, spec.placement_group_id(), bundle, &avoid);
    // Ray's fallback_strategy: the first fallback selector with room. With none, the primary's
    // error, unless only a fallback could ever fit: then that one's (it may wait for room).
    for (int i = 0; !slot.ok() && i < spec.fallback_label_selectors_size(); ++i) {
      absl::StatusOr<scheduler::Slot> other =
          c.PlanActor(DemandOf(spec, spec.fallback_label_selectors(i).labels()), spec.placement_group_id(),
                      bundle, &avoid);
      if (other.ok() || (absl::IsUnavailable(other.status()) && !absl::IsUnavailable(slot.status())))
        slot = std::move(other);
    }
    if (!slot.ok()) return slot.status();
    if (absl::Status s = c.AllocateActor(id.ToString(), ToResources(spec.resources()), *slot,
                                         spec.placement_group_id(), slot->bundle);
        !s.ok())
      return absl::InternalError(absl::StrCat("planned slot refused: ", s.message()));
    return slot;
  });
}

void ActorManager::Release(const ActorId& id, bool kick) {
  resources_.With([&](scheduler::Cluster& c) { c.ReleaseActor(id.ToString()); });
  if (kick) demand_.Kick();
}

void ActorManager::SetGroupWaiting(std::function<bool(const std::string&)> waiting) {
  group_waiting_ = std::move(waiting);
}

std::string ActorManager::WorkerAddress(const std::string& node_id) const {
  std::optional<v1::NodeInfo> n = nodes_.Find(node_id);
  return n && n->state() == v1::NODE_ALIVE ? n->address() : "";
}

ActorManager::StartTicket ActorManager::MarkPending(const ActorId& id, v1::ActorInfo& a,
                                                    const scheduler::Slot& slot, const std::string& address) {
  a.set_state(v1::ACTOR_PENDING);
  a.set_node_id(slot.node_id);
  a.clear_gpu_ids();
  for (int g : slot.gpu_ids) a.add_gpu_ids(g);
  a.set_bundle_index(slot.bundle < 0 ? 0 : slot.bundle);
  a.clear_address();
  a.clear_pending_reason();
  StartTicket t;
  t.worker_address = address;
  t.node_id = a.node_id();
  a.set_incarnation(a.incarnation() + 1);
  t.incarnation = a.incarnation();
  v1::StartActorRequest& req = t.request;
  req.set_actor_id(id.ToString());
  *req.mutable_spec() = a.spec();
  *req.mutable_gpu_ids() = a.gpu_ids();
  req.set_node_id(a.node_id());
  req.set_incarnation(t.incarnation);
  return t;
}

bool ActorManager::GroupWaiting(const v1::ActorSpec& spec) const {
  return !spec.placement_group_id().empty() && group_waiting_ && group_waiting_(spec.placement_group_id());
}

absl::StatusOr<std::variant<v1::ActorInfo, ActorManager::StartTicket>> ActorManager::Admit(
    const v1::ActorSpec& spec, ActorId& id, bool wait_for_room) {
  id = ActorId::Random();
  const std::string name_key = NameKey(spec);
  if (!name_key.empty())
    if (auto other = live_names_.find(name_key); other != live_names_.end())
      return absl::AlreadyExistsError(absl::StrCat("an actor named ", spec.namespace_(), "/", spec.name(),
                                                   " already exists: ", other->second.ToString()));
  // Placed (planned and allocated) before anything is recorded, so an actor that cannot be
  // placed leaves nothing behind; one plan and one store write for the common case.
  absl::StatusOr<Placement> p = Place(id, spec);
  // Room may come (actors end, nodes join, its group is placed): with wait_for_room the actor
  // is recorded PENDING with no node and waits in the demand queue, as a restart does.
  const bool wait =
      !p.ok() && wait_for_room && !stopping_ &&
      (absl::IsUnavailable(p.status()) || (absl::IsFailedPrecondition(p.status()) && GroupWaiting(spec)));
  if (!p.ok() && !wait) {
    // Unavailable would read as "the head is down, retry" to gRPC clients.
    if (absl::IsUnavailable(p.status())) return absl::ResourceExhaustedError(p.status().message());
    return p.status();
  }
  v1::ActorInfo info;
  info.set_actor_id(id.ToString());
  *info.mutable_spec() = spec;
  std::variant<v1::ActorInfo, StartTicket> out;
  if (wait) {
    info.set_state(v1::ACTOR_PENDING);
    info.set_pending_reason(std::string(p.status().message()));
    if (absl::Status s = Persist(info); !s.ok()) return s;
    out = info;
  } else {
    out = MarkPending(id, info, p->slot, p->address);
    if (absl::Status s = Persist(info); !s.ok()) {
      Release(id);  // not recorded: nothing may run under this placement
      return s;
    }
  }
  if (!spec.placement_group_id().empty()) by_group_[spec.placement_group_id()].insert(id);
  // Queued or named only once it is in the table (a refused write above records nothing).
  if (info.state() == v1::ACTOR_DEAD) {
    dead_.Push(id);
  } else if (!name_key.empty()) {
    live_names_[name_key] = id;
  }
  actors_[id] = std::move(info);
  if (wait) {
    // Debug: thousands may wait at once; the reason is in the actor's pending_reason.
    spdlog::debug("actor {} waits for room: {}", id.ToString(), p.status().message());
    Enqueue(id, spec);
  }
  return out;
}

absl::StatusOr<v1::ActorInfo> ActorManager::Create(v1::ActorSpec spec) {
  loop_.AssertOffLoop("ActorManager::Create");
  if (absl::Status s = ValidateSpec(spec); !s.ok()) return s;
  ActorId id;
  absl::StatusOr<std::variant<v1::ActorInfo, StartTicket>> placed = OnLoop([&] {
    loop_.AssertOnLoop();
    return Admit(spec, id, /*wait_for_room=*/false);
  });
  if (!placed.ok()) return placed.status();
  if (auto* final_state = std::get_if<v1::ActorInfo>(&*placed)) return std::move(*final_state);
  const StartTicket& ticket = std::get<StartTicket>(*placed);
  // The worker is waited for on the caller's thread, not the loop's.
  absl::StatusOr<v1::StartActorReply> started = workers_.StartActor(ticket.worker_address, ticket.request);
  return OnLoop([&] {
    loop_.AssertOnLoop();
    return FinishStart(id, ticket, std::move(started));
  });
}

void ActorManager::CreateAsync(v1::ActorSpec spec, CreateDone done, bool return_pending) {
  if (absl::Status s = ValidateSpec(spec); !s.ok()) return done(s);
  DispatchTask([this, spec = std::move(spec), done = std::move(done), return_pending]() mutable {
    loop_.AssertOnLoop();
    CreateOnLoop(spec, std::move(done), return_pending);
  });
}

void ActorManager::CreateOnLoop(const v1::ActorSpec& spec, CreateDone done, bool return_pending) {
  ActorId id;
  absl::StatusOr<std::variant<v1::ActorInfo, StartTicket>> placed = Admit(spec, id, return_pending);
  if (!placed.ok()) return done(placed.status());
  if (auto* final_state = std::get_if<v1::ActorInfo>(&*placed)) return done(std::move(*final_state));
  if (return_pending) {
    // The start is on its way before the caller hears of the actor.
    v1::ActorInfo pending = actors_.at(id);
    StartAsync(id, std::move(std::get<StartTicket>(*placed)), nullptr);
    return done(std::move(pending));
  }
  StartAsync(id, std::move(std::get<StartTicket>(*placed)), std::move(done));
}

void ActorManager::StartAsync(const ActorId& id, StartTicket ticket, CreateDone done) {
  auto shared = std::make_shared<StartTicket>(std::move(ticket));
  workers_.StartActorAsync(shared->worker_address, shared->request,
                           AnswerOnLoop<absl::StatusOr<v1::StartActorReply>>(
                               [this, id, shared, done](absl::StatusOr<v1::StartActorReply> r) {
                                 loop_.AssertOnLoop();
                                 absl::StatusOr<v1::ActorInfo> final_state =
                                     FinishStart(id, *shared, std::move(r));
                                 if (done) done(std::move(final_state));
                               }));
}

void ActorManager::CreateBatchAsync(std::vector<v1::ActorSpec> specs, BatchDone done) {
  struct Batch {
    std::vector<absl::StatusOr<v1::ActorInfo>> results;
    std::atomic<size_t> left;
    BatchDone done;
  };
  if (specs.empty()) return done({});
  auto batch = std::make_shared<Batch>();
  batch->results.resize(specs.size(), absl::UnknownError("not settled"));
  batch->left = specs.size();
  batch->done = std::move(done);
  // Each completion writes only its own slot; the last one to finish hands the batch over.
  auto settle = [batch](size_t i) {
    return [batch, i](absl::StatusOr<v1::ActorInfo> r) {
      batch->results[i] = std::move(r);
      if (batch->left.fetch_sub(1) == 1) batch->done(std::move(batch->results));
    };
  };
  std::vector<size_t> valid;  // checked off the loop; the rest are admitted in one task
  for (size_t i = 0; i < specs.size(); ++i) {
    if (absl::Status s = ValidateSpec(specs[i]); !s.ok()) {
      settle(i)(s);
    } else {
      valid.push_back(i);
    }
  }
  if (valid.empty()) return;
  DispatchTask([this, specs = std::move(specs), valid = std::move(valid), settle]() mutable {
    loop_.AssertOnLoop();
    for (size_t i : valid) CreateOnLoop(specs[i], settle(i), /*return_pending=*/false);
  });
}

void ActorManager::Enqueue(const ActorId& id, const v1::ActorSpec& spec, absl::Duration delay) {
  demand_.Push(
      this, ShapeOf(spec), [this, id] { return TryPlaceWaiting(id); }, delay);
}

DemandQueue::Outcome ActorManager::TryPlaceWaiting(const ActorId& id) {
  return OnLoop([&] {
    loop_.AssertOnLoop();
    return PlaceWaiting(id);
  });
}

DemandQueue::Outcome ActorManager::PlaceWaiting(const ActorId& id) {
  {
    auto found = actors_.find(id);
    // Killed meanwhile (perhaps already evicted), or started by another path.
    if (found == actors_.end() || !Waiting(found->second)) return DemandQueue::Outcome::kGone;
    v1::ActorInfo& a = found->second;
    // A creation that waits for its group: the group may have been removed meanwhile.
    const std::string& group = a.spec().placement_group_id();
    const bool group_live = group.empty() || !group_waiting_ || group_waiting_(group) ||
                            resources_.With([&](const scheduler::Cluster& c) { return c.HasGroup(group); });
    // The head is stopping: leave the actor as the store has it for the next head.
    if (stopping_) return DemandQueue::Outcome::kGone;
    if (!group_live && a.state() == v1::ACTOR_PENDING) {
      Transition(id, a, v1::ACTOR_DEAD,
                 absl::StrCat("cannot place: its placement group ", group, " was removed"),
                 DeathCause::kUnplaceable);
      return DemandQueue::Outcome::kGone;
    }
    absl::StatusOr<Placement> p = Place(id, a.spec());
    if (!p.ok()) {
      // Waits for a node with room (a replacement node, resources freed, or its placement
      // group placed); the reason is visible in status meanwhile.
      if (a.pending_reason() != p.status().message()) {
        if (a.state() == v1::ACTOR_RESTARTING && a.pending_reason().empty())
          spdlog::warn("actor {} waits for a node: {}", id.ToString(), p.status().message());
        a.set_pending_reason(std::string(p.status().message()));
        Persist(a);
      }
      return DemandQueue::Outcome::kWaiting;
    }
    const v1::ActorInfo before = a;
    StartTicket t = MarkPending(id, a, p->slot, p->address);
    if (absl::Status s = Persist(a); !s.ok()) {
      // Not recorded: nothing may run under this placement. It waits as the store has it
      // (the head takes no more changes once a write is lost: a restart recovers it).
      Release(id, /*kick=*/false);
      a = before;
      a.set_pending_reason(absl::StrCat("the store refused its placement: ", s.message()));
      return DemandQueue::Outcome::kWaiting;
    }
    exited_while_starting_.erase(id);
    StartAsync(id, std::move(t), nullptr);
  }
  return DemandQueue::Outcome::kPlaced;
}

absl::StatusOr<v1::ActorInfo> ActorManager::FinishStart(const ActorId& id, const StartTicket& ticket,
                                                        absl::StatusOr<v1::StartActorReply> started) {
  bool stale = false;
  v1::ActorInfo out;
  absl::Status evicted;
  {
    auto found = actors_.find(id);
    if (found == actors_.end()) {
      // Killed while starting and already evicted as one of the oldest DEAD.
      stale = started.ok();
      evicted = absl::NotFoundError(absl::StrCat("no actor ", id.ToString(), " (killed while starting)"));
    } else if (v1::ActorInfo& a = found->second; a.state() != v1::ACTOR_PENDING ||
                                                 a.node_id() != ticket.node_id ||
                                                 a.incarnation() != ticket.incarnation) {
      // Killed while starting, or already restarted elsewhere (its node was declared dead
      // while the start was in flight): this reply belongs to an incarnation that no longer
      // exists.
      stale = started.ok();
      out = a;
    } else if (!started.ok()) {
      // The constructor's error (FAILED_PRECONDITION) is final; anything else counts as a death.
      std::string reason = absl::StrCat("failed to start on ", a.node_id(), ": ", started.status().message());
      if (absl::IsFailedPrecondition(started.status())) {
        Transition(id, a, v1::ACTOR_DEAD, std::move(reason), DeathCause::kStartFailed);
      } else {
        // Timed out or cut off mid-start, say: it may run there, and is stopped (or its node's
        // death confirmed) before the actor starts anywhere else.
        ++failed_starts_[id];
        HandleDeath(id, reason, DeathCause::kStartFailed, ProcessAt{ticket.node_id, id, ticket.incarnation});
      }
      return a;
    } else {
      a.set_address(started->address());
      a.set_log_path(started->log_path());
      if (exited_while_starting_.erase(id)) {
        HandleDeath(id, "exited right after it started", DeathCause::kExited);
        return a;
      }
      failed_starts_.erase(id);
      Transition(id, a, v1::ACTOR_ALIVE, "");
      // Routine at thousands a second: debug (deaths and restarts are logged at info/warn).
      spdlog::debug("actor {} ({}) ALIVE on {} at {}", id.ToString(), a.spec().class_name(), a.node_id(),
                    a.address());
      return a;
    }
  }
  // The process of an incarnation that no longer exists must not run.
  if (stale) {
    // Named by its incarnation: not a newer start on the same node.
    SendKill(ticket.worker_address, ProcessAt{ticket.node_id, id, ticket.incarnation}, "a stale start",
             [] {});
  }
  if (!evicted.ok()) return evicted;
  return out;
}

void ActorManager::HandleDeath(const ActorId& id, const std::string& reason, DeathCause cause,
                               std::optional<ProcessAt> unknown) {
  v1::ActorInfo& a = actors_.at(id);
  int max = a.spec().max_restarts();
  if (max >= 0 && a.restarts() >= max) {
    failed_starts_.erase(id);
    Transition(id, a, v1::ACTOR_DEAD,
               max > 0 ? absl::StrCat(reason, " (no restarts left: ", max, " used)") : reason, cause);
    spdlog::warn("actor {} is DEAD: {}", id.ToString(), a.death_reason());
    // Best effort: DEAD starts nothing anywhere.
    if (std::string address = unknown ? WorkerAddress(unknown->node_id) : ""; !address.empty())
      SendKill(address, *unknown, "a failed start", [] {});
    return;
  }
  a.set_restarts(a.restarts() + 1);
  ++restarts_total_;
  Transition(id, a, v1::ACTOR_RESTARTING, reason);
  spdlog::warn("actor {} died ({}); restart {} of {}", id.ToString(), reason, a.restarts(),
               max < 0 ? std::string("unlimited") : std::to_string(max));
  // A stopping head leaves it RESTARTING in the store; the next head's Recover restarts it.
  // Failed starts in a row: at once, then after 50 ms, doubling up to 2 s.
  absl::Duration delay;
  if (auto f = failed_starts_.find(id);
      cause == DeathCause::kStartFailed && f != failed_starts_.end() && f->second > 1)
    delay = std::min(absl::Milliseconds(50) * (1 << std::min(f->second - 2, 6)), absl::Seconds(2));
  if (!stopping_) StartRestart(id, std::move(unknown), delay);
}

void ActorManager::StartRestart(const ActorId& id, std::optional<ProcessAt> stop_first,
                                absl::Duration delay) {
  if (!stop_first) return Enqueue(id, actors_.at(id).spec(), delay);
  const ActorStart start{stop_first->actor_id.ToString(), stop_first->incarnation};
  absl::StatusOr<NodeId> node = NodeId::Parse(stop_first->node_id);
  awaited_stops_[start] =
      AwaitedStop{.at = *stop_first, .node = node.ok() ? std::optional(*node) : std::nullopt, .delay = delay};
  QueueStopTry(start, absl::ZeroDuration());
}

void ActorManager::QueueStopTry(const ActorStart& start, absl::Duration delay) {
  // A shape of its own: a stop that fails does not hold up any other.
  demand_.Push(
      this, absl::StrCat("stop;", start.actor_id, ";", start.incarnation),
      [this, start] { return TryStop(start); }, delay);
}

DemandQueue::Outcome ActorManager::TryStop(const ActorStart& start) {
  std::string address = OnLoop([&]() -> std::string {
    loop_.AssertOnLoop();
    auto it = awaited_stops_.find(start);
    if (it == awaited_stops_.end() || stopping_) return "";
    const ProcessAt& at = it->second.at;
    const std::optional<NodeId>& node_id = it->second.node;
    // Gone for good: a confirmed death means its worker fenced its actors, or their lease ran
    // out (NodeManager); a stop its worker reported through a heartbeat is done.
    std::optional<v1::NodeInfo> node = nodes_.Find(at.node_id);
    if (!node || (node->state() != v1::NODE_ALIVE && !nodes_.DeathUnconfirmed(at.node_id)) ||
        (node_id && stops_.Reported(*node_id, start))) {
      ResolveStopLocked(start);
      return "";
    }
    return node->address();
  });
  if (address.empty()) return DemandQueue::Outcome::kGone;
  v1::KillActorRequest kill;
  kill.set_actor_id(start.actor_id);
  kill.set_incarnation(start.incarnation);
  workers_.KillActorAsync(address, kill, AnswerOnLoop<absl::Status>([this, start](absl::Status s) {
                            loop_.AssertOnLoop();
                            OnStopAnswer(start, s);
                          }));
  return DemandQueue::Outcome::kGone;  // the answer queues the next try, if one is needed
}

void ActorManager::OnStopAnswer(const ActorStart& start, const absl::Status& s) {
  auto it = awaited_stops_.find(start);
  if (it == awaited_stops_.end()) return;
  if (s.ok() || absl::IsNotFound(s)) return ResolveStopLocked(start);
  AwaitedStop& w = it->second;
  // Also asked through the node's heartbeats: a worker the head cannot reach may reach it.
  if (w.node && w.tries == 0) stops_.Request(*w.node, start);
  // (Killed meanwhile, the actor starts nowhere after this; its process is stopped all the same.)
  if (auto a = actors_.find(w.at.actor_id);
      !w.said && a != actors_.end() && a->second.state() == v1::ACTOR_RESTARTING) {
    w.said = true;
    std::string why = absl::StrCat(
        "waits until its start on node ", w.at.node_id,
        " is stopped or that node's death is confirmed (the worker cannot be reached: ", s.message(), ")");
    spdlog::warn("actor {} {}", start.actor_id, why);
    a->second.set_pending_reason(why);
    Persist(a->second);
  }
  const absl::Duration next =
      std::min(absl::Milliseconds(200) * (1 << std::min(w.tries, 4)), absl::Seconds(2));
  ++w.tries;
  QueueStopTry(start, next);
}

void ActorManager::ResolveStopLocked(const ActorStart& start) {
  auto it = awaited_stops_.find(start);
  if (it == awaited_stops_.end()) return;
  const AwaitedStop w = std::move(it->second);
  awaited_stops_.erase(it);
  if (w.node) stops_.Forget(*w.node, start);
  // A process left from an interrupted start no longer runs: the restart may start another.
  if (auto a = actors_.find(w.at.actor_id); a != actors_.end() && !stopping_)
    Enqueue(w.at.actor_id, a->second.spec(), w.delay);
}

void ActorManager::OnStopReported(const NodeId& node, const ActorStart& start) {
  // Posted: the mailbox may call this with its lock held.
  PostTask([this, node, start] {
    loop_.AssertOnLoop();
    auto it = awaited_stops_.find(start);
    if (it != awaited_stops_.end() && it->second.node == node) ResolveStopLocked(start);
  });
}

void ActorManager::OnActorExit(const NodeId& node, const v1::ActorExitInfo& exit) {
  absl::StatusOr<ActorId> id = ActorId::Parse(exit.actor_id());
  if (!id.ok()) return;
  // A node back from an unconfirmed death stops its old actors: their confirmed death (the
  // listener's OnNodeDead) restarts them.
  if (nodes_.DeathUnconfirmed(node.ToString())) return;
  OnLoop([&] {
    loop_.AssertOnLoop();
    ExitedOnLoop(node, *id, exit);
  });
}

void ActorManager::ExitedOnLoop(const NodeId& node, const ActorId& id, const v1::ActorExitInfo& exit) {
  auto it = actors_.find(id);
  if (it == actors_.end() || it->second.node_id() != node.ToString()) return;  // stale report
  v1::ActorInfo& a = it->second;
  // An older start's process, on the node the actor runs on again (its kill came late, or the
  // node came back): not this incarnation's end. 0: a worker that does not say.
  if (exit.incarnation() != 0 && exit.incarnation() != a.incarnation()) return;
  if (a.state() == v1::ACTOR_PENDING) {
    // An exit that was asked for is a previous incarnation's on this node (from a worker
    // that does not say which), not the one starting.
    if (!exit.killed_by_request()) exited_while_starting_.insert(id);
    return;
  }
  if (a.state() != v1::ACTOR_ALIVE) return;
  if (exit.killed_by_request()) {
    Transition(id, a, v1::ACTOR_DEAD, a.death_reason().empty() ? "killed by the user" : "",
               DeathCause::kKilled);
    return;
  }
  HandleDeath(id, absl::StrCat("actor died on ", node.ToString(), ": ", exit.description()),
              DeathCause::kExited);
}

void ActorManager::OnNodeDead(const NodeId& node, const std::string& reason) {
  stops_.NodeGone(node);  // its worker fenced its actors, or left
  OnLoop([&] {
    loop_.AssertOnLoop();
    NodeDeadOnLoop(node, reason);
  });
}

void ActorManager::NodeDeadOnLoop(const NodeId& node, const std::string& reason) {
  // Its processes are stopped: the restarts waiting for one of them may go on.
  std::vector<ActorStart> stopped;
  for (const auto& [start, w] : awaited_stops_)
    if (w.node == node) stopped.push_back(start);
  for (const ActorStart& start : stopped) ResolveStopLocked(start);
  std::vector<ActorId> hit;
  for (const auto& [id, a] : actors_)
    if (a.node_id() == node.ToString() && Holds(a.state())) hit.push_back(id);
  for (const ActorId& id : hit)
    HandleDeath(id, absl::StrCat("node lost: ", node.ToString(), ": ", reason), DeathCause::kNodeLost);
}

absl::StatusOr<v1::ActorInfo> ActorManager::Get(const ActorId& id) const {
  return loop_.Run([&]() -> absl::StatusOr<v1::ActorInfo> {
    loop_.AssertOnLoop();
    auto it = actors_.find(id);
    if (it == actors_.end()) return absl::NotFoundError(absl::StrCat("no actor ", id.ToString()));
    return it->second;
  });
}

absl::StatusOr<v1::ActorInfo> ActorManager::GetByName(absl::string_view ns, absl::string_view name) const {
  return loop_.Run([&] {
    loop_.AssertOnLoop();
    return FindByName(ns, name);
  });
}

absl::StatusOr<v1::ActorInfo> ActorManager::FindByName(absl::string_view ns, absl::string_view name) const {
  std::string space = ns.empty() ? "default" : std::string(ns);
  // The live actor of that name, from the index; only when there is none, a DEAD one (kept
  // up to --keep-terminal), which takes a scan.
  if (auto live = live_names_.find(absl::StrCat(space, "/", name));
      !name.empty() && live != live_names_.end())
    if (auto it = actors_.find(live->second); it != actors_.end()) return it->second;
  // Several DEAD ones may be kept under the name: the one that died last.
  const v1::ActorInfo* latest = nullptr;
  for (const auto& [id, a] : actors_)
    if (a.spec().name() == name && a.spec().namespace_() == space &&
        (latest == nullptr || a.died_unix_ms() > latest->died_unix_ms()))
      latest = &a;
  if (latest != nullptr) return *latest;
  return absl::NotFoundError(absl::StrCat("no actor named ", space, "/", name));
}

absl::Status ActorManager::Kill(const ActorId& id) {
  loop_.AssertOffLoop("ActorManager::Kill");
  absl::Status out;
  absl::Notification done;
  KillAsync(id, [&](absl::Status s) {
    out = std::move(s);
    done.Notify();
  });
  done.WaitForNotification();
  return out;
}

void ActorManager::KillAsync(const ActorId& id, StatusDone done) {
  PostTask([this, id, done = std::move(done)] {
    loop_.AssertOnLoop();
    auto it = actors_.find(id);
    if (it == actors_.end()) return done(absl::NotFoundError(absl::StrCat("no actor ", id.ToString())));
    v1::ActorInfo& a = it->second;
    if (a.state() == v1::ACTOR_DEAD) return done(absl::OkStatus());
    const ProcessAt process{a.node_id(), id, a.incarnation()};
    // A write the store refused is the caller's answer; the process is stopped all the same
    // (the actor is DEAD here: nothing may run as it).
    absl::Status recorded = Transition(id, a, v1::ACTOR_DEAD, "killed by the user", DeathCause::kKilled);
    const std::string address = WorkerAddress(process.node_id);
    if (address.empty()) return done(recorded);
    SendKill(address, process, "a killed actor", [recorded, done] { done(recorded); });
  });
}

void ActorManager::RestartAsync(const ActorId& id, StatusDone done) {
  PostTask([this, id, done = std::move(done)] {
    loop_.AssertOnLoop();
    auto it = actors_.find(id);
    if (it == actors_.end()) return done(absl::NotFoundError(absl::StrCat("no actor ", id.ToString())));
    const v1::ActorInfo& a = it->second;
    if (a.state() == v1::ACTOR_ALIVE)
      // The process is stopped before the restart starts another (AwaitedStop).
      HandleDeath(id, "killed by the user to restart (kill with no_restart=False)", DeathCause::kKilled,
                  ProcessAt{a.node_id(), id, a.incarnation()});
    done(absl::OkStatus());
  });
}

absl::StatusOr<bool> ActorManager::SetBlocked(const ActorId& id, bool blocked) {
  return OnLoop([&] {
    loop_.AssertOnLoop();
    return BlockOnLoop(id, blocked);
  });
}

absl::StatusOr<bool> ActorManager::BlockOnLoop(const ActorId& id, bool blocked) {
  auto it = actors_.find(id);
  if (it == actors_.end()) return absl::NotFoundError(absl::StrCat("no actor ", id.ToString()));
  if (it->second.state() != v1::ACTOR_ALIVE) return !blocked;
  bool holds = resources_.With([&](scheduler::Cluster& c) {
    if (!blocked) return c.ReclaimCpu(id.ToString());
    c.LendCpu(id.ToString());
    return false;
  });
  if (blocked) demand_.Kick();  // its CPU is lent: someone waiting may fit now
  return holds;
}

void ActorManager::MarkKilled(const ActorId& id, const std::string& reason, std::vector<ProcessAt>& kills) {
  auto it = actors_.find(id);
  if (it == actors_.end() || it->second.state() == v1::ACTOR_DEAD) return;
  v1::ActorInfo& a = it->second;
  if (Holds(a.state())) kills.push_back(ProcessAt{a.node_id(), id, a.incarnation()});
  Transition(id, a, v1::ACTOR_DEAD, reason, DeathCause::kKilled);
}

void ActorManager::KillGroupAsync(const std::string& group, const std::string& reason,
                                  std::function<void()> done) {
  PostTask([this, group, reason, done = std::move(done)] {
    loop_.AssertOnLoop();
    std::vector<ProcessAt> kills;
    auto members = by_group_.extract(group);
    if (!members.empty())
      for (const ActorId& id : members.mapped()) MarkKilled(id, reason, kills);
    KillProcessesAsync(kills, done);
  });
}

void ActorManager::SendKill(const std::string& address, const ProcessAt& process, const char* what,
                            std::function<void()> after) {
  v1::KillActorRequest kill;
  kill.set_actor_id(process.actor_id.ToString());
  kill.set_incarnation(process.incarnation);
  workers_.KillActorAsync(
      address, kill,
      AnswerOnLoop<absl::Status>(
          [this, address, node_id = process.node_id, kill, what, after](absl::Status s) {
            loop_.AssertOnLoop();
            if (!s.ok() && !absl::IsNotFound(s)) {
              spdlog::warn("kill {} ({}, start {}) on {}: {}; asking in that node's heartbeat replies",
                           kill.actor_id(), what, kill.incarnation(), address, s.message());
              // A worker the head cannot reach may still reach the head.
              if (absl::StatusOr<NodeId> n = NodeId::Parse(node_id); n.ok() && kill.incarnation() > 0)
                stops_.Request(*n, {kill.actor_id(), kill.incarnation()}, /*awaited=*/false);
            }
            after();
          }));
}

void ActorManager::KillProcessesAsync(const std::vector<ProcessAt>& kills, std::function<void()> done) {
  struct Pending {
    std::atomic<size_t> left;
    std::function<void()> done;
  };
  std::vector<std::pair<std::string, ProcessAt>> to_send;  // (worker address, process)
  for (const ProcessAt& p : kills)
    if (std::string address = WorkerAddress(p.node_id); !address.empty()) to_send.emplace_back(address, p);
  if (to_send.empty()) return done();
  auto pending = std::make_shared<Pending>();
  pending->left = to_send.size();
  pending->done = std::move(done);
  for (const auto& [address, process] : to_send)
    SendKill(address, process, "a killed actor", [pending] {
      if (pending->left.fetch_sub(1) == 1) pending->done();
    });
}

void ActorManager::KillJob(const std::string& job_id, const std::string& reason) {
  loop_.AssertOffLoop("ActorManager::KillJob");
  if (job_id.empty()) return;
  // Returns once every worker has been told, as the job manager expects.
  absl::Notification told;
  OnLoop([&] {
    loop_.AssertOnLoop();
    std::vector<ProcessAt> kills;
    std::vector<ActorId> ids;
    for (const auto& [id, a] : actors_)
      if (a.spec().job_id() == job_id && !a.spec().detached() && a.state() != v1::ACTOR_DEAD)
        ids.push_back(id);
    for (const ActorId& id : ids) MarkKilled(id, reason, kills);
    KillProcessesAsync(kills, [&told] { told.Notify(); });
  });
  told.WaitForNotification();
}

std::vector<v1::ActorInfo> ActorManager::List() const {
  return loop_.Run([this] {
    loop_.AssertOnLoop();
    std::vector<v1::ActorInfo> out;
    out.reserve(actors_.size());
    for (const auto& [id, a] : actors_) out.push_back(a);
    std::sort(out.begin(), out.end(),
              [](const auto& x, const auto& y) { return x.actor_id() < y.actor_id(); });
    return out;
  });
}

}  // namespace skyrl::head
