// skyrl::Client over gRPC: the head's ActorDirectory and PlacementGroupService, and one
// CallStream per actor process. The contract is client.h's; this is the machinery (routes,
// streams, the expiry and failure loops). Internal to the client library: users hold a
// Client from Client::Connect.
#pragma once

#include <atomic>
#include <deque>
#include <future>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "runtime/client/call_stream.h"
#include "runtime/client/client.h"
#include "skyrl/actor.grpc.pb.h"
#include "skyrl/actor_directory.grpc.pb.h"
#include "skyrl/kv.grpc.pb.h"
#include "skyrl/placement_group.grpc.pb.h"

namespace skyrl {

class GrpcClient final : public Client {
 public:
  GrpcClient(const std::string& head, std::string token, ClientOptions options);
  ~GrpcClient() override;

  absl::StatusOr<ActorHandle> CreateActor(const std::string& class_name,
                                          const ActorOptions& options) override;
  absl::StatusOr<ActorHandle> CreateActor(v1::ActorSpec spec, bool return_pending) override;
  std::vector<absl::StatusOr<ActorHandle>> CreateActors(
      const std::vector<std::pair<std::string, ActorOptions>>& actors) override;
  absl::StatusOr<ActorHandle> GetActor(const std::string& name, const std::string& ns) override;
  absl::StatusOr<v1::ActorInfo> Describe(const ActorHandle& actor) override;
  absl::Status Kill(const ActorHandle& actor) override;
  absl::Status Restart(const ActorHandle& actor) override;
  absl::StatusOr<bool> SetBlocked(const ActorHandle& actor, bool blocked) override;
  absl::StatusOr<v1::PlacementGroupInfo> CreatePlacementGroup(const PlacementGroupOptions& options) override;
  absl::StatusOr<v1::PlacementGroupInfo> WaitPlacementGroup(const std::string& id,
                                                            absl::Duration timeout) override;
  absl::Status RemovePlacementGroup(const std::string& id) override;
  absl::StatusOr<std::string> UploadWorkingDir(const std::string& dir) override;
  absl::Status KvPut(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> KvGet(const std::string& key) override;
  std::future<absl::StatusOr<std::string>> CallAsync(const ActorHandle& actor, const std::string& method,
                                                     const std::string& args) override;
  std::future<absl::StatusOr<std::string>> CallAsync(const ActorHandle& actor, const std::string& method,
                                                     const std::string& args,
                                                     absl::Duration timeout) override;

 private:
  struct Route {
    std::string address;
    std::shared_ptr<v1::ActorService::Stub> stub;
    // This client's call sequence for this incarnation of the actor (see ActorCallRequest.seq).
    std::shared_ptr<std::atomic<uint64_t>> next_seq;
    std::shared_ptr<client_internal::CallStream> stream;  // CallAsync's; null until first used
  };
  void FillSpec(const std::string& class_name, const ActorOptions& options, v1::ActorSpec* spec) const;
  absl::Status KillActor(const ActorHandle& actor, bool restart);  // Kill and Restart
  absl::StatusOr<v1::ActorInfo> Lookup(const v1::GetActorRequest& request,
                                       absl::Duration timeout = absl::Seconds(10));
  // The actor's current route: cached, or looked up (waiting out RESTARTING/PENDING).
  absl::StatusOr<Route> Resolve(const std::string& actor_id);
  // After a failed call: forget the route and say why, asking the head.
  absl::Status Explain(const std::string& actor_id, const std::string& address, const grpc::Status& failure);
  // InvalidArgument when one call cannot fit in a message.
  absl::Status CheckSize(const ActorHandle& actor, const std::string& method, const std::string& args) const;
  // The actor's CallStream, opened (after Resolve) when there is none or it is `ended`.
  absl::StatusOr<std::shared_ptr<client_internal::CallStream>> StreamFor(
      const std::string& actor_id, const client_internal::CallStream* ended);
  void OnStreamEnd(client_internal::StreamEnd end);
  // Fails streamed calls past their deadline: sleeps until the earliest deadline any stream
  // has pending, or until OnEarlierDeadline brings a new earlier one.
  void ExpireLoop();
  // A stream's new earliest deadline (CallStreamOptions::on_earlier_deadline): wakes the
  // expiry loop when it sleeps past `deadline`. Cheap (one atomic load) when it does not.
  void OnEarlierDeadline(absl::Time deadline);
  void FailureLoop();  // explains ended streams to their unanswered calls
  // Fails an ended stream's unanswered calls, saying why (Cancelled when `stopping`).
  void ExplainEnded(client_internal::StreamEnd end, bool stopping);
  // A call to `actor_id` at `address` missed its deadline: when the head says the actor is
  // no longer ALIVE there (restarted elsewhere while its old host is cut off, say), drop the
  // route and fail the stream's calls, so the next call goes where the actor is now instead
  // of waiting for the connection to time out. On the failure loop's thread.
  void CheckMoved(const std::string& actor_id, const std::string& address);

  const std::string token_;
  const std::string caller_id_;
  const std::string job_id_;  // $SKYRL_JOB_ID in a job's driver: what it creates belongs to the job
  const ClientOptions options_;
  std::unique_ptr<v1::ActorDirectory::Stub> head_;
  std::unique_ptr<v1::PlacementGroupService::Stub> groups_;
  std::unique_ptr<v1::KvService::Stub> kv_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Route> routes_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  // Streams that have not ended (a stream leaves in OnStreamEnd, so a pointer here is alive
  // while streams_mu_ is held), and ended streams, released (and their calls explained) on
  // explainer_, never on gRPC's threads. Lock order: mu_, then streams_mu_, then a stream's
  // own mutex.
  absl::Mutex streams_mu_;
  absl::CondVar streams_cv_;
  absl::flat_hash_set<client_internal::CallStream*> live_ ABSL_GUARDED_BY(streams_mu_);
  std::deque<client_internal::StreamEnd> ended_ ABSL_GUARDED_BY(streams_mu_);
  // (actor id, address) of streams with a call past its deadline, for CheckMoved.
  std::deque<std::pair<std::string, std::string>> missed_ ABSL_GUARDED_BY(streams_mu_);
  absl::flat_hash_map<std::string, absl::Time> last_moved_check_;  // the failure loop's
  bool stop_ ABSL_GUARDED_BY(streams_mu_) = false;
  // When the expiry loop wakes next (unix ns; INT64_MAX: not before it is told). Written by
  // the loop under streams_mu_, INT64_MAX while it scans the streams, so that a deadline a
  // stream gains during the scan is always brought to it; read without the lock by
  // OnEarlierDeadline, which takes the lock only to lower it.
  std::atomic<int64_t> next_expiry_ns_{std::numeric_limits<int64_t>::max()};
  absl::CondVar expire_cv_;  // wakes the expiry loop (a new earlier deadline, or stop_)
  std::thread expirer_;
  std::thread explainer_;
};

}  // namespace skyrl
