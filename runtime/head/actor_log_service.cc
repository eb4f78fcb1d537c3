#include "runtime/head/actor_log_service.h"

#include <grpcpp/grpcpp.h>

#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "runtime/rpc/channel.h"
#include "runtime/rpc/status.h"

namespace skyrl::head {

ActorLogRelay::ActorLogRelay(const ActorManager& actors, const NodeManager& nodes, std::string token)
    : actors_(actors), nodes_(nodes), token_(std::move(token)) {}

absl::StatusOr<ActorLogRelay::Located> ActorLogRelay::Locate(const std::string& actor_id,
                                                             const std::string& name, const std::string& ns,
                                                             const char* what) const {
  absl::StatusOr<v1::ActorInfo> actor;
  if (!actor_id.empty()) {
    absl::StatusOr<ActorId> id = ActorId::Parse(actor_id);
    if (!id.ok()) return absl::InvalidArgumentError(absl::StrCat("actor_id: ", id.status().message()));
    actor = actors_.Get(*id);
  } else if (!name.empty()) {
    actor = actors_.GetByName(ns, name);
  } else {
    return absl::InvalidArgumentError("actor_id or name: one of them names the actor");
  }
  if (!actor.ok()) return actor.status();
  const std::string& id = actor->actor_id();
  if (actor->node_id().empty())
    return absl::FailedPreconditionError(absl::StrCat(
        "actor ", id, " has no node yet (", v1::ActorState_Name(actor->state()), "): no ", what, " so far"));
  std::optional<v1::NodeInfo> node = nodes_.Find(actor->node_id());
  if (!node || node->state() != v1::NODE_ALIVE)
    return absl::FailedPreconditionError(absl::StrCat(
        "actor ", id, "'s node ", actor->node_id(), " is gone",
        node ? absl::StrCat(" (", node->death_reason(), ")") : "", "; its ", what, " stays on that machine",
        actor->log_path().empty() ? "" : absl::StrCat(" at ", actor->log_path())));
  return Located{*std::move(actor), *std::move(node)};
}

absl::StatusOr<v1::ActorCallsReply> ActorLogRelay::Calls(const v1::ActorCallsRequest& req) const {
  absl::StatusOr<Located> at = Locate(req.actor_id(), req.name(), req.namespace_(), "call records");
  if (!at.ok()) return at.status();
  v1::ActorCallsRequest forward;
  forward.set_actor_id(at->actor.actor_id());
  auto stub = v1::ActorLogService::NewStub(rpc::MakeChannel(at->node.address()));
  grpc::ClientContext ctx;
  rpc::PrepareCall(&ctx, token_, absl::Seconds(10));
  v1::ActorCallsReply reply;
  if (absl::Status s = rpc::FromGrpc(stub->ActorCalls(&ctx, forward, &reply)); !s.ok())
    return absl::Status(
        s.code(), absl::StrCat("actor ", at->actor.actor_id(), "'s calls on node ", at->actor.node_id(), " (",
                               at->node.address(), "): ", s.message()));
  return reply;
}

absl::Status ActorLogRelay::Stream(const v1::ActorLogRequest& req,
                                   const std::function<bool(const std::string&)>& write,
                                   const std::function<bool()>& cancelled) const {
  absl::StatusOr<Located> at = Locate(req.actor_id(), req.name(), req.namespace_(), "log");
  if (!at.ok()) return at.status();
  const v1::ActorInfo* actor = &at->actor;
  const v1::NodeInfo* node = &at->node;
  const std::string& id = actor->actor_id();

  v1::ActorLogRequest forward = req;
  forward.set_actor_id(id);
  forward.clear_name();
  forward.clear_namespace_();
  auto stub = v1::ActorLogService::NewStub(rpc::MakeChannel(node->address()));
  grpc::ClientContext ctx;
  // A tail is quick; a follow lasts as long as the actor (or the reader) does.
  rpc::PrepareCall(&ctx, token_, req.follow() ? absl::Hours(24 * 365) : absl::Seconds(30));
  // The worker sends nothing while a followed log is quiet: a reader that left is noticed here.
  absl::Notification done;
  std::thread watch([&] {
    while (!done.WaitForNotificationWithTimeout(absl::Milliseconds(200)))
      if (cancelled()) {
        ctx.TryCancel();
        return;
      }
  });
  std::unique_ptr<grpc::ClientReader<v1::ActorLogChunk>> reader = stub->ActorLog(&ctx, forward);
  v1::ActorLogChunk chunk;
  bool stopped = false;
  while (reader->Read(&chunk)) {
    if (!write(chunk.data())) {
      stopped = true;
      ctx.TryCancel();
      break;
    }
  }
  absl::Status s = rpc::FromGrpc(reader->Finish());
  done.Notify();
  watch.join();
  if (stopped || cancelled()) return absl::OkStatus();
  if (!s.ok())
    return absl::Status(s.code(), absl::StrCat("actor ", id, "'s log on node ", actor->node_id(), " (",
                                               node->address(), "): ", s.message()));
  return absl::OkStatus();
}

grpc::Status ActorLogServiceImpl::ActorCalls(grpc::ServerContext* ctx, const v1::ActorCallsRequest* req,
                                             v1::ActorCallsReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return s;
  absl::StatusOr<v1::ActorCallsReply> r = relay_.Calls(*req);
  if (!r.ok()) return rpc::ToGrpc(r.status());
  *reply = std::move(*r);
  return grpc::Status::OK;
}

grpc::Status ActorLogServiceImpl::ActorLog(grpc::ServerContext* ctx, const v1::ActorLogRequest* req,
                                           grpc::ServerWriter<v1::ActorLogChunk>* writer) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return s;
  v1::ActorLogChunk chunk;
  return rpc::ToGrpc(relay_.Stream(
      *req,
      [&](const std::string& data) {
        chunk.set_data(data);
        return writer->Write(chunk);
      },
      [ctx] { return ctx->IsCancelled(); }));
}

}  // namespace skyrl::head
