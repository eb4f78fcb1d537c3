#include "runtime/client/client.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "runtime/rpc/actor_state.h"
#include "absl/time/clock.h"
#include "runtime/common/ids.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"
#include "runtime/rpc/status.h"

namespace skyrl {
namespace {

bool Unreachable(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE || s.error_code() == grpc::StatusCode::CANCELLED;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const std::string& head, std::string token,
                                                        ClientOptions options) {
  if (absl::Status s = rpc::ValidateAddress("head address", head); !s.ok()) return s;
  if (absl::Status s = rpc::ValidateToken(token); !s.ok()) return s;
  return std::unique_ptr<Client>(new Client(head, std::move(token), options));
}

Client::Client(const std::string& head, std::string token, ClientOptions options)
    : token_(std::move(token)),
      caller_id_(ActorId::Random().ToString().substr(6)),
      job_id_(std::getenv("SKYRL_JOB_ID") ? std::getenv("SKYRL_JOB_ID") : ""),
      options_(options),
      head_(v1::ActorDirectory::NewStub(rpc::MakeChannel(head))),
      groups_(v1::PlacementGroupService::NewStub(rpc::MakeChannel(head))),
      poller_([this] { PollLoop(); }) {}

Client::~Client() {
  cq_.Shutdown();
  poller_.join();
}

absl::StatusOr<ActorHandle> Client::CreateActor(const std::string& class_name, const ActorOptions& o) {
  v1::CreateActorRequest req;
  v1::ActorSpec* spec = req.mutable_spec();
  spec->set_class_name(class_name);
  spec->set_init_args(o.init_args);
  for (const auto& [k, v] : o.resources) (*spec->mutable_resources())[k] = v;
  spec->set_name(o.name);
  spec->set_namespace_(o.ns);
  spec->set_max_restarts(o.max_restarts);
  spec->set_max_concurrency(o.max_concurrency);
  for (const auto& [k, v] : o.label_selector) (*spec->mutable_label_selector())[k] = v;
  spec->set_placement_group_id(o.placement_group_id);
  if (o.bundle_index >= 0) spec->set_bundle_index(o.bundle_index);
  spec->set_job_id(job_id_);
  spec->set_detached(o.detached);
  spec->set_host(o.host);
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, token_, options_.call_timeout);
  v1::CreateActorReply reply;
  if (absl::Status s = rpc::FromGrpc(head_->CreateActor(&ctx, req, &reply)); !s.ok()) return s;
  if (reply.actor().state() == v1::ACTOR_DEAD)
    return absl::FailedPreconditionError(
        absl::StrCat("actor ", reply.actor().actor_id(), " could not start: ", reply.actor().death_reason()));
  return ActorHandle{reply.actor().actor_id()};
}

absl::StatusOr<v1::PlacementGroupInfo> Client::CreatePlacementGroup(const PlacementGroupOptions& o) {
  v1::CreatePlacementGroupRequest req;
  v1::PlacementGroupSpec* spec = req.mutable_spec();
  spec->set_name(o.name);
  spec->set_namespace_(o.ns);
  for (const Bundle& b : o.bundles) {
    v1::Bundle* pb = spec->add_bundles();
    for (const auto& [k, v] : b.resources) (*pb->mutable_resources())[k] = v;
    for (const auto& [k, v] : b.label_selector) (*pb->mutable_label_selector())[k] = v;
  }
  spec->set_strategy(o.strategy);
  spec->set_domain_label(o.domain_label);
  spec->set_affinity_group_id(o.affinity_group_id);
  spec->set_wait_for_nodes(o.wait_for_nodes);
  spec->set_detached(o.detached);
  spec->set_job_id(job_id_);
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, token_, options_.call_timeout);
  v1::CreatePlacementGroupReply reply;
  if (absl::Status s = rpc::FromGrpc(groups_->CreatePlacementGroup(&ctx, req, &reply)); !s.ok()) return s;
  return std::move(*reply.mutable_group());
}

