#include "runtime/head/actor_manager.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/common/logging.h"
#include "runtime/common/resources.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"
#include "runtime/rpc/status.h"
#include "skyrl/worker.grpc.pb.h"

namespace skyrl::head {
namespace {

ResourceSet ToResources(const google::protobuf::Map<std::string, double>& m) {
  absl::StatusOr<ResourceSet> r = ResourceSet::FromMap({m.begin(), m.end()});
  return r.ok() ? *r : ResourceSet();
}

bool Holds(v1::ActorState s) {
  return s == v1::ACTOR_PENDING || s == v1::ACTOR_ALIVE;
}

class GrpcWorkerClient final : public WorkerClient {
 public:
  explicit GrpcWorkerClient(std::string token) : token_(std::move(token)) {}
  absl::StatusOr<v1::StartActorReply> StartActor(const std::string& address,
                                                 const v1::StartActorRequest& req) override {
    grpc::ClientContext ctx;
    rpc::PrepareCall(&ctx, token_, absl::Seconds(60));
    v1::StartActorReply reply;
    absl::Status s = rpc::FromGrpc(Stub(address)->StartActor(&ctx, req, &reply));
    if (!s.ok()) return s;
    return reply;
  }
  absl::Status KillActor(const std::string& address, const std::string& actor_id) override {
    grpc::ClientContext ctx;
    rpc::PrepareCall(&ctx, token_, absl::Seconds(10));
    v1::KillActorRequest req;
    req.set_actor_id(actor_id);
    v1::KillActorReply reply;
    return rpc::FromGrpc(Stub(address)->KillActor(&ctx, req, &reply));
  }

 private:
  std::shared_ptr<v1::WorkerService::Stub> Stub(const std::string& address) {
    absl::MutexLock lock(&mu_);
    auto& stub = stubs_[address];
    if (!stub) stub = v1::WorkerService::NewStub(rpc::MakeChannel(address));
    return stub;
  }
  const std::string token_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<v1::WorkerService::Stub>> stubs_ ABSL_GUARDED_BY(mu_);
};

absl::Status ValidateSpec(v1::ActorSpec& spec) {
  if (absl::Status s = ValidateName("spec.class_name", spec.class_name()); !s.ok()) return s;
  if (spec.namespace_().empty()) spec.set_namespace_("default");
  if (absl::Status s = ValidateName("spec.namespace", spec.namespace_()); !s.ok()) return s;
  if (!spec.name().empty())
    if (absl::Status s = ValidateName("spec.name", spec.name()); !s.ok()) return s;
  absl::StatusOr<ResourceSet> r = ResourceSet::FromMap({spec.resources().begin(), spec.resources().end()});
  if (!r.ok()) return absl::InvalidArgumentError(absl::StrCat("spec.resources: ", r.status().message()));
  if (absl::Status s = ValidateResourceRequest(*r); !s.ok())
    return absl::InvalidArgumentError(absl::StrCat("spec.resources: ", s.message()));
  int64_t gpu = r->GetUnits(kGPU);
  if (gpu % ResourceSet::kUnitsPerWhole != 0)
    return absl::UnimplementedError(
        "spec.resources: fractional GPUs need placement groups, which this head does not have yet");
  if (spec.max_restarts() < -1)
    return absl::InvalidArgumentError("spec.max_restarts: must be -1 (unlimited) or more");
  if (spec.max_concurrency() < 0 || spec.max_concurrency() > 10000)
    return absl::InvalidArgumentError("spec.max_concurrency: must be in 0-10000");
  return absl::OkStatus();
}

}  // namespace

std::unique_ptr<WorkerClient> MakeGrpcWorkerClient(std::string token) {
  return std::make_unique<GrpcWorkerClient>(std::move(token));
}

ActorManager::ActorManager(store::Store& store, NodeManager& nodes, WorkerClient& workers)
    : store_(store), nodes_(nodes), workers_(workers) {}

ActorManager::~ActorManager() {
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    threads.swap(restarts_);
  }
  for (auto& t : threads) t.join();
}

