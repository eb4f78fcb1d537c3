#include "runtime/client/grpc_client.h"

#include <cstdlib>
#include <optional>

#include "absl/strings/str_cat.h"
#include "runtime/rpc/actor_state.h"
#include "absl/time/clock.h"
#include "runtime/archive/archive.h"
#include "runtime/common/ids.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"
#include "runtime/rpc/status.h"
#include "runtime/rpc/tls.h"

namespace skyrl {
namespace {

using client_internal::CallDone;
using client_internal::CallResult;
using client_internal::CallStream;
using client_internal::StreamEnd;

bool Unreachable(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE || s.error_code() == grpc::StatusCode::CANCELLED;
}

// Like rpc::MakeChannel, with this client's send limit (results may still be as big as any
// host sends) and keepalive pings while calls are in flight.
std::shared_ptr<grpc::Channel> ActorChannel(const std::string& address, const ClientOptions& o) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(rpc::kMaxMessageBytes);
  args.SetMaxSendMessageSize(int(o.max_message_bytes));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, int(absl::ToInt64Milliseconds(o.keepalive_time)));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, int(absl::ToInt64Milliseconds(o.keepalive_timeout)));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);  // an idle open stream keeps pinging
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  return grpc::CreateCustomChannel(address, rpc::ChannelCredentials(), args);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const std::string& head, std::string token,
                                                        ClientOptions options) {
  if (absl::Status s = rpc::ValidateAddress("head address", head); !s.ok()) return s;
  if (absl::Status s = rpc::ValidateToken(token); !s.ok()) return s;
  if (options.max_message_bytes < 4096 || options.max_message_bytes > size_t(rpc::kMaxMessageBytes))
    return absl::InvalidArgumentError(
        absl::StrCat("ClientOptions.max_message_bytes: ", options.max_message_bytes, " is not in 4096-",
                     rpc::kMaxMessageBytes));
  if (options.max_call_bytes < options.max_message_bytes)
    return absl::InvalidArgumentError(absl::StrCat("ClientOptions.max_call_bytes: ", options.max_call_bytes,
                                                   " is below max_message_bytes (", options.max_message_bytes,
                                                   ")"));
  if (options.keepalive_time < absl::Seconds(5) || options.keepalive_time > absl::Hours(24))
    return absl::InvalidArgumentError(
        absl::StrCat("ClientOptions.keepalive_time: ", absl::FormatDuration(options.keepalive_time),
                     " is not in 5s-24h (actor hosts refuse more frequent pings)"));
  if (options.keepalive_timeout < absl::Milliseconds(100) || options.keepalive_timeout > absl::Hours(1))
    return absl::InvalidArgumentError(
        absl::StrCat("ClientOptions.keepalive_timeout: ", absl::FormatDuration(options.keepalive_timeout),
                     " is not in 100ms-1h"));
  if (options.call_timeout <= absl::ZeroDuration())
    return absl::InvalidArgumentError(absl::StrCat(
        "ClientOptions.call_timeout: ", absl::FormatDuration(options.call_timeout), " is not positive"));
  return std::unique_ptr<Client>(new GrpcClient(head, std::move(token), options));
}

GrpcClient::GrpcClient(const std::string& head, std::string token, ClientOptions options)
    : token_(std::move(token)),
      caller_id_(ActorId::Random().ToString().substr(6)),
      job_id_(std::getenv("SKYRL_JOB_ID") ? std::getenv("SKYRL_JOB_ID") : ""),
      options_(options),
      head_(v1::ActorDirectory::NewStub(rpc::MakeChannel(head))),
      groups_(v1::PlacementGroupService::NewStub(rpc::MakeChannel(head))),
      kv_(v1::KvService::NewStub(rpc::MakeChannel(head))),
      expirer_([this] { ExpireLoop(); }),
      explainer_([this] { FailureLoop(); }),
      resolver_([this] { ResolveLoop(); }) {}