absl::StatusOr<v1::PlacementGroupInfo> Client::WaitPlacementGroup(const std::string& id, absl::Duration timeout) {
  v1::WaitPlacementGroupRequest req;
  req.set_placement_group_id(id);
  req.set_timeout_ms(absl::ToInt64Milliseconds(timeout));
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, token_, timeout + absl::Seconds(10));
  v1::WaitPlacementGroupReply reply;
  if (absl::Status s = rpc::FromGrpc(groups_->WaitPlacementGroup(&ctx, req, &reply)); !s.ok()) return s;
  return std::move(*reply.mutable_group());
}

absl::Status Client::RemovePlacementGroup(const std::string& id) {
  v1::RemovePlacementGroupRequest req;
  req.set_placement_group_id(id);
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, token_, options_.call_timeout);
  v1::RemovePlacementGroupReply reply;
  return rpc::FromGrpc(groups_->RemovePlacementGroup(&ctx, req, &reply));
}

absl::StatusOr<v1::ActorInfo> Client::Lookup(const v1::GetActorRequest& req) {
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, token_, absl::Seconds(10));
  v1::GetActorReply reply;
  if (absl::Status s = rpc::FromGrpc(head_->GetActor(&ctx, req, &reply)); !s.ok()) return s;
  return std::move(*reply.mutable_actor());
}

absl::StatusOr<ActorHandle> Client::GetActor(const std::string& name, const std::string& ns) {
  v1::GetActorRequest req;
  req.set_name(name);
  req.set_namespace_(ns);
  absl::StatusOr<v1::ActorInfo> info = Lookup(req);
  if (!info.ok()) return info.status();
  return ActorHandle{info->actor_id()};
}

absl::StatusOr<v1::ActorInfo> Client::Describe(const ActorHandle& actor) {
  v1::GetActorRequest req;
  req.set_actor_id(actor.actor_id);
  return Lookup(req);
}

absl::Status Client::Kill(const ActorHandle& actor) {
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, token_, absl::Seconds(10));
  v1::KillActorByIdRequest req;
  req.set_actor_id(actor.actor_id);
  v1::KillActorByIdReply reply;
  absl::Status s = rpc::FromGrpc(head_->KillActor(&ctx, req, &reply));
  absl::MutexLock lock(&mu_);
  routes_.erase(actor.actor_id);
  return s;
}

absl::StatusOr<Client::Route> Client::Resolve(const std::string& actor_id) {
  {
    absl::MutexLock lock(&mu_);
    auto it = routes_.find(actor_id);
    if (it != routes_.end()) return it->second;
  }
  absl::Time deadline = absl::Now() + options_.restart_wait;
  while (true) {
    absl::StatusOr<v1::ActorInfo> info = Describe({actor_id});
    if (!info.ok()) return info.status();
    if (info->state() == v1::ACTOR_DEAD)
      return absl::FailedPreconditionError(absl::StrCat("actor is dead: ", info->death_reason()));
    if (info->state() == v1::ACTOR_ALIVE) {
      Route r{info->address(), v1::ActorService::NewStub(rpc::MakeChannel(info->address())),
              std::make_shared<std::atomic<uint64_t>>(1)};
      absl::MutexLock lock(&mu_);
      routes_[actor_id] = r;
      return r;
    }
    if (absl::Now() > deadline)
      return absl::UnavailableError(absl::StrCat("actor ", actor_id, " is still ", rpc::ActorStateName(info->state()),
                                                 " after ", absl::FormatDuration(options_.restart_wait)));
    absl::SleepFor(absl::Milliseconds(20));
  }
}

