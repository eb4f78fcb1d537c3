// skyrl.v1.ActorService for the one actor an actor host runs: unary Call and the batched
// CallStream, both on gRPC's callback API (no server thread is parked per call in flight).
//
// Calls from both paths wait in one queue for `max_concurrency` executor threads. With a limit
// of 1 they run one after another, and each caller's calls in its sequence order (a missing
// predecessor holds the line at most 10 s). A streamed call whose timeout passed while it
// waited is answered DEADLINE_EXCEEDED without running (it still counts in its caller's
// sequence). Results of streamed calls go back in batches: whatever finished while the
// previous write was on the wire, split below rpc::kMaxMessageBytes; a single result too big
// for one message is answered RESOURCE_EXHAUSTED instead (on both paths). Both paths admit
// callers and calls through the same checks (AdmitCaller, AdmitCall): the token, the actor id,
// the caller id's size, the method.
//
// Every answered call is counted and timed in a CallTelemetry (call_telemetry.h), served by
// Telemetry to the worker's metrics and to `skyrl timeline`.
//
// Lifecycle: construct, register with a grpc::ServerBuilder, serve; on shutdown call
// StopStreams(), then Server::Shutdown(), then destroy this (joins the executors, so after the
// server). Safe for concurrent use by gRPC's threads.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/actor/actor.h"
#include "runtime/actor/call_telemetry.h"
#include "runtime/rpc/auth.h"
#include "runtime/rpc/channel.h"
#include "skyrl/actor.grpc.pb.h"

namespace skyrl {

// How large a streamed call may be. Args and results larger than one message travel as parts
// (protos/skyrl/actor.proto, StreamedCall.more): `message_bytes` bounds each message this side
// writes, `max_call_bytes` one call's args and one result (RESOURCE_EXHAUSTED beyond). Unary
// calls stay within one message.
struct CallLimits {
  size_t message_bytes = rpc::kMaxMessageBytes;
  size_t max_call_bytes = rpc::kDefaultMaxCallBytes;
};

struct TelemetryOptions {
  bool enabled = true;
  size_t ring = CallTelemetry::kDefaultRing;  // recent calls kept for timelines
};

class ActorServiceImpl final : public v1::ActorService::CallbackService {
 public:
  // `cls`, `actor` and `auth` must outlive this. `max_concurrency` >= 1; `limits.message_bytes`
  // at least 4 KiB.
  ActorServiceImpl(std::string actor_id, const ActorClass& cls, Actor& actor, const rpc::TokenAuth& auth,
                   int max_concurrency, CallLimits limits = {}, TelemetryOptions telemetry = {});
  ~ActorServiceImpl() override;

  grpc::ServerUnaryReactor* Call(grpc::CallbackServerContext* ctx, const v1::ActorCallRequest* req,
                                 v1::ActorCallReply* reply) override;
  grpc::ServerBidiReactor<v1::ActorCallBatch, v1::ActorResultBatch>* CallStream(
      grpc::CallbackServerContext* ctx) override;
  grpc::ServerUnaryReactor* Telemetry(grpc::CallbackServerContext* ctx, const v1::ActorTelemetryRequest* req,
                                      v1::ActorTelemetryReply* reply) override;

  // What Telemetry answers (also written to --call-records-file as the host stops).
  v1::ActorTelemetryReply TelemetrySnapshot(bool with_records);

  // Ends every CallStream for a host that is stopping: no new stream or call is taken, calls
  // not yet started are dropped, results of running calls are still sent, then each stream
  // ends UNAVAILABLE (callers then ask the head why). Returns at once.
  void StopStreams();

 private:
  class Stream;
  friend class Stream;

  // One call waiting for, or running on, an executor: from Call (`unary` set) or a stream.
  struct Work {
    // Null for a call refused before it could run (no such method): it still takes its turn
    // in its caller's sequence, or its successors would wait for it.
    const ActorMethod* method = nullptr;
    absl::Status refusal;
    // Unary: the request, reply and reactor stay valid until the reactor finishes.
    const v1::ActorCallRequest* req = nullptr;
    v1::ActorCallReply* reply = nullptr;
    grpc::ServerUnaryReactor* unary = nullptr;
    // Streamed: the stream holds a reference until the result is delivered or dropped.
    Stream* stream = nullptr;
    uint64_t call_id = 0;
    std::string args;
    absl::Time deadline = absl::InfiniteFuture();
    // Ordering (max_concurrency 1): the caller id lives in the request or the stream.
    absl::string_view caller;
    uint64_t seq = 0;
    bool ordered = false;
    absl::Time arrived;
    std::string method_name;  // for CallTelemetry (short names stay inline: no allocation)
  };

  // The method, or UNIMPLEMENTED listing the class's methods.
  const ActorMethod* FindMethod(absl::string_view name, grpc::Status* error) const;
  // What Call and CallStream both check of a caller before taking its calls: the cluster
  // token, that `actor_id` (nullopt: not given) is the actor this process hosts, and the size
  // of `caller_id`. The *_field names say where each came from, for the error. OK, or the
  // status to end the RPC with.
  grpc::Status AdmitCaller(grpc::CallbackServerContext* ctx, absl::string_view actor_field,
                           std::optional<absl::string_view> actor_id, absl::string_view caller_field,
                           absl::string_view caller_id) const;
  // One call from either path: looks its method up and decides whether it runs in its
  // caller's sequence; fills `w`'s method, refusal and ordering fields. False: the call is not
  // queued and is answered `refusal` at once (no such method, and no place in a sequence to
  // take). `caller` must outlive `w`.
  bool AdmitCall(absl::string_view method, absl::string_view caller, uint64_t seq, absl::Time now, Work& w,
                 grpc::Status* refusal);
  void Enqueue(std::vector<Work>& works);
  bool Runnable(const Work& w, absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Execute();

  const std::string actor_id_;
  const ActorClass& cls_;
  // Methods met at run time through ActorClass::any_method, each bound to its name once.
  mutable absl::Mutex any_mu_;
  mutable std::map<std::string, std::unique_ptr<ActorMethod>, std::less<>> any_methods_
      ABSL_GUARDED_BY(any_mu_);
  Actor& actor_;
  const rpc::TokenAuth& auth_;
  static constexpr absl::Duration kOrderWait = absl::Seconds(10);
  static constexpr int kEagerExecutors = 16;  // started with the host; more as calls need them
  const int limit_;
  const CallLimits limits_;
  CallTelemetry telemetry_;
  alignas(64) std::atomic<int64_t> running_{0};  // the executors' line, not the queue's
  absl::Mutex mu_;
  std::deque<Work> queue_ ABSL_GUARDED_BY(mu_);
  absl::CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<std::string, uint64_t> next_seq_ ABSL_GUARDED_BY(mu_);
  // Started as calls need them, up to limit_ (an async Python actor may allow 1,000 at once):
  // a new one when a call arrives and none waits idle.
  std::vector<std::thread> executors_ ABSL_GUARDED_BY(mu_);
  int idle_ ABSL_GUARDED_BY(mu_) = 0;  // executors waiting for work
  // Open streams, for StopStreams. Lock order: a stream's own mutex is never held while
  // taking streams_mu_ or mu_.
  absl::Mutex streams_mu_;
  absl::flat_hash_set<Stream*> streams_ ABSL_GUARDED_BY(streams_mu_);
  bool streams_stopped_ ABSL_GUARDED_BY(streams_mu_) = false;
};

}  // namespace skyrl