GrpcClient::~GrpcClient() {
  std::vector<HeldCallPtr> held;
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;  // no new streams, look-ups or retries from here on
    for (auto it = routes_.begin(); it != routes_.end();) {
      auto here = it++;
      if (!here->second.resolving) continue;
      for (HeldCallPtr& call : here->second.waiting) held.push_back(std::move(call));
      routes_.erase(here);
    }
    for (; !timers_.empty(); timers_.pop())
      if (timers_.top().call != nullptr) held.push_back(timers_.top().call);
    for (auto& [l, owned] : lookups_) l->ctx.TryCancel();
  }
  for (HeldCallPtr& call : held) call->done(absl::CancelledError("the client is shutting down"));
  {
    // A look-up's callback uses this client until it leaves lookups_.
    absl::MutexLock lock(&mu_);
    while (!lookups_.empty()) resolver_cv_.Wait(&mu_);
    resolver_stop_ = true;
  }
  resolver_cv_.SignalAll();
  resolver_.join();
  {
    absl::MutexLock lock(&mu_);
    answered_.clear();
  }
  {
    absl::MutexLock lock(&streams_mu_);
    for (CallStream* s : live_) s->Shutdown(absl::CancelledError("the client is shutting down"));
    // Each stream's OnDone (on gRPC's threads) removes it: after that it never touches us.
    while (!live_.empty()) streams_cv_.Wait(&streams_mu_);
    stop_ = true;
  }
  streams_cv_.SignalAll();
  expire_cv_.SignalAll();
  expirer_.join();
  explainer_.join();
}

v1::ActorSpec ActorSpecFor(const std::string& class_name, const std::map<std::string, double>& resources) {
  v1::ActorSpec spec;
  spec.set_class_name(class_name);
  spec.set_namespace_("default");
  spec.mutable_resources()->insert(resources.begin(), resources.end());
  return spec;
}

absl::StatusOr<ActorHandle> GrpcClient::CreateActor(v1::ActorSpec spec, bool return_pending) {
  v1::CreateActorRequest req;
  if (spec.job_id().empty()) spec.set_job_id(job_id_);
  *req.mutable_spec() = std::move(spec);
  req.set_return_pending(return_pending);
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, token_, options_.call_timeout);
  v1::CreateActorReply reply;
  if (absl::Status s = rpc::FromGrpc(head_->CreateActor(&ctx, req, &reply)); !s.ok()) return s;
  if (reply.actor().state() == v1::ACTOR_DEAD)
    return absl::FailedPreconditionError(
        absl::StrCat("actor ", reply.actor().actor_id(), " could not start: ", reply.actor().death_reason()));
  NoteLimit(reply.actor());
  return ActorHandle{reply.actor().actor_id()};
}

std::vector<absl::StatusOr<ActorHandle>> GrpcClient::CreateActors(std::vector<v1::ActorSpec> specs) {
  constexpr size_t kPerCall = 10000;  // the head's limit per CreateActors call
  std::vector<absl::StatusOr<ActorHandle>> out;
  out.reserve(specs.size());
  for (size_t first = 0; first < specs.size(); first += kPerCall) {
    size_t last = std::min(specs.size(), first + kPerCall);
    v1::CreateActorsRequest req;
    for (size_t i = first; i < last; ++i) {
      v1::ActorSpec* spec = req.add_specs();
      *spec = std::move(specs[i]);
      if (spec->job_id().empty()) spec->set_job_id(job_id_);
    }
    grpc::ClientContext ctx;
    rpc::PrepareCall(&ctx, token_, options_.call_timeout);
    v1::CreateActorsReply reply;
    absl::Status s = rpc::FromGrpc(head_->CreateActors(&ctx, req, &reply));
    if (s.ok() && reply.results_size() != int(last - first))
      s = absl::InternalError(absl::StrCat("CreateActors: the head answered ", reply.results_size(), " of ",
                                           last - first, " items"));
    for (size_t i = first; i < last; ++i) {
      if (!s.ok()) {
        out.push_back(s);  // the call as a whole failed
        continue;
      }
      const v1::CreateActorResult& r = reply.results(int(i - first));
      if (r.code() != 0) {
        out.push_back(absl::Status(static_cast<absl::StatusCode>(r.code()), r.message()));
      } else if (r.actor().state() == v1::ACTOR_DEAD) {
        out.push_back(absl::FailedPreconditionError(
            absl::StrCat("actor ", r.actor().actor_id(), " could not start: ", r.actor().death_reason())));
      } else {
        NoteLimit(r.actor());
        out.push_back(ActorHandle{r.actor().actor_id()});
      }
    }
  }
  return out;
}

