#include "runtime/worker/head_link_grpc.h"

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"
#include "runtime/rpc/status.h"
#include "runtime/rpc/tls.h"
#include "skyrl/node.grpc.pb.h"
#include "skyrl/worker.grpc.pb.h"

namespace skyrl::worker {
namespace {

class GrpcHeadApi final : public HeadApi {
 public:
  // Used from one thread (HeadLink::Round's).
  GrpcHeadApi(const std::string& address, std::string token)
      : address_(address),
        stub_(v1::NodeService::NewStub(rpc::MakeChannel(address))),
        token_(std::move(token)) {}

  // A channel of its own connections (no subchannel shared with the old channel, whose
  // reconnect backoff may still run): a fresh dial now.
  void Reconnect() override {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    stub_ = v1::NodeService::NewStub(grpc::CreateCustomChannel(address_, rpc::ChannelCredentials(), args));
  }

  absl::StatusOr<v1::RegisterNodeReply> RegisterNode(const v1::RegisterNodeRequest& req,
                                                     absl::Duration timeout) override {
    grpc::ClientContext ctx;
    rpc::PrepareCall(&ctx, token_, timeout);
    v1::RegisterNodeReply reply;
    if (absl::Status s = rpc::FromGrpc(stub_->RegisterNode(&ctx, req, &reply)); !s.ok()) return s;
    return reply;
  }
  absl::StatusOr<v1::HeartbeatReply> Heartbeat(const v1::HeartbeatRequest& req,
                                               absl::Duration timeout) override {
    grpc::ClientContext ctx;
    rpc::PrepareCall(&ctx, token_, timeout);
    v1::HeartbeatReply reply;
    if (absl::Status s = rpc::FromGrpc(stub_->Heartbeat(&ctx, req, &reply)); !s.ok()) return s;
    return reply;
  }

 private:
  const std::string address_;
  std::unique_ptr<v1::NodeService::Stub> stub_;
  const std::string token_;
};

class GrpcPeerApi final : public PeerApi {
 public:
  explicit GrpcPeerApi(std::string token) : token_(std::move(token)) {}

  absl::StatusOr<v1::HeadContactReply> HeadContact(const std::string& address, const std::string& asker,
                                                   absl::Duration timeout) override {
    v1::WorkerService::Stub* stub;
    {
      absl::MutexLock lock(&mu_);
      auto& slot = stubs_[address];
      if (slot == nullptr) slot = v1::WorkerService::NewStub(rpc::MakeChannel(address));
      stub = slot.get();
    }
    grpc::ClientContext ctx;
    rpc::PrepareCall(&ctx, token_, timeout);
    v1::HeadContactRequest req;
    req.set_asker_node_id(asker);
    v1::HeadContactReply reply;
    if (absl::Status s = rpc::FromGrpc(stub->HeadContact(&ctx, req, &reply)); !s.ok()) return s;
    return reply;
  }

 private:
  const std::string token_;
  absl::Mutex mu_;
  // Stubs are never dropped while the link lives: peers are few and their addresses stable.
  absl::flat_hash_map<std::string, std::unique_ptr<v1::WorkerService::Stub>> stubs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<HeadApi> MakeGrpcHeadApi(const std::string& head_address, const std::string& token) {
  return std::make_unique<GrpcHeadApi>(head_address, token);
}

std::unique_ptr<PeerApi> MakeGrpcPeerApi(const std::string& token) {
  return std::make_unique<GrpcPeerApi>(token);
}

}  // namespace skyrl::worker
