// Counts and latencies of the RPCs a daemon's gRPC server answers, by full method name
// ("/skyrl.v1.NodeService/Heartbeat") and status code name ("OK", "NOT_FOUND"), for its
// /metrics (skyrl_rpc_server_handled_total, skyrl_rpc_server_handling_seconds).
//
//   LatencyStats stats(LatencyStats::RpcBounds());
//   StartServer(bind, port, services, &stats);
//
// A call's time runs from its arrival (the interceptor is made per call) to the moment its
// status is sent; for a stream that is the stream's whole life.
#pragma once

#include <grpcpp/support/server_interceptor.h>

#include <memory>

#include "runtime/common/latency_stats.h"

namespace skyrl::rpc {

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> RpcStatsInterceptorFactory(
    LatencyStats* stats);

}  // namespace skyrl::rpc