absl::StatusOr<v1::PlacementGroupInfo> GrpcClient::CreatePlacementGroup(const PlacementGroupOptions& o) {
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

absl::StatusOr<v1::PlacementGroupInfo> GrpcClient::WaitPlacementGroup(const std::string& id,
                                                                      absl::Duration timeout) {
  v1::WaitPlacementGroupRequest req;
  req.set_placement_group_id(id);
  req.set_timeout_ms(absl::ToInt64Milliseconds(timeout));
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, token_, timeout + absl::Seconds(10));
  v1::WaitPlacementGroupReply reply;
  if (absl::Status s = rpc::FromGrpc(groups_->WaitPlacementGroup(&ctx, req, &reply)); !s.ok()) return s;
  return std::move(*reply.mutable_group());
}

absl::Status GrpcClient::RemovePlacementGroup(const std::string& id) {
  v1::RemovePlacementGroupRequest req;
  req.set_placement_group_id(id);
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, token_, options_.call_timeout);
  v1::RemovePlacementGroupReply reply;
  return rpc::FromGrpc(groups_->RemovePlacementGroup(&ctx, req, &reply));
}

absl::StatusOr<std::string> GrpcClient::UploadWorkingDir(const std::string& dir) {
  absl::StatusOr<std::string> packed = archive::PackDirectory(dir, kMaxWorkingDirBytes, "working_dir");
  if (!packed.ok()) return packed.status();
  v1::KvPutRequest req;
  const std::string digest = archive::Sha256Digest(*packed);
  req.set_key(absl::StrCat(kWorkingDirKeyPrefix, digest));
  req.set_value(std::move(*packed));
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, token_, std::max(options_.call_timeout, absl::Seconds(60)));
  v1::KvPutReply reply;
  absl::Status s = rpc::FromGrpc(kv_->Put(&ctx, req, &reply));
  if (!s.ok() && !absl::IsAlreadyExists(s)) return s;  // already there: the same content
  return digest;
}

absl::Status GrpcClient::KvPut(const std::string& key, const std::string& value) {
  v1::KvPutRequest req;
  req.set_key(key);
  req.set_value(value);
  req.set_overwrite(true);
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, token_, options_.call_timeout);
  v1::KvPutReply reply;
  return rpc::FromGrpc(kv_->Put(&ctx, req, &reply));
}

absl::StatusOr<std::string> GrpcClient::KvGet(const std::string& key) {
  v1::KvGetRequest req;
  req.set_key(key);
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, token_, options_.call_timeout);
  v1::KvGetReply reply;
  if (absl::Status s = rpc::FromGrpc(kv_->Get(&ctx, req, &reply)); !s.ok()) return s;
  return std::move(*reply.mutable_value());
}

absl::StatusOr<v1::ActorInfo> GrpcClient::Lookup(const v1::GetActorRequest& req, absl::Duration timeout) {
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, token_, timeout);
  v1::GetActorReply reply;
  if (absl::Status s = rpc::FromGrpc(head_->GetActor(&ctx, req, &reply)); !s.ok()) return s;
  NoteLimit(reply.actor());
  return std::move(*reply.mutable_actor());
}

void GrpcClient::NoteLimit(const v1::ActorInfo& info) {
  constexpr size_t kMaxLimits = 100000;
  const int limit = info.spec().max_pending_calls();
  absl::MutexLock lock(&mu_);
  auto it = limits_.find(info.actor_id());
  if (it != limits_.end()) {
    it->second->limit.store(limit);
    return;
  }
  if (limit <= 0) return;
  auto entry = std::make_shared<PendingLimit>();
  entry->limit = limit;
  limits_.emplace(info.actor_id(), std::move(entry));
  limits_order_.push_back(info.actor_id());
  if (limits_order_.size() > kMaxLimits) {
    limits_.erase(limits_order_.front());
    limits_order_.pop_front();
  }
}

