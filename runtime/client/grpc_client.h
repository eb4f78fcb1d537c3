// skyrl::Client over gRPC: the head's ActorDirectory and PlacementGroupService, and one
// CallStream per actor process. The contract is client.h's; this is the machinery (routes,
// streams, the expiry and failure loops). Internal to the client library: users hold a
// Client from Client::Connect.
#pragma once

#include <atomic>
#include <deque>
#include <future>
#include <functional>
#include <limits>
#include <queue>
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

  using Client::CreateActor;
  absl::StatusOr<ActorHandle> CreateActor(v1::ActorSpec spec, bool return_pending) override;
  std::vector<absl::StatusOr<ActorHandle>> CreateActors(std::vector<v1::ActorSpec> specs) override;
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
  using Client::CallAsync;
  std::future<absl::StatusOr<std::string>> CallAsync(const ActorHandle& actor, const std::string& method,
                                                     const std::string& args, CallOptions options) override;

 private:
  // A call the client holds on to: made while its actor's address was being looked up, or
  // with retries (its args kept for the next attempt).
  struct HeldCall {
    std::string actor_id;
    std::string method;
    std::string args;
    absl::Duration timeout;
    int retries = 0;  // left; -1: without end
    std::function<bool(const std::string&)> retry_result;
    int attempts = 0;                // retries made so far
    client_internal::CallDone done;  // the caller's future
  };
  using HeldCallPtr = std::shared_ptr<HeldCall>;
  struct Route {
    // While the head is asked where the actor is: the calls made meanwhile, in order, and
    // when to give up (restart_wait after the first).
    bool resolving = false;
    std::deque<HeldCallPtr> waiting;
    absl::Time resolve_start;
    std::string address;
    std::shared_ptr<v1::ActorService::Stub> stub;
    // This client's call sequence for this incarnation of the actor (see ActorCallRequest.seq).
    std::shared_ptr<std::atomic<uint64_t>> next_seq;
    std::shared_ptr<client_internal::CallStream> stream;  // CallAsync's; null until first used
  };
  // An actor's max_pending_calls (ActorSpec), and this client's calls to it not yet settled.
  struct PendingLimit {
    std::atomic<int> limit{0};
    std::atomic<int> in_flight{0};
  };
  // One GetActor in flight for a route being resolved (gRPC's callback API).
  struct AsyncLookup {
    std::string actor_id;
    grpc::ClientContext ctx;
    v1::GetActorRequest request;
    v1::GetActorReply reply;
  };
  // Work for the resolver thread at `when`: ask again where `actor_id` is, or make `call`
  // again.
  struct Timer {
    absl::Time when;
    std::string actor_id;
    HeldCallPtr call;
    bool operator>(const Timer& o) const { return when > o.when; }
  };
  absl::Status KillActor(const ActorHandle& actor, bool restart);  // Kill and Restart
  absl::StatusOr<v1::ActorInfo> Lookup(const v1::GetActorRequest& request,
                                       absl::Duration timeout = absl::Seconds(10));
  // Sends `call` on its actor's stream, or holds it while the actor's address is looked up
  // (starting the look-up when none is under way). Never blocks.
  void Submit(HeldCallPtr call);
  // Enqueues `call` on `stream`; false when the stream has ended (the call is untouched).
  bool EnqueueOn(client_internal::CallStream& stream, const HeldCallPtr& call);
  // A call's outcome: made again (on the resolver thread, after a back-off) when its retries
  // allow, else handed to its caller.
  void Finish(HeldCallPtr call, client_internal::CallResult result);
  // Asks the head (asynchronously) where `actor_id` is; OnLookup takes the answer.
  void StartLookup(const std::string& actor_id);
  void OnLookup(AsyncLookup& lookup, const grpc::Status& status);
  // Opens a new CallStream on `route` (whose address is known), replacing its ended one.
  void OpenStreamLocked(const std::string& actor_id, Route& route) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records what the head says of an actor's max_pending_calls (0: no limit).
  void NoteLimit(const v1::ActorInfo& info);
  // Forgets the route, unless a look-up is under way (its calls wait on it) or, when
  // `address` is given, the route leads elsewhere by now.
  void ForgetRouteLocked(const std::string& actor_id, absl::string_view address = {})
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs timers_: re-asks the head about starting actors, makes retried calls again.
  void ResolveLoop();
  // After a failed call: forget the route and say why, asking the head.
  absl::Status Explain(const std::string& actor_id, const std::string& address, const grpc::Status& failure);
  // InvalidArgument when one call cannot fit in a message.
  absl::Status CheckSize(const ActorHandle& actor, const std::string& method, const std::string& args) const;
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
  // Actors with a max_pending_calls, by id, learnt from their creation or a look-up. At most
  // kMaxLimits: past that the oldest are forgotten (their calls are not limited).
  absl::flat_hash_map<std::string, std::shared_ptr<PendingLimit>> limits_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> limits_order_ ABSL_GUARDED_BY(mu_);
  // Look-ups in flight (cancelled at shutdown), and those answered, freed by the resolver
  // thread: a look-up holds a reference to the head's channel, and the last one must not be
  // released on a gRPC callback thread (see StreamEnd::stream).
  absl::flat_hash_map<AsyncLookup*, std::unique_ptr<AsyncLookup>> lookups_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<AsyncLookup>> answered_ ABSL_GUARDED_BY(mu_);
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> timers_ ABSL_GUARDED_BY(mu_);
  absl::CondVar resolver_cv_;  // timers_ gained an earlier timer, lookups_ shrank, or shutdown
  bool resolver_stop_ ABSL_GUARDED_BY(mu_) = false;
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
  std::thread resolver_;
};

}  // namespace skyrl
