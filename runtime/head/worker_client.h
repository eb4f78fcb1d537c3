// How the head reaches the workers: start and kill actor processes on a node. An interface
// so that tests replace the network (tests/runtime/head/fake_workers.h).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "skyrl/worker.pb.h"

namespace skyrl::head {

class WorkerClient {
 public:
  using StartDone = std::function<void(absl::StatusOr<v1::StartActorReply>)>;
  using KillDone = std::function<void(absl::Status)>;
  virtual ~WorkerClient() = default;
  virtual absl::StatusOr<v1::StartActorReply> StartActor(const std::string& worker_address,
                                                         const v1::StartActorRequest& request) = 0;
  virtual absl::Status KillActor(const std::string& worker_address, const v1::KillActorRequest& request) = 0;
  // The same without holding the caller's thread: `done` runs exactly once with the outcome,
  // on any thread (inline in these defaults; on a gRPC completion thread for the gRPC
  // client), and must not block for long.
  virtual void StartActorAsync(const std::string& worker_address, const v1::StartActorRequest& request,
                               StartDone done) {
    done(StartActor(worker_address, request));
  }
  virtual void KillActorAsync(const std::string& worker_address, const v1::KillActorRequest& request,
                              KillDone done) {
    done(KillActor(worker_address, request));
  }
};

// WorkerClient over gRPC with the cluster token; the Async forms use gRPC's callback client
// API, so a create waiting for its worker parks no thread.
std::unique_ptr<WorkerClient> MakeGrpcWorkerClient(std::string token);

}  // namespace skyrl::head