absl::StatusOr<ActorHandle> GrpcClient::GetActor(const std::string& name, const std::string& ns) {
  v1::GetActorRequest req;
  req.set_name(name);
  req.set_namespace_(ns);
  absl::StatusOr<v1::ActorInfo> info = Lookup(req);
  if (!info.ok()) return info.status();
  return ActorHandle{info->actor_id()};
}

absl::StatusOr<v1::ActorInfo> GrpcClient::Describe(const ActorHandle& actor) {
  v1::GetActorRequest req;
  req.set_actor_id(actor.actor_id);
  return Lookup(req);
}

absl::Status GrpcClient::Kill(const ActorHandle& actor) { return KillActor(actor, /*restart=*/false); }

absl::Status GrpcClient::Restart(const ActorHandle& actor) { return KillActor(actor, /*restart=*/true); }

absl::StatusOr<bool> GrpcClient::SetBlocked(const ActorHandle& actor, bool blocked) {
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, token_, absl::Seconds(10));
  v1::SetActorBlockedRequest req;
  req.set_actor_id(actor.actor_id);
  req.set_blocked(blocked);
  v1::SetActorBlockedReply reply;
  if (absl::Status s = rpc::FromGrpc(head_->SetActorBlocked(&ctx, req, &reply)); !s.ok()) return s;
  return reply.holds_cpu();
}

absl::Status GrpcClient::KillActor(const ActorHandle& actor, bool restart) {
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, token_, absl::Seconds(10));
  v1::KillActorByIdRequest req;
  req.set_actor_id(actor.actor_id);
  req.set_restart(restart);
  v1::KillActorByIdReply reply;
  absl::Status s = rpc::FromGrpc(head_->KillActor(&ctx, req, &reply));
  absl::MutexLock lock(&mu_);
  ForgetRouteLocked(actor.actor_id);
  return s;
}

absl::Status GrpcClient::Explain(const std::string& actor_id, const std::string& address,
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
    ForgetRouteLocked(actor_id, address);
  }
  // Give the head a moment to hear of the death from the worker.
  absl::Time deadline = absl::Now() + (unreachable ? absl::Seconds(5) : absl::Milliseconds(300));
  while (true) {
    absl::StatusOr<v1::ActorInfo> info = Describe({actor_id});
    if (info.ok() && (info->state() != v1::ACTOR_ALIVE || info->address() != address)) {
      absl::MutexLock lock(&mu_);
      ForgetRouteLocked(actor_id, address);
      // DEAD for good is FailedPrecondition (Ray's ActorDiedError); dying to restart, or
      // already restarted elsewhere, is Unavailable (ActorUnavailableError).
      std::string why = absl::StrCat("actor died: ", info->death_reason());
      return info->state() == v1::ACTOR_DEAD ? absl::FailedPreconditionError(why)
                                             : absl::UnavailableError(why);
    }
    if (absl::Now() > deadline)
      return unreachable ? absl::UnavailableError(
                               absl::StrCat("actor ", actor_id, " unreachable: ", failure.error_message()))
                         : rpc::FromGrpc(failure);
    absl::SleepFor(absl::Milliseconds(20));
  }
}

absl::Status GrpcClient::CheckSize(const ActorHandle& actor, const std::string& method,
                                   const std::string& args) const {
  // Args larger than a message go as parts; the method name goes once, in the first.
  if (method.size() + client_internal::kCallOverhead + 1024 > options_.max_message_bytes)
    return absl::InvalidArgumentError(absl::StrCat("actor ", actor.actor_id, ": a method name of ",
                                                   method.size(), " bytes does not fit in one message"));
  if (args.size() <= options_.max_call_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "actor ", actor.actor_id, " method ", method.substr(0, 128), ": args of ", args.size(),
      " bytes are over the limit of ", options_.max_call_bytes, " bytes (ClientOptions.max_call_bytes)"));
}