absl::Status ActorManager::Persist(const v1::ActorInfo& info) {
  return store_.Put(kActorsTable, info.actor_id(), info.SerializeAsString());
}

absl::Status ActorManager::Recover() {
  absl::StatusOr<std::vector<store::Entry>> entries = store_.Scan(kActorsTable, "");
  if (!entries.ok()) return entries.status();
  absl::MutexLock lock(&mu_);
  for (const auto& e : *entries) {
    v1::ActorInfo info;
    absl::StatusOr<ActorId> id = ActorId::Parse(e.key);
    if (!id.ok() || !info.ParseFromString(e.value)) {
      spdlog::error("actors table: skipping unreadable entry {}", store::Where(kActorsTable, e.key));
      continue;
    }
    actors_[*id] = std::move(info);
  }
  spdlog::info("recovered {} actors from the store", actors_.size());
  return absl::OkStatus();
}

absl::StatusOr<ActorManager::Placement> ActorManager::Place(const v1::ActorSpec& spec) const {
  ResourceSet need = ToResources(spec.resources());
  int gpus = int(need.Get(kGPU));
  std::vector<std::string> offers;
  for (const v1::NodeInfo& node : nodes_.List()) {
    if (node.state() != v1::NODE_ALIVE) continue;
    absl::StatusOr<NodeId> node_id = NodeId::Parse(node.node_id());
    if (!node_id.ok()) continue;
    ResourceSet free = ToResources(node.resources_total());
    absl::flat_hash_set<int> used_gpus;
    for (const auto& [id, a] : actors_) {
      if (a.node_id() != node.node_id() || !Holds(a.state())) continue;
      free -= ToResources(a.spec().resources());
      used_gpus.insert(a.gpu_ids().begin(), a.gpu_ids().end());
    }
    offers.push_back(absl::StrCat(node.node_id(), " has ", free.ToHumanString(), " free"));
    if (!free.Contains(need)) continue;
    Placement p{*node_id, node.address(), {}};
    std::vector<int> ids(node.gpu_ids().begin(), node.gpu_ids().end());
    std::sort(ids.begin(), ids.end());
    for (int g : ids)
      if (int(p.gpu_ids.size()) < gpus && !used_gpus.contains(g)) p.gpu_ids.push_back(g);
    if (int(p.gpu_ids.size()) < gpus) continue;
    return p;
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "actor of class ", spec.class_name(), " needs ", need.ToHumanString(), "; ",
      offers.empty() ? "no node is alive" : absl::StrJoin(offers, "; ")));
}

absl::StatusOr<v1::ActorInfo> ActorManager::Create(v1::ActorSpec spec) {
  if (absl::Status s = ValidateSpec(spec); !s.ok()) return s;
  ActorId id = ActorId::Random();
  {
    absl::MutexLock lock(&mu_);
    if (!spec.name().empty())
      for (const auto& [other, a] : actors_)
        if (a.state() != v1::ACTOR_DEAD && a.spec().name() == spec.name() &&
            a.spec().namespace_() == spec.namespace_())
          return absl::AlreadyExistsError(absl::StrCat("an actor named ", spec.namespace_(), "/",
                                                       spec.name(), " already exists: ", other.ToString()));
    absl::StatusOr<Placement> p = Place(spec);
    if (!p.ok()) return p.status();  // nothing recorded for an actor that cannot be placed
    v1::ActorInfo info;
    info.set_actor_id(id.ToString());
    *info.mutable_spec() = spec;
    info.set_state(v1::ACTOR_RESTARTING);  // PlaceAndStart moves it to PENDING
    if (absl::Status s = Persist(info); !s.ok()) return s;
    actors_[id] = std::move(info);
  }
  return PlaceAndStart(id, /*wait_for_room=*/false);
}

