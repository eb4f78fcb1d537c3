#include "runtime/head/placement_group_service.h"

#include <algorithm>

#include "runtime/rpc/status.h"

namespace skyrl::head {
namespace {

// A wait never outlasts the caller's deadline, nor ten minutes.
absl::Duration WaitBudget(grpc::ServerContext* ctx, int64_t timeout_ms) {
  absl::Duration want = absl::Milliseconds(std::clamp<int64_t>(timeout_ms, 0, 600'000));
  absl::Duration left = absl::FromChrono(ctx->deadline() - std::chrono::system_clock::now());
  return std::max(absl::ZeroDuration(), std::min(want, left - absl::Milliseconds(50)));
}

}  // namespace

grpc::Status PlacementGroupServiceImpl::CreatePlacementGroup(grpc::ServerContext* ctx,
                                                             const v1::CreatePlacementGroupRequest* req,
                                                             v1::CreatePlacementGroupReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return s;
  absl::StatusOr<v1::PlacementGroupInfo> g = groups_.Create(req->spec());
  if (!g.ok()) return rpc::ToGrpc(g.status());
  *reply->mutable_group() = std::move(*g);
  return grpc::Status::OK;
}

grpc::Status PlacementGroupServiceImpl::WaitPlacementGroup(grpc::ServerContext* ctx,
                                                           const v1::WaitPlacementGroupRequest* req,
                                                           v1::WaitPlacementGroupReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return s;
  absl::StatusOr<PlacementGroupId> id = PlacementGroupId::Parse(req->placement_group_id());
  if (!id.ok()) return rpc::ToGrpc(absl::InvalidArgumentError(absl::StrCat("placement_group_id: ", id.status().message())));
  if (req->timeout_ms() < 0) return rpc::ToGrpc(absl::InvalidArgumentError("timeout_ms: must be 0 or more"));
  absl::StatusOr<v1::PlacementGroupInfo> g = groups_.Wait(*id, WaitBudget(ctx, req->timeout_ms()));
  if (!g.ok()) return rpc::ToGrpc(g.status());
  *reply->mutable_group() = std::move(*g);
  return grpc::Status::OK;
}

grpc::Status PlacementGroupServiceImpl::RemovePlacementGroup(grpc::ServerContext* ctx,
                                                             const v1::RemovePlacementGroupRequest* req,
                                                             v1::RemovePlacementGroupReply*) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return s;
  absl::StatusOr<PlacementGroupId> id = PlacementGroupId::Parse(req->placement_group_id());
  if (!id.ok()) return rpc::ToGrpc(absl::InvalidArgumentError(absl::StrCat("placement_group_id: ", id.status().message())));
  return rpc::ToGrpc(groups_.Remove(*id));
}

grpc::Status PlacementGroupServiceImpl::GetPlacementGroup(grpc::ServerContext* ctx,
                                                          const v1::GetPlacementGroupRequest* req,
                                                          v1::GetPlacementGroupReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return s;
  absl::StatusOr<v1::PlacementGroupInfo> g;
  if (!req->placement_group_id().empty()) {
    absl::StatusOr<PlacementGroupId> id = PlacementGroupId::Parse(req->placement_group_id());
    if (!id.ok()) return rpc::ToGrpc(absl::InvalidArgumentError(absl::StrCat("placement_group_id: ", id.status().message())));
    g = groups_.Get(*id);
  } else if (!req->name().empty()) {
    g = groups_.GetByName(req->namespace_(), req->name());
  } else {
    return rpc::ToGrpc(absl::InvalidArgumentError("give placement_group_id or name"));
  }
  if (!g.ok()) return rpc::ToGrpc(g.status());
  *reply->mutable_group() = std::move(*g);
  return grpc::Status::OK;
}

grpc::Status PlacementGroupServiceImpl::ListPlacementGroups(grpc::ServerContext* ctx,
                                                            const v1::ListPlacementGroupsRequest*,
                                                            v1::ListPlacementGroupsReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return s;
  for (auto& g : groups_.List()) *reply->add_groups() = std::move(g);
  return grpc::Status::OK;
}

}  // namespace skyrl::head