std::future<absl::StatusOr<std::string>> GrpcClient::CallAsync(const ActorHandle& actor,
                                                               const std::string& method,
                                                               const std::string& args, CallOptions o) {
  std::promise<CallResult> promise;
  std::future<CallResult> result = promise.get_future();
  CallDone done(std::move(promise));
  absl::Status invalid = CheckSize(actor, method, args);
  if (invalid.ok() && o.retries < -1)
    invalid = absl::InvalidArgumentError(
        absl::StrCat("CallOptions.retries: ", o.retries, " is below -1 (-1: retry without end)"));
  if (invalid.ok() && o.timeout && *o.timeout < absl::ZeroDuration())
    invalid = absl::InvalidArgumentError(
        absl::StrCat("CallOptions.timeout: ", absl::FormatDuration(*o.timeout), " is negative"));
  if (!invalid.ok()) {
    done(invalid);
    return result;
  }
  const absl::Duration timeout = o.timeout.value_or(options_.call_timeout);
  std::shared_ptr<PendingLimit> limit;
  std::shared_ptr<CallStream> stream;
  {
    absl::MutexLock lock(&mu_);
    if (o.pending_limit && !limits_.empty()) {
      if (auto l = limits_.find(actor.actor_id); l != limits_.end()) limit = l->second;
    }
    auto it = routes_.find(actor.actor_id);
    if (it != routes_.end() && !it->second.resolving) stream = it->second.stream;
  }
  if (limit != nullptr && limit->limit.load() > 0) {
    // Ray's max_pending_calls: this client's calls to the actor whose results are not in yet.
    const int before = limit->in_flight.fetch_add(1);
    if (before >= limit->limit.load()) {
      limit->in_flight.fetch_sub(1);
      done(absl::ResourceExhaustedError(absl::StrCat(
          "actor ", actor.actor_id, ": ", before, " calls of this client are pending (max_pending_calls=",
          limit->limit.load(), "): wait for some of their results first")));
      return result;
    }
    done = CallDone([inner = std::move(done), limit](CallResult r) mutable {
      limit->in_flight.fetch_sub(1);
      inner(std::move(r));
    });
  }
  if (o.retries == 0) {
    // The common case, an open stream and nothing to keep: the args are copied once, into the
    // stream's batch. Calls waiting for a look-up go first, so it is taken only when none wait.
    if (stream != nullptr && stream->Enqueue(method, args, timeout, done)) return result;
  }
  auto call = std::make_shared<HeldCall>();
  call->actor_id = actor.actor_id;
  call->method = method;
  call->args = args;
  call->timeout = timeout;
  call->retries = o.retries;
  call->retry_result = std::move(o.retry_result);
  call->done = std::move(done);
  Submit(std::move(call));
  return result;
}

bool GrpcClient::EnqueueOn(CallStream& stream, const HeldCallPtr& call) {
  if (call->retries == 0) return stream.Enqueue(call->method, call->args, call->timeout, call->done);
  CallDone finish([this, call](CallResult r) { Finish(call, std::move(r)); });
  return stream.Enqueue(call->method, call->args, call->timeout, finish);
}

void GrpcClient::Submit(HeldCallPtr call) {
  const std::string actor_id = call->actor_id;
  // A stream that ended between the lookup and the enqueue is replaced; a fresh one ends only
  // after a connection attempt, so a second try practically always takes the call.
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::shared_ptr<CallStream> stream;
    bool lookup = false;
    {
      absl::MutexLock lock(&mu_);
      if (shutting_down_) break;
      auto [it, inserted] = routes_.try_emplace(actor_id);
      Route& r = it->second;
      if (inserted) {
        r.resolving = true;
        r.resolve_start = absl::Now();
        lookup = true;
      }
      if (r.resolving) {
        r.waiting.push_back(std::move(call));
      } else {
        if (r.stream == nullptr || r.stream->ended()) OpenStreamLocked(it->first, r);
        stream = r.stream;
      }
    }
    if (lookup) StartLookup(actor_id);
    if (stream == nullptr) return;  // held until the look-up says where the actor is
    if (EnqueueOn(*stream, call)) return;
  }
  bool stopping;
  {
    absl::MutexLock lock(&mu_);
    stopping = shutting_down_;
  }
  if (stopping) {
    call->done(absl::CancelledError("the client is shutting down"));
    return;
  }
  const std::string why =
      absl::StrCat("actor ", call->actor_id, ": its call stream ended as soon as it opened, three times");
  Finish(std::move(call), absl::UnavailableError(why));
}

