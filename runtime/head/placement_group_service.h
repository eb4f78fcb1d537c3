// gRPC face of the PlacementGroupManager. Converts statuses at the edge; no state of its own.
#pragma once

#include "runtime/head/placement_group_manager.h"
#include "runtime/rpc/auth.h"
#include "skyrl/placement_group.grpc.pb.h"

namespace skyrl::head {

class PlacementGroupServiceImpl final : public v1::PlacementGroupService::Service {
 public:
  PlacementGroupServiceImpl(PlacementGroupManager& groups, const rpc::TokenAuth& auth)
      : groups_(groups), auth_(auth) {}

  grpc::Status CreatePlacementGroup(grpc::ServerContext*, const v1::CreatePlacementGroupRequest*,
                                    v1::CreatePlacementGroupReply*) override;
  grpc::Status WaitPlacementGroup(grpc::ServerContext*, const v1::WaitPlacementGroupRequest*,
                                  v1::WaitPlacementGroupReply*) override;
  grpc::Status RemovePlacementGroup(grpc::ServerContext*, const v1::RemovePlacementGroupRequest*,
                                    v1::RemovePlacementGroupReply*) override;
  grpc::Status GetPlacementGroup(grpc::ServerContext*, const v1::GetPlacementGroupRequest*,
                                 v1::GetPlacementGroupReply*) override;
  grpc::Status ListPlacementGroups(grpc::ServerContext*, const v1::ListPlacementGroupsRequest*,
                                   v1::ListPlacementGroupsReply*) override;

 private:
  PlacementGroupManager& groups_;
  const rpc::TokenAuth& auth_;
};

}  // namespace skyrl::head