absl::StatusOr<v1::ActorInfo> ActorManager::PlaceAndStart(const ActorId& id, bool wait_for_room) {
  v1::StartActorRequest req;
  std::string worker_address;
  for (bool said_waiting = false;; absl::SleepFor(absl::Milliseconds(200))) {
    absl::MutexLock lock(&mu_);
    v1::ActorInfo& a = actors_[id];
    if (a.state() == v1::ACTOR_DEAD) return a;  // killed meanwhile
    absl::StatusOr<Placement> p = Place(a.spec());
    if (!p.ok()) {
      if (wait_for_room && !stopping_) {
        // A restart waits for a node with room (a replacement node, or resources freed).
        if (!said_waiting) spdlog::warn("actor {} waits for a node: {}", id.ToString(), p.status().message());
        said_waiting = true;
        continue;
      }
      a.set_state(v1::ACTOR_DEAD);
      a.set_death_reason(absl::StrCat("cannot place: ", p.status().message()));
      a.clear_node_id();
      (void)Persist(a);
      return a;
    }
    a.set_state(v1::ACTOR_PENDING);
    a.set_node_id(p->node.ToString());
    a.clear_gpu_ids();
    for (int g : p->gpu_ids) a.add_gpu_ids(g);
    a.clear_address();
    if (absl::Status s = Persist(a); !s.ok()) return s;
    exited_while_starting_.erase(id);
    worker_address = p->worker_address;
    req.set_actor_id(id.ToString());
    req.set_class_name(a.spec().class_name());
    req.set_init_args(a.spec().init_args());
    *req.mutable_gpu_ids() = a.gpu_ids();
    req.set_max_concurrency(a.spec().max_concurrency());
    break;
  }
  absl::StatusOr<v1::StartActorReply> started = workers_.StartActor(worker_address, req);
  absl::MutexLock lock(&mu_);
  v1::ActorInfo& a = actors_[id];
  if (a.state() != v1::ACTOR_PENDING) {  // killed while starting
    if (started.ok()) (void)workers_.KillActor(worker_address, id.ToString());
    return a;
  }
  if (!started.ok()) {
    // The constructor's error (FAILED_PRECONDITION) is final; anything else counts as a death.
    std::string reason = absl::StrCat("failed to start on ", a.node_id(), ": ", started.status().message());
    if (absl::IsFailedPrecondition(started.status())) {
      a.set_state(v1::ACTOR_DEAD);
      a.set_death_reason(reason);
      (void)Persist(a);
    } else {
      HandleDeath(id, reason);
    }
    return actors_[id];
  }
  a.set_address(started->address());
  a.set_log_path(started->log_path());
  if (exited_while_starting_.erase(id)) {
    HandleDeath(id, "exited right after it started");
    return actors_[id];
  }
  a.set_state(v1::ACTOR_ALIVE);
  (void)Persist(a);
  spdlog::info("actor {} ({}) ALIVE on {} at {}", id.ToString(), a.spec().class_name(), a.node_id(),
               a.address());
  return a;
}

void ActorManager::HandleDeath(const ActorId& id, const std::string& reason) {
  v1::ActorInfo& a = actors_[id];
  int max = a.spec().max_restarts();
  if (stopping_ || (max >= 0 && a.restarts() >= max)) {
    a.set_state(v1::ACTOR_DEAD);
    a.set_death_reason(max >= 0 && a.restarts() >= max && max > 0
                           ? absl::StrCat(reason, " (no restarts left: ", max, " used)")
                           : reason);
    a.set_address("");
    (void)Persist(a);
    spdlog::warn("actor {} is DEAD: {}", id.ToString(), a.death_reason());
    return;
  }
  a.set_restarts(a.restarts() + 1);
  a.set_state(v1::ACTOR_RESTARTING);
  a.set_death_reason(reason);
  a.set_address("");
  a.clear_node_id();
  (void)Persist(a);
  spdlog::warn("actor {} died ({}); restart {} of {}", id.ToString(), reason, a.restarts(),
               max < 0 ? std::string("unlimited") : std::to_string(max));
  restarts_.emplace_back([this, id] { (void)PlaceAndStart(id, /*wait_for_room=*/true); });
}