void GrpcClient::OpenStreamLocked(const std::string& actor_id, Route& r) {
  client_internal::CallStreamOptions o{actor_id,
                                       r.address,
                                       token_,
                                       caller_id_,
                                       options_.max_message_bytes,
                                       [this](StreamEnd end) { OnStreamEnd(std::move(end)); },
                                       [this](absl::Time deadline) { OnEarlierDeadline(deadline); }};
  o.max_result_bytes = options_.max_call_bytes;
  r.stream = CallStream::Create(r.stub, r.next_seq, std::move(o));
  {
    // Recorded before it starts: a stream that fails at once reaches OnStreamEnd (which
    // takes it out of live_ and hands its last reference to the failure loop) on a gRPC
    // thread, possibly before Start returns. Recorded after that, live_ would keep a
    // pointer nothing else keeps alive, for the expiry loop to use after it is freed.
    absl::MutexLock streams(&streams_mu_);
    live_.insert(r.stream.get());
  }
  r.stream->Start();
}

void GrpcClient::ForgetRouteLocked(const std::string& actor_id, absl::string_view address) {
  auto it = routes_.find(actor_id);
  if (it == routes_.end() || it->second.resolving) return;
  // A route to another address is newer news of the actor (another call found it meanwhile).
  if (!address.empty() && it->second.address != address) return;
  routes_.erase(it);
}

void GrpcClient::StartLookup(const std::string& actor_id) {
  auto lookup = std::make_unique<AsyncLookup>();
  AsyncLookup* l = lookup.get();
  l->actor_id = actor_id;
  l->request.set_actor_id(actor_id);
  rpc::PrepareCall(&l->ctx, token_, absl::Seconds(10));
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return;  // the destructor fails the calls that wait
    lookups_.emplace(l, std::move(lookup));
  }
  head_->async()->GetActor(&l->ctx, &l->request, &l->reply, [this, l](grpc::Status s) { OnLookup(*l, s); });
}

void GrpcClient::OnLookup(AsyncLookup& l, const grpc::Status& status) {
  std::deque<HeldCallPtr> failed;
  absl::Status why;
  {
    absl::MutexLock lock(&mu_);
    auto it = routes_.find(l.actor_id);
    if (!shutting_down_ && it != routes_.end() && it->second.resolving) {
      Route& r = it->second;
      const v1::ActorInfo& info = l.reply.actor();
      const absl::Time now = absl::Now();
      if (!status.ok()) {
        absl::Status head = rpc::FromGrpc(status);
        why = absl::Status(head.code(),
                           absl::StrCat("asking the head where actor ", l.actor_id, " is: ", head.message()));
      } else if (info.state() == v1::ACTOR_DEAD) {
        why = absl::FailedPreconditionError(absl::StrCat("actor is dead: ", info.death_reason()));
      } else if (info.state() == v1::ACTOR_ALIVE) {
        r.address = info.address();
        r.stub = v1::ActorService::NewStub(ActorChannel(info.address(), options_));
        r.next_seq = std::make_shared<std::atomic<uint64_t>>(1);
        r.resolving = false;
        // The calls that waited go out first, in order, before any call made from now on.
        int opened = 0;
        while (!r.waiting.empty()) {
          if (r.stream == nullptr || r.stream->ended()) {
            if (++opened > 3) break;
            OpenStreamLocked(it->first, r);
          }
          if (EnqueueOn(*r.stream, r.waiting.front())) r.waiting.pop_front();
        }
        failed.swap(r.waiting);
        why = absl::UnavailableError(
            absl::StrCat("actor ", l.actor_id, ": its call stream ended as soon as it opened, three times"));
      } else if (now - r.resolve_start > options_.restart_wait) {
        why = absl::UnavailableError(
            absl::StrCat("actor ", l.actor_id, " is still ", rpc::ActorStateName(info.state()), " after ",
                         absl::FormatDuration(options_.restart_wait),
                         info.pending_reason().empty() ? "" : absl::StrCat(": ", info.pending_reason())));
      } else {
        // An actor starting now is up in tens of milliseconds (a Python actor forked by its
        // worker's fork server): asked often at first, then every 20 ms.
        absl::Duration again =
            now - r.resolve_start < absl::Milliseconds(200) ? absl::Milliseconds(2) : absl::Milliseconds(20);
        if (timers_.empty() || now + again < timers_.top().when) resolver_cv_.SignalAll();
        timers_.push(Timer{now + again, l.actor_id, nullptr});
      }
      if (!why.ok() && r.resolving) {
        failed.swap(r.waiting);
        routes_.erase(it);
      }
    }
  }
  for (HeldCallPtr& call : failed) Finish(std::move(call), why);
  absl::MutexLock lock(&mu_);
  auto node = lookups_.extract(&l);
  answered_.push_back(std::move(node.mapped()));
  resolver_cv_.SignalAll();  // the resolver frees it; the destructor waits for lookups_ to empty
}

