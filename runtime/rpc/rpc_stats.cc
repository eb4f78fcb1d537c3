#include "runtime/rpc/rpc_stats.h"

#include <chrono>
#include <string>

#include "absl/status/status.h"

namespace skyrl::rpc {
namespace {

namespace gx = grpc::experimental;

class RpcStatsInterceptor : public gx::Interceptor {
 public:
  RpcStatsInterceptor(LatencyStats* stats, const char* method)
      : stats_(stats), method_(method ? method : "(unknown)"), start_(std::chrono::steady_clock::now()) {}

  void Intercept(gx::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(gx::InterceptionHookPoints::PRE_SEND_STATUS)) {
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      const auto code = static_cast<absl::StatusCode>(methods->GetSendStatus().error_code());
      stats_->Record(method_, absl::StatusCodeToString(code), seconds);
    }
    methods->Proceed();
  }

 private:
  LatencyStats* const stats_;
  const std::string method_;
  const std::chrono::steady_clock::time_point start_;
};

class RpcStatsFactory : public gx::ServerInterceptorFactoryInterface {
 public:
  explicit RpcStatsFactory(LatencyStats* stats) : stats_(stats) {}
  gx::Interceptor* CreateServerInterceptor(gx::ServerRpcInfo* info) override {
    return new RpcStatsInterceptor(stats_, info->method());
  }

 private:
  LatencyStats* const stats_;
};

}  // namespace

std::unique_ptr<gx::ServerInterceptorFactoryInterface> RpcStatsInterceptorFactory(LatencyStats* stats) {
  return std::make_unique<RpcStatsFactory>(stats);
}

}  // namespace skyrl::rpc
