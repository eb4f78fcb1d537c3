#include "runtime/head/actor_directory_service.h"

#include "absl/strings/str_cat.h"
#include "runtime/rpc/status.h"

namespace skyrl::head {
grpc::ServerUnaryReactor* ActorDirectoryImpl::CreateActor(grpc::CallbackServerContext* ctx,
                                                          const v1::CreateActorRequest* req,
                                                          v1::CreateActorReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return rpc::FinishNow(ctx, s);
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  actors_.CreateAsync(
      req->spec(),
      [reactor, reply](absl::StatusOr<v1::ActorInfo> a) {
        if (!a.ok()) return reactor->Finish(rpc::ToGrpc(a.status()));
        *reply->mutable_actor() = std::move(*a);
        reactor->Finish(grpc::Status::OK);
      },
      req->return_pending());
  return reactor;
}

grpc::ServerUnaryReactor* ActorDirectoryImpl::CreateActors(grpc::CallbackServerContext* ctx,
                                                           const v1::CreateActorsRequest* req,
                                                           v1::CreateActorsReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return rpc::FinishNow(ctx, s);
  if (req->specs_size() == 0)
    return rpc::FinishNow(ctx,
                          rpc::ToGrpc(absl::InvalidArgumentError("specs: give at least one actor spec")));
  if (req->specs_size() > kMaxCreateBatch)
    return rpc::FinishNow(
        ctx, rpc::ToGrpc(absl::InvalidArgumentError(
                 absl::StrCat("specs: at most ", kMaxCreateBatch, " per call, got ", req->specs_size()))));
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  std::vector<v1::ActorSpec> specs(req->specs().begin(), req->specs().end());
  actors_.CreateBatchAsync(std::move(specs),
                           [reactor, reply](std::vector<absl::StatusOr<v1::ActorInfo>> results) {
                             for (auto& r : results) {
                               v1::CreateActorResult* out = reply->add_results();
                               if (r.ok()) {
                                 *out->mutable_actor() = std::move(*r);
                               } else {
                                 out->set_code(static_cast<int32_t>(r.status().code()));
                                 out->set_message(std::string(r.status().message()));
                               }
                             }
                             reactor->Finish(grpc::Status::OK);
                           });
  return reactor;
}

grpc::ServerUnaryReactor* ActorDirectoryImpl::GetActor(grpc::CallbackServerContext* ctx,
                                                       const v1::GetActorRequest* req,
                                                       v1::GetActorReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return rpc::FinishNow(ctx, s);
  absl::StatusOr<v1::ActorInfo> a;
  if (!req->actor_id().empty()) {
    absl::StatusOr<ActorId> id = ActorId::Parse(req->actor_id());
    if (!id.ok()) return rpc::FinishNow(ctx, rpc::ToGrpc(id.status()));
    a = actors_.Get(*id);
  } else if (!req->name().empty()) {
    a = actors_.GetByName(req->namespace_(), req->name());
  } else {
    return rpc::FinishNow(ctx, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "give actor_id or name"));
  }
  if (!a.ok()) return rpc::FinishNow(ctx, rpc::ToGrpc(a.status()));
  *reply->mutable_actor() = std::move(*a);
  return rpc::FinishNow(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* ActorDirectoryImpl::KillActor(grpc::CallbackServerContext* ctx,
                                                        const v1::KillActorByIdRequest* req,
                                                        v1::KillActorByIdReply*) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return rpc::FinishNow(ctx, s);
  absl::StatusOr<ActorId> id = ActorId::Parse(req->actor_id());
  if (!id.ok()) return rpc::FinishNow(ctx, rpc::ToGrpc(id.status()));
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  auto finish = [reactor](absl::Status s) { reactor->Finish(rpc::ToGrpc(s)); };
  if (req->restart()) {
    actors_.RestartAsync(*id, std::move(finish));
  } else {
    actors_.KillAsync(*id, std::move(finish));
  }
  return reactor;
}

grpc::ServerUnaryReactor* ActorDirectoryImpl::ListActors(grpc::CallbackServerContext* ctx,
                                                         const v1::ListActorsRequest*,
                                                         v1::ListActorsReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return rpc::FinishNow(ctx, s);
  for (auto& a : actors_.List()) *reply->add_actors() = std::move(a);
  return rpc::FinishNow(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* ActorDirectoryImpl::SetActorBlocked(grpc::CallbackServerContext* ctx,
                                                              const v1::SetActorBlockedRequest* req,
                                                              v1::SetActorBlockedReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return rpc::FinishNow(ctx, s);
  absl::StatusOr<ActorId> id = ActorId::Parse(req->actor_id());
  if (!id.ok()) return rpc::FinishNow(ctx, rpc::ToGrpc(id.status()));
  absl::StatusOr<bool> holds = actors_.SetBlocked(*id, req->blocked());
  if (!holds.ok()) return rpc::FinishNow(ctx, rpc::ToGrpc(holds.status()));
  reply->set_holds_cpu(*holds);
  return rpc::FinishNow(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* ActorDirectoryImpl::ReportActorExit(grpc::CallbackServerContext* ctx,
                                                              const v1::ReportActorExitRequest* req,
                                                              v1::ReportActorExitReply*) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return rpc::FinishNow(ctx, s);
  absl::StatusOr<NodeId> node = NodeId::Parse(req->node_id());
  if (!node.ok()) return rpc::FinishNow(ctx, rpc::ToGrpc(node.status()));
  actors_.OnActorExit(*node, req->exit());
  return rpc::FinishNow(ctx, grpc::Status::OK);
}

}  // namespace skyrl::head
