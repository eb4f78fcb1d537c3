#include "runtime/head/kv_service.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/archive/archive.h"
#include "runtime/common/ids.h"
#include "runtime/rpc/status.h"

namespace skyrl::head {

grpc::Status KvServiceImpl::Put(grpc::ServerContext* ctx, const v1::KvPutRequest* req, v1::KvPutReply*) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return s;
  if (absl::StartsWith(req->key(), kWorkingDirKeyPrefix)) {
    // Working directories are named by their content: what a key says is what workers get.
    absl::string_view digest = absl::string_view(req->key()).substr(kWorkingDirKeyPrefix.size());
    if (absl::Status s = ValidateWorkingDirDigest("key", digest); !s.ok()) return rpc::ToGrpc(s);
    if (std::string got = archive::Sha256Digest(req->value()); got != digest)
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("key: a working directory stored as ", digest, " has digest ", got));
  }
  if (req->overwrite()) return rpc::ToGrpc(store_.Put(kKvTable, req->key(), req->value()));
  absl::StatusOr<bool> created = store_.CompareAndSet(kKvTable, req->key(), std::nullopt, req->value());
  if (!created.ok()) return rpc::ToGrpc(created.status());
  if (!*created)
    return grpc::Status(grpc::StatusCode::ALREADY_EXISTS,
                        absl::StrCat("kv key ", store::Where(kKvTable, req->key()),
                                     " already exists (set overwrite to replace it)"));
  return grpc::Status::OK;
}

grpc::Status KvServiceImpl::Get(grpc::ServerContext* ctx, const v1::KvGetRequest* req,
                                v1::KvGetReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return s;
  absl::StatusOr<std::string> value = store_.Get(kKvTable, req->key());
  if (!value.ok()) return rpc::ToGrpc(value.status());
  reply->set_value(std::move(*value));
  return grpc::Status::OK;
}

grpc::Status KvServiceImpl::Delete(grpc::ServerContext* ctx, const v1::KvDeleteRequest* req,
                                   v1::KvDeleteReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return s;
  absl::StatusOr<bool> deleted = store_.Delete(kKvTable, req->key());
  if (!deleted.ok()) return rpc::ToGrpc(deleted.status());
  reply->set_deleted(*deleted);
  return grpc::Status::OK;
}

grpc::Status KvServiceImpl::List(grpc::ServerContext* ctx, const v1::KvListRequest* req,
                                 v1::KvListReply* reply) {
  if (grpc::Status s = auth_.Check(ctx); !s.ok()) return s;
  absl::StatusOr<std::vector<store::Entry>> entries = store_.Scan(kKvTable, req->prefix());
  if (!entries.ok()) return rpc::ToGrpc(entries.status());
  for (const auto& e : *entries) reply->add_keys(e.key);
  return grpc::Status::OK;
}

}  // namespace skyrl::head
