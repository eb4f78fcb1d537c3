#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "runtime/head/worker_client.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"
#include "runtime/rpc/status.h"
#include "skyrl/worker.grpc.pb.h"

namespace skyrl::head {
namespace {

class GrpcWorkerClient final : public WorkerClient {
 public:
  explicit GrpcWorkerClient(std::string token) : token_(std::move(token)) {}
  absl::StatusOr<v1::StartActorReply> StartActor(const std::string& address,
                                                 const v1::StartActorRequest& req) override {
    grpc::ClientContext ctx;
    rpc::PrepareCall(&ctx, token_, absl::Seconds(60));
    v1::StartActorReply reply;
    absl::Status s = rpc::FromGrpc(Stub(address)->StartActor(&ctx, req, &reply));
    if (!s.ok()) return s;
    return reply;
  }
  absl::Status KillActor(const std::string& address, const v1::KillActorRequest& req) override {
    grpc::ClientContext ctx;
    rpc::PrepareCall(&ctx, token_, absl::Seconds(10));
    v1::KillActorReply reply;
    return rpc::FromGrpc(Stub(address)->KillActor(&ctx, req, &reply));
  }
  void StartActorAsync(const std::string& address, const v1::StartActorRequest& req,
                       StartDone done) override {
    struct Call {
      grpc::ClientContext ctx;
      v1::StartActorRequest req;
      v1::StartActorReply reply;
      StartDone done;
    };
    auto* call = new Call{{}, req, {}, std::move(done)};
    rpc::PrepareCall(&call->ctx, token_, absl::Seconds(60));
    Stub(address)->async()->StartActor(&call->ctx, &call->req, &call->reply, [call](grpc::Status s) {
      std::unique_ptr<Call> owned(call);
      absl::Status st = rpc::FromGrpc(s);
      if (!st.ok()) {
        owned->done(st);
      } else {
        owned->done(std::move(owned->reply));
      }
    });
  }
  void KillActorAsync(const std::string& address, const v1::KillActorRequest& req, KillDone done) override {
    struct Call {
      grpc::ClientContext ctx;
      v1::KillActorRequest req;
      v1::KillActorReply reply;
      KillDone done;
    };
    auto* call = new Call{{}, req, {}, std::move(done)};
    rpc::PrepareCall(&call->ctx, token_, absl::Seconds(10));
    Stub(address)->async()->KillActor(&call->ctx, &call->req, &call->reply, [call](grpc::Status s) {
      std::unique_ptr<Call> owned(call);
      owned->done(rpc::FromGrpc(s));
    });
  }

 private:
  std::shared_ptr<v1::WorkerService::Stub> Stub(const std::string& address) {
    absl::MutexLock lock(&mu_);
    auto& stub = stubs_[address];
    if (!stub) stub = v1::WorkerService::NewStub(rpc::MakeChannel(address));
    return stub;
  }
  const std::string token_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<v1::WorkerService::Stub>> stubs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<WorkerClient> MakeGrpcWorkerClient(std::string token) {
  return std::make_unique<GrpcWorkerClient>(std::move(token));
}

}  // namespace skyrl::head
