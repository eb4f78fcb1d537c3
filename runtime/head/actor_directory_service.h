// gRPC face of the ActorManager. Converts statuses at the edge; holds no state of its own.
#pragma once

#include "runtime/head/actor_manager.h"
#include "runtime/rpc/auth.h"
#include "skyrl/actor_directory.grpc.pb.h"

namespace skyrl::head {

class ActorDirectoryImpl final : public v1::ActorDirectory::Service {
 public:
  ActorDirectoryImpl(ActorManager& actors, const rpc::TokenAuth& auth) : actors_(actors), auth_(auth) {}

  grpc::Status CreateActor(grpc::ServerContext*, const v1::CreateActorRequest*, v1::CreateActorReply*) override;
  grpc::Status GetActor(grpc::ServerContext*, const v1::GetActorRequest*, v1::GetActorReply*) override;
  grpc::Status KillActor(grpc::ServerContext*, const v1::KillActorByIdRequest*, v1::KillActorByIdReply*) override;
  grpc::Status ListActors(grpc::ServerContext*, const v1::ListActorsRequest*, v1::ListActorsReply*) override;
  grpc::Status ReportActorExit(grpc::ServerContext*, const v1::ReportActorExitRequest*,
                               v1::ReportActorExitReply*) override;

 private:
  ActorManager& actors_;
  const rpc::TokenAuth& auth_;
};

}  // namespace skyrl::head
