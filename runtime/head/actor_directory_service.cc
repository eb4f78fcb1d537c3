#include "runtime/head/actor_directory_service.h"

#include "runtime/rpc/status.h"

namespace skyrl::head {

grpc::Status ActorDirectoryImpl::CreateActor(grpc::ServerContext* ctx, const v1::CreateActorRequest* req,
                                             v1::CreateActorReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return s;
  absl::StatusOr<v1::ActorInfo> a = actors_.Create(req->spec());
  if (!a.ok()) return rpc::ToGrpc(a.status());
  *reply->mutable_actor() = std::move(*a);
  return grpc::Status::OK;
}

grpc::Status ActorDirectoryImpl::GetActor(grpc::ServerContext* ctx, const v1::GetActorRequest* req,
                                          v1::GetActorReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return s;
  absl::StatusOr<v1::ActorInfo> a;
  if (!req->actor_id().empty()) {
    absl::StatusOr<ActorId> id = ActorId::Parse(req->actor_id());
    if (!id.ok()) return rpc::ToGrpc(id.status());
    a = actors_.Get(*id);
  } else if (!req->name().empty()) {
    a = actors_.GetByName(req->namespace_(), req->name());
  } else {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "give actor_id or name");
  }
  if (!a.ok()) return rpc::ToGrpc(a.status());
  *reply->mutable_actor() = std::move(*a);
  return grpc::Status::OK;
}

grpc::Status ActorDirectoryImpl::KillActor(grpc::ServerContext* ctx, const v1::KillActorByIdRequest* req,
                                           v1::KillActorByIdReply*) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return s;
  absl::StatusOr<ActorId> id = ActorId::Parse(req->actor_id());
  if (!id.ok()) return rpc::ToGrpc(id.status());
  return rpc::ToGrpc(actors_.Kill(*id));
}

grpc::Status ActorDirectoryImpl::ListActors(grpc::ServerContext* ctx, const v1::ListActorsRequest*,
                                            v1::ListActorsReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return s;
  for (auto& a : actors_.List()) *reply->add_actors() = std::move(a);
  return grpc::Status::OK;
}

grpc::Status ActorDirectoryImpl::ReportActorExit(grpc::ServerContext* ctx, const v1::ReportActorExitRequest* req,
                                                 v1::ReportActorExitReply*) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return s;
  absl::StatusOr<NodeId> node = NodeId::Parse(req->node_id());
  if (!node.ok()) return rpc::ToGrpc(node.status());
  actors_.OnActorExit(*node, req->exit());
  return grpc::Status::OK;
}

}  // namespace skyrl::head