void ActorManager::OnActorExit(const NodeId& node, const v1::ActorExitInfo& exit) {
  absl::StatusOr<ActorId> id = ActorId::Parse(exit.actor_id());
  if (!id.ok()) return;
  absl::MutexLock lock(&mu_);
  auto it = actors_.find(*id);
  if (it == actors_.end() || it->second.node_id() != node.ToString()) return;  // stale report
  v1::ActorInfo& a = it->second;
  if (a.state() == v1::ACTOR_PENDING) {
    exited_while_starting_.insert(*id);
    return;
  }
  if (a.state() != v1::ACTOR_ALIVE) return;
  if (exit.killed_by_request()) {
    a.set_state(v1::ACTOR_DEAD);
    if (a.death_reason().empty()) a.set_death_reason("killed by the user");
    (void)Persist(a);
    return;
  }
  HandleDeath(*id, absl::StrCat("actor died on ", node.ToString(), ": ", exit.description()));
}

void ActorManager::OnNodeDead(const NodeId& node, const std::string& reason) {
  absl::MutexLock lock(&mu_);
  std::vector<ActorId> hit;
  for (const auto& [id, a] : actors_)
    if (a.node_id() == node.ToString() && Holds(a.state())) hit.push_back(id);
  for (const ActorId& id : hit) HandleDeath(id, absl::StrCat("node lost: ", node.ToString(), ": ", reason));
}

absl::StatusOr<v1::ActorInfo> ActorManager::Get(const ActorId& id) const {
  absl::MutexLock lock(&mu_);
  auto it = actors_.find(id);
  if (it == actors_.end()) return absl::NotFoundError(absl::StrCat("no actor ", id.ToString()));
  return it->second;
}

absl::StatusOr<v1::ActorInfo> ActorManager::GetByName(absl::string_view ns, absl::string_view name) const {
  absl::MutexLock lock(&mu_);
  std::string space = ns.empty() ? "default" : std::string(ns);
  const v1::ActorInfo* found = nullptr;
  for (const auto& [id, a] : actors_) {
    if (a.spec().name() != name || a.spec().namespace_() != space) continue;
    if (!found || (found->state() == v1::ACTOR_DEAD && a.state() != v1::ACTOR_DEAD)) found = &a;
  }
  if (!found) return absl::NotFoundError(absl::StrCat("no actor named ", space, "/", name));
  return *found;
}

absl::Status ActorManager::Kill(const ActorId& id) {
  std::string address, node_id;
  {
    absl::MutexLock lock(&mu_);
    auto it = actors_.find(id);
    if (it == actors_.end()) return absl::NotFoundError(absl::StrCat("no actor ", id.ToString()));
    v1::ActorInfo& a = it->second;
    if (a.state() == v1::ACTOR_DEAD) return absl::OkStatus();
    node_id = a.node_id();
    a.set_state(v1::ACTOR_DEAD);
    a.set_death_reason("killed by the user");
    a.set_address("");
    if (absl::Status s = Persist(a); !s.ok()) return s;
  }
  for (const v1::NodeInfo& n : nodes_.List())
    if (n.node_id() == node_id && n.state() == v1::NODE_ALIVE) address = n.address();
  if (!address.empty()) {
    absl::Status s = workers_.KillActor(address, id.ToString());
    if (!s.ok() && !absl::IsNotFound(s)) spdlog::warn("kill {} on {}: {}", id.ToString(), address, s.message());
  }
  return absl::OkStatus();
}

std::vector<v1::ActorInfo> ActorManager::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::ActorInfo> out;
  for (const auto& [id, a] : actors_) out.push_back(a);
  std::sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return x.actor_id() < y.actor_id(); });
  return out;
}

}  // namespace skyrl::head
