// gRPC face of the PlacementGroupManager. Converts statuses at the edge; no state of its own.
//
// Served with gRPC's callback API: no handler parks a gRPC thread. A WaitPlacementGroup that
// cannot be answered now is settled later by the manager's wait thread (WaitAsync), a
// remove finishes once the workers were told to kill the group's actors (RemoveAsync).
#pragma once

#include "runtime/head/placement_group_manager.h"
#include "runtime/rpc/auth.h"
#include "skyrl/placement_group.grpc.pb.h"

namespace skyrl::head {

// At most this many specs in one CreatePlacementGroups call.
inline constexpr int kMaxGroupBatch = 10000;

class PlacementGroupServiceImpl final : public v1::PlacementGroupService::CallbackService {
 public:
  PlacementGroupServiceImpl(PlacementGroupManager& groups, const rpc::TokenAuth& auth)
      : groups_(groups), auth_(auth) {}

  grpc::ServerUnaryReactor* CreatePlacementGroup(grpc::CallbackServerContext*,
                                                 const v1::CreatePlacementGroupRequest*,
                                                 v1::CreatePlacementGroupReply*) override;
  // Each spec on its own, in order (a name taken by an earlier item is AlreadyExists); the
  // call fails as a whole only for an empty batch or one over kMaxGroupBatch.
  grpc::ServerUnaryReactor* CreatePlacementGroups(grpc::CallbackServerContext*,
                                                  const v1::CreatePlacementGroupsRequest*,
                                                  v1::CreatePlacementGroupsReply*) override;
  grpc::ServerUnaryReactor* WaitPlacementGroup(grpc::CallbackServerContext*,
                                               const v1::WaitPlacementGroupRequest*,
                                               v1::WaitPlacementGroupReply*) override;
  grpc::ServerUnaryReactor* RemovePlacementGroup(grpc::CallbackServerContext*,
                                                 const v1::RemovePlacementGroupRequest*,
                                                 v1::RemovePlacementGroupReply*) override;
  grpc::ServerUnaryReactor* GetPlacementGroup(grpc::CallbackServerContext*,
                                              const v1::GetPlacementGroupRequest*,
                                              v1::GetPlacementGroupReply*) override;
  grpc::ServerUnaryReactor* ListPlacementGroups(grpc::CallbackServerContext*,
                                                const v1::ListPlacementGroupsRequest*,
                                                v1::ListPlacementGroupsReply*) override;

 private:
  PlacementGroupManager& groups_;
  const rpc::TokenAuth& auth_;
};

}  // namespace skyrl::head
