#include "runtime/head/placement_group_service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/rpc/status.h"

namespace skyrl::head {
namespace {

// A wait never outlasts the caller's deadline, nor ten minutes.
absl::Duration WaitBudget(grpc::CallbackServerContext* ctx, int64_t timeout_ms) {
  absl::Duration want = absl::Milliseconds(std::clamp<int64_t>(timeout_ms, 0, 600'000));
  absl::Duration left = absl::FromChrono(ctx->deadline() - std::chrono::system_clock::now());
  return std::max(absl::ZeroDuration(), std::min(want, left - absl::Milliseconds(50)));
}

absl::StatusOr<PlacementGroupId> ParseGroupId(const std::string& text) {
  absl::StatusOr<PlacementGroupId> id = PlacementGroupId::Parse(text);
  if (!id.ok())
    return absl::InvalidArgumentError(absl::StrCat("placement_group_id: ", id.status().message()));
  return id;
}

}  // namespace

grpc::ServerUnaryReactor* PlacementGroupServiceImpl::CreatePlacementGroup(
    grpc::CallbackServerContext* ctx, const v1::CreatePlacementGroupRequest* req,
    v1::CreatePlacementGroupReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return rpc::FinishNow(ctx, s);
  absl::StatusOr<v1::PlacementGroupInfo> g = groups_.Create(req->spec());
  if (!g.ok()) return rpc::FinishNow(ctx, rpc::ToGrpc(g.status()));
  *reply->mutable_group() = std::move(*g);
  return rpc::FinishNow(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* PlacementGroupServiceImpl::CreatePlacementGroups(
    grpc::CallbackServerContext* ctx, const v1::CreatePlacementGroupsRequest* req,
    v1::CreatePlacementGroupsReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return rpc::FinishNow(ctx, s);
  if (req->specs_size() == 0)
    return rpc::FinishNow(
        ctx, rpc::ToGrpc(absl::InvalidArgumentError("specs: give at least one placement group spec")));
  if (req->specs_size() > kMaxGroupBatch)
    return rpc::FinishNow(
        ctx, rpc::ToGrpc(absl::InvalidArgumentError(
                 absl::StrCat("specs: at most ", kMaxGroupBatch, " per call, got ", req->specs_size()))));
  // Placement is computation under the head's locks, never a wait, so it runs here.
  for (const v1::PlacementGroupSpec& spec : req->specs()) {
    v1::CreatePlacementGroupResult* out = reply->add_results();
    absl::StatusOr<v1::PlacementGroupInfo> g = groups_.Create(spec);
    if (g.ok()) {
      *out->mutable_group() = std::move(*g);
    } else {
      out->set_code(static_cast<int32_t>(g.status().code()));
      out->set_message(std::string(g.status().message()));
    }
  }
  return rpc::FinishNow(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* PlacementGroupServiceImpl::WaitPlacementGroup(
    grpc::CallbackServerContext* ctx, const v1::WaitPlacementGroupRequest* req,
    v1::WaitPlacementGroupReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return rpc::FinishNow(ctx, s);
  absl::StatusOr<PlacementGroupId> id = ParseGroupId(req->placement_group_id());
  if (!id.ok()) return rpc::FinishNow(ctx, rpc::ToGrpc(id.status()));
  if (req->timeout_ms() < 0)
    return rpc::FinishNow(ctx, rpc::ToGrpc(absl::InvalidArgumentError("timeout_ms: must be 0 or more")));
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  groups_.WaitAsync(*id, WaitBudget(ctx, req->timeout_ms()),
                    [reactor, reply](absl::StatusOr<v1::PlacementGroupInfo> g) {
                      if (!g.ok()) return reactor->Finish(rpc::ToGrpc(g.status()));
                      *reply->mutable_group() = std::move(*g);
                      reactor->Finish(grpc::Status::OK);
                    });
  return reactor;
}

grpc::ServerUnaryReactor* PlacementGroupServiceImpl::RemovePlacementGroup(
    grpc::CallbackServerContext* ctx, const v1::RemovePlacementGroupRequest* req,
    v1::RemovePlacementGroupReply*) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return rpc::FinishNow(ctx, s);
  absl::StatusOr<PlacementGroupId> id = ParseGroupId(req->placement_group_id());
  if (!id.ok()) return rpc::FinishNow(ctx, rpc::ToGrpc(id.status()));
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  groups_.RemoveAsync(*id, [reactor](absl::Status s) { reactor->Finish(rpc::ToGrpc(s)); });
  return reactor;
}

grpc::ServerUnaryReactor* PlacementGroupServiceImpl::GetPlacementGroup(
    grpc::CallbackServerContext* ctx, const v1::GetPlacementGroupRequest* req,
    v1::GetPlacementGroupReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return rpc::FinishNow(ctx, s);
  absl::StatusOr<v1::PlacementGroupInfo> g;
  if (!req->placement_group_id().empty()) {
    absl::StatusOr<PlacementGroupId> id = ParseGroupId(req->placement_group_id());
    if (!id.ok()) return rpc::FinishNow(ctx, rpc::ToGrpc(id.status()));
    g = groups_.Get(*id);
  } else if (!req->name().empty()) {
    g = groups_.GetByName(req->namespace_(), req->name());
  } else {
    return rpc::FinishNow(ctx, rpc::ToGrpc(absl::InvalidArgumentError("give placement_group_id or name")));
  }
  if (!g.ok()) return rpc::FinishNow(ctx, rpc::ToGrpc(g.status()));
  *reply->mutable_group() = std::move(*g);
  return rpc::FinishNow(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* PlacementGroupServiceImpl::ListPlacementGroups(
    grpc::CallbackServerContext* ctx, const v1::ListPlacementGroupsRequest*,
    v1::ListPlacementGroupsReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return rpc::FinishNow(ctx, s);
  for (auto& g : groups_.List()) *reply->add_groups() = std::move(g);
  return rpc::FinishNow(ctx, grpc::Status::OK);
}

}  // namespace skyrl::head