absl::Status Client::Explain(const std::string& actor_id, const std::string& address,
                             const grpc::Status& failure) {
  // UNAVAILABLE and CANCELLED mean the process could not be reached. A dying process can also
  // surface as UNKNOWN, INTERNAL or ABORTED, which are equally what a method may return: for
  // those, a brief look at the head decides.
  grpc::StatusCode code = failure.error_code();
  bool unreachable = Unreachable(failure);
  bool maybe_died = code == grpc::StatusCode::UNKNOWN || code == grpc::StatusCode::INTERNAL ||
                    code == grpc::StatusCode::ABORTED;
  if (!unreachable && !maybe_died) return rpc::FromGrpc(failure);
  if (unreachable) {
    absl::MutexLock lock(&mu_);
    routes_.erase(actor_id);
  }
  // Give the head a moment to hear of the death from the worker.
  absl::Time deadline = absl::Now() + (unreachable ? absl::Seconds(5) : absl::Milliseconds(300));
  while (true) {
    absl::StatusOr<v1::ActorInfo> info = Describe({actor_id});
    if (info.ok() && (info->state() != v1::ACTOR_ALIVE || info->address() != address)) {
      absl::MutexLock lock(&mu_);
      routes_.erase(actor_id);
      return absl::UnavailableError(absl::StrCat("actor died: ", info->death_reason()));
    }
    if (absl::Now() > deadline)
      return unreachable ? absl::UnavailableError(absl::StrCat("actor ", actor_id, " unreachable: ",
                                                               failure.error_message()))
                         : rpc::FromGrpc(failure);
    absl::SleepFor(absl::Milliseconds(20));
  }
}

absl::StatusOr<std::string> Client::Call(const ActorHandle& actor, const std::string& method,
                                         const std::string& args) {
  absl::StatusOr<Route> route = Resolve(actor.actor_id);
  if (!route.ok()) return route.status();
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, token_, options_.call_timeout);
  v1::ActorCallRequest req;
  req.set_actor_id(actor.actor_id);
  req.set_method(method);
  req.set_args(args);
  req.set_caller_id(caller_id_);
  req.set_seq(route->next_seq->fetch_add(1));
  v1::ActorCallReply reply;
  grpc::Status s = route->stub->Call(&ctx, req, &reply);
  if (!s.ok()) return Explain(actor.actor_id, route->address, s);
  return std::move(*reply.mutable_result());
}

namespace {
struct AsyncCall {
  std::string address;
  grpc::ClientContext ctx;
  v1::ActorCallRequest req;
  v1::ActorCallReply reply;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::ActorCallReply>> rpc;
  std::promise<absl::StatusOr<std::string>> done;
};
}  // namespace

std::future<absl::StatusOr<std::string>> Client::CallAsync(const ActorHandle& actor, const std::string& method,
                                                           const std::string& args) {
  auto* call = new AsyncCall();
  std::future<absl::StatusOr<std::string>> result = call->done.get_future();
  absl::StatusOr<Route> route = Resolve(actor.actor_id);
  if (!route.ok()) {
    call->done.set_value(route.status());
    delete call;
    return result;
  }
  call->address = route->address;
  rpc::PrepareCall(&call->ctx, token_, options_.call_timeout);
  call->req.set_actor_id(actor.actor_id);
  call->req.set_method(method);
  call->req.set_args(args);
  call->req.set_caller_id(caller_id_);
  call->req.set_seq(route->next_seq->fetch_add(1));
  call->rpc = route->stub->AsyncCall(&call->ctx, call->req, &cq_);
  call->rpc->Finish(&call->reply, &call->status, call);
  return result;
}

void Client::PollLoop() {
  void* tag;
  bool ok;
  while (cq_.Next(&tag, &ok)) {
    auto* call = static_cast<AsyncCall*>(tag);
    if (call->status.ok()) {
      call->done.set_value(std::move(*call->reply.mutable_result()));
    } else {
      // A death stalls this thread while the head is asked why (up to a few seconds); deaths
      // are rare and the answer is what the caller needs.
      call->done.set_value(Explain(call->req.actor_id(), call->address, call->status));
    }
    delete call;
  }
}

}  // namespace skyrl