void GrpcClient::Finish(HeldCallPtr call, CallResult result) {
  const bool again =
      call->retries != 0 && ((!result.ok() && absl::IsUnavailable(result.status()) &&
                              !client_internal::FromActor(result.status())) ||
                             (result.ok() && call->retry_result && call->retry_result(*result)));
  if (again) {
    absl::MutexLock lock(&mu_);
    if (!shutting_down_) {
      if (call->retries > 0) --call->retries;
      ++call->attempts;
      const absl::Duration backoff = std::min(
          absl::Milliseconds(5) * (int64_t{1} << std::min(call->attempts - 1, 10)), absl::Seconds(1));
      const absl::Time when = absl::Now() + backoff;
      if (timers_.empty() || when < timers_.top().when) resolver_cv_.SignalAll();
      timers_.push(Timer{when, call->actor_id, std::move(call)});
      return;
    }
    result = absl::CancelledError("the client is shutting down");
  }
  call->done(std::move(result));
}

void GrpcClient::ResolveLoop() {
  absl::MutexLock lock(&mu_);
  while (!resolver_stop_) {
    if (!answered_.empty()) {
      std::vector<std::unique_ptr<AsyncLookup>> answered;
      answered.swap(answered_);
      mu_.Unlock();
      answered.clear();
      mu_.Lock();
      continue;
    }
    const absl::Time now = absl::Now();
    std::vector<std::string> lookups;
    std::vector<HeldCallPtr> again;
    while (!timers_.empty() && timers_.top().when <= now) {
      Timer t = timers_.top();
      timers_.pop();
      if (t.call != nullptr) {
        again.push_back(std::move(t.call));
      } else if (auto it = routes_.find(t.actor_id); it != routes_.end() && it->second.resolving) {
        lookups.push_back(std::move(t.actor_id));
      }
    }
    if (lookups.empty() && again.empty()) {
      resolver_cv_.WaitWithDeadline(&mu_, timers_.empty() ? absl::InfiniteFuture() : timers_.top().when);
      continue;
    }
    mu_.Unlock();
    for (const std::string& id : lookups) StartLookup(id);
    for (HeldCallPtr& call : again) Submit(std::move(call));
    mu_.Lock();
  }
}

void GrpcClient::OnStreamEnd(StreamEnd end) {
  {
    absl::MutexLock lock(&streams_mu_);
    live_.erase(end.stream.get());
    ended_.push_back(std::move(end));  // even with nothing to explain: the stream dies there
  }
  streams_cv_.SignalAll();
}

namespace {
int64_t ExpiryNanos(absl::Time t) {
  return t == absl::InfiniteFuture() ? std::numeric_limits<int64_t>::max() : absl::ToUnixNanos(t);
}
}  // namespace

void GrpcClient::ExpireLoop() {
  absl::MutexLock lock(&streams_mu_);
  while (!stop_) {
    // "Never" while scanning: a stream scanned already that gains an earlier deadline now
    // finds it earlier than this, and waits on streams_mu_ to lower what the scan sets below.
    next_expiry_ns_.store(std::numeric_limits<int64_t>::max());
    absl::Time now = absl::Now(), next = absl::InfiniteFuture();
    bool missed = false;
    for (CallStream* s : live_) {
      bool expired = false;
      next = std::min(next, s->Expire(now, &expired));
      if (expired) missed_.emplace_back(s->actor_id(), s->address());
      missed = missed || expired;
    }
    if (missed) streams_cv_.SignalAll();
    next_expiry_ns_.store(ExpiryNanos(next));
    expire_cv_.WaitWithDeadline(&streams_mu_, next);
  }
}

