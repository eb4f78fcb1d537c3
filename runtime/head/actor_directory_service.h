// gRPC face of the ActorManager. Converts statuses at the edge; holds no state of its own.
//
// Served with gRPC's callback API: a handler runs on a gRPC thread and never parks it on a
// long wait. A create returns its reactor at once and finishes it from the completion of the
// worker's StartActor (see ActorManager::CreateAsync), so creates in flight cost no threads
// and no hand-offs between a poller and a handler thread.
#pragma once

#include "runtime/head/actor_manager.h"
#include "runtime/rpc/auth.h"
#include "skyrl/actor_directory.grpc.pb.h"

namespace skyrl::head {

// At most this many specs in one CreateActors call.
inline constexpr int kMaxCreateBatch = 10000;

class ActorDirectoryImpl final : public v1::ActorDirectory::CallbackService {
 public:
  ActorDirectoryImpl(ActorManager& actors, const rpc::TokenAuth& auth) : actors_(actors), auth_(auth) {}

  grpc::ServerUnaryReactor* CreateActor(grpc::CallbackServerContext*, const v1::CreateActorRequest*,
                                        v1::CreateActorReply*) override;
  grpc::ServerUnaryReactor* CreateActors(grpc::CallbackServerContext*, const v1::CreateActorsRequest*,
                                         v1::CreateActorsReply*) override;
  grpc::ServerUnaryReactor* GetActor(grpc::CallbackServerContext*, const v1::GetActorRequest*,
                                     v1::GetActorReply*) override;
  grpc::ServerUnaryReactor* KillActor(grpc::CallbackServerContext*, const v1::KillActorByIdRequest*,
                                      v1::KillActorByIdReply*) override;
  grpc::ServerUnaryReactor* ListActors(grpc::CallbackServerContext*, const v1::ListActorsRequest*,
                                       v1::ListActorsReply*) override;
  grpc::ServerUnaryReactor* SetActorBlocked(grpc::CallbackServerContext*, const v1::SetActorBlockedRequest*,
                                            v1::SetActorBlockedReply*) override;
  grpc::ServerUnaryReactor* ReportActorExit(grpc::CallbackServerContext*, const v1::ReportActorExitRequest*,
                                            v1::ReportActorExitReply*) override;

 private:
  ActorManager& actors_;
  const rpc::TokenAuth& auth_;
};

}  // namespace skyrl::head
