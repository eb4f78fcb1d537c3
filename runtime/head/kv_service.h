// The head's KV service: a thin, authenticated face over the metadata store's "kv" table.
#pragma once

#include "runtime/rpc/auth.h"
#include "runtime/store/store.h"
#include "skyrl/kv.grpc.pb.h"

namespace skyrl::head {

inline constexpr char kKvTable[] = "kv";

class KvServiceImpl final : public v1::KvService::Service {
 public:
  KvServiceImpl(store::Store& store, const rpc::TokenAuth& auth) : store_(store), auth_(auth) {}

  grpc::Status Put(grpc::ServerContext*, const v1::KvPutRequest*, v1::KvPutReply*) override;
  grpc::Status Get(grpc::ServerContext*, const v1::KvGetRequest*, v1::KvGetReply*) override;
  grpc::Status Delete(grpc::ServerContext*, const v1::KvDeleteRequest*, v1::KvDeleteReply*) override;
  grpc::Status List(grpc::ServerContext*, const v1::KvListRequest*, v1::KvListReply*) override;

 private:
  store::Store& store_;
  const rpc::TokenAuth& auth_;
};

}  // namespace skyrl::head