void GrpcClient::OnEarlierDeadline(absl::Time deadline) {
  // The common case (a steady flow of calls with one timeout): each new deadline is later
  // than the one the loop already waits for.
  const int64_t ns = ExpiryNanos(deadline);
  if (ns >= next_expiry_ns_.load()) return;
  absl::MutexLock lock(&streams_mu_);
  if (ns >= next_expiry_ns_.load()) return;
  next_expiry_ns_.store(ns);
  expire_cv_.Signal();
}

void GrpcClient::CheckMoved(const std::string& actor_id, const std::string& address) {
  // At most once a second per actor: a slow actor misses many deadlines at once.
  absl::Time now = absl::Now();
  absl::Time& last = last_moved_check_[actor_id];
  if (now - last < absl::Seconds(1)) return;
  last = now;
  if (last_moved_check_.size() > 100000) last_moved_check_.clear();
  // Briefly: ended streams wait on this thread for their explanations.
  v1::GetActorRequest req;
  req.set_actor_id(actor_id);
  absl::StatusOr<v1::ActorInfo> info = Lookup(req, absl::Seconds(1));
  if (!info.ok() || (info->state() == v1::ACTOR_ALIVE && info->address() == address))
    return;  // slow, not moved
  std::shared_ptr<CallStream> stream;
  {
    absl::MutexLock lock(&mu_);
    auto it = routes_.find(actor_id);
    if (it == routes_.end() || it->second.address != address) return;  // rerouted already
    stream = std::move(it->second.stream);
    routes_.erase(it);
  }
  if (stream == nullptr) return;
  std::string where = info->state() == v1::ACTOR_ALIVE
                          ? absl::StrCat("now ALIVE at ", info->address())
                          : absl::StrCat("now ", rpc::ActorStateName(info->state()));
  stream->Shutdown(absl::UnavailableError(absl::StrCat("actor ", actor_id, " no longer runs at ", address,
                                                       " (", where, info->death_reason().empty() ? "" : ": ",
                                                       info->death_reason(), ")")));
}

void GrpcClient::FailureLoop() {
  while (true) {
    std::optional<StreamEnd> ended;
    bool stopping;
    std::deque<std::pair<std::string, std::string>> missed;
    {
      absl::MutexLock lock(&streams_mu_);
      while (ended_.empty() && missed_.empty() && !stop_) streams_cv_.Wait(&streams_mu_);
      if (ended_.empty() && stop_) return;
      // Explanations first: an ended stream's calls have no deadline any more.
      if (!ended_.empty()) {
        ended = std::move(ended_.front());
        ended_.pop_front();
      } else {
        missed.swap(missed_);
      }
      stopping = stop_;
    }
    if (ended) {
      ExplainEnded(std::move(*ended), stopping);
      continue;
    }
    absl::flat_hash_set<std::pair<std::string, std::string>> seen;  // once per stream
    for (const auto& [actor, address] : missed)
      if (seen.insert({actor, address}).second) CheckMoved(actor, address);
  }
}

void GrpcClient::ExplainEnded(StreamEnd end, bool stopping) {
  if (end.unanswered.empty()) return;  // `end` (and the stream) released here
  absl::Status why;
  if (stopping) {
    why = absl::CancelledError("the client is shutting down");
  } else {
    grpc::Status status = end.status;
    if (status.ok()) {
      status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the call stream ended with calls unanswered");
    } else if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
      // The address now hosts another actor: ours is gone from it.
      status = grpc::Status(grpc::StatusCode::UNAVAILABLE, status.error_message());
    }
    // One explanation (a look at the head) for every call the stream still carried.
    why = Explain(end.actor_id, end.address, status);
  }
  for (auto& done : end.unanswered) done(why);
}

}  // namespace skyrl
