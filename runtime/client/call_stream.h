// One ActorService.CallStream from a skyrl::Client to one actor process: the path of
// Client::CallAsync. Internal to the client library.
//
// Calls are queued and written in batches: whatever was queued while the previous write was
// on the wire goes out as one message (natural batching: no timer, and a call made while the
// stream is idle is written at once). Each batch stays under `max_message_bytes`; a call
// larger than that goes as parts, as does a result larger than the host's messages. Results come
// back in batches and complete the callers' futures by call id, on gRPC's callback threads.
// Every call has a deadline; Expire() fails those past it with DEADLINE_EXCEEDED while the
// stream lives on. Pending deadlines are kept in a min-heap of (deadline, call id), so Expire
// touches only the calls it fails (and entries of calls answered meanwhile) and says when the
// next one is due; a call whose deadline comes before every other pending one is reported to
// the owner (on_earlier_deadline), whose expiry loop may be asleep until a later one.
//
// When the stream ends (the actor died, the connection broke, the host stopped or refused the
// stream), every call not yet answered is handed to `on_end` with the final status, so the
// owner can ask the head why, once for all of them. on_end is called exactly once, from OnDone,
// and is the stream's last use of its owner; it must not drop StreamEnd::stream on that thread.
//
// Lifetime: shared. The stream keeps itself alive until OnDone; the owner's references keep it
// readable after that. Safe for concurrent use.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <deque>
#include <functional>
#include <future>
#include <optional>
#include <memory>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "skyrl/actor.grpc.pb.h"

namespace skyrl::client_internal {

using CallResult = absl::StatusOr<std::string>;
// What a call's result (or failure) is handed to, exactly once: its caller's promise, or a
// function (the client's retry logic). A promise costs no allocation of its own.
class CallDone {
 public:
  CallDone() = default;
  explicit CallDone(std::promise<CallResult> promise) : promise_(std::move(promise)) {}
  explicit CallDone(absl::AnyInvocable<void(CallResult)> then) : then_(std::move(then)) {}
  void operator()(CallResult result) {
    if (promise_) {
      promise_->set_value(std::move(result));
    } else if (then_) {
      then_(std::move(result));
    }
  }

 private:
  std::optional<std::promise<CallResult>> promise_;
  absl::AnyInvocable<void(CallResult)> then_;
};

// Upper bound of what one StreamedCall adds to its batch besides its method and args bytes.
inline constexpr size_t kCallOverhead = 64;

// Marks an error the actor answered with (its method's own status), as opposed to one the
// client found (the stream broke, a deadline passed): see FromActor.
inline constexpr char kFromActorPayload[] = "type.skyrl.dev/skyrl.client.FromActor";
inline bool FromActor(const absl::Status& s) { return s.GetPayload(kFromActorPayload).has_value(); }

class CallStream;

// Calls left without a result when a stream ended, and why it ended.
struct StreamEnd {
  // The stream's own last reference, for the owner to drop on its own thread: releasing the
  // last reference to a channel on a gRPC callback thread crashes gRPC 1.51 (the callback
  // completion queue's thread would have to join itself; grpc/grpc pull request 32584).
  std::shared_ptr<CallStream> stream;
  std::string actor_id;
  std::string address;
  grpc::Status status;
  std::vector<CallDone> unanswered;
};

struct CallStreamOptions {
  std::string actor_id;
  std::string address;
  std::string token;
  std::string caller_id;
  size_t max_message_bytes = 0;
  std::function<void(StreamEnd)> on_end;
  // Called by Enqueue, on the caller's thread and outside the stream's lock, with the new
  // call's deadline when it is earlier than every deadline the stream had pending. Optional.
  std::function<void(absl::Time)> on_earlier_deadline;
  // The largest result this stream assembles from parts; a larger one fails its call with
  // RESOURCE_EXHAUSTED and its further parts are dropped. 0: no limit.
  size_t max_result_bytes = 0;
};

class CallStream final : public grpc::ClientBidiReactor<v1::ActorCallBatch, v1::ActorResultBatch>,
                         public std::enable_shared_from_this<CallStream> {
 public:
  // Creates the stream; Start() opens it. Calls take their sequence numbers from `next_seq`,
  // which the owner keeps across streams to one incarnation of the actor. The two steps let
  // the owner record the stream before anything can end it: once started, a stream may reach
  // OnDone (and on_end) on another thread before Start returns.
  static std::shared_ptr<CallStream> Create(std::shared_ptr<v1::ActorService::Stub> stub,
                                            std::shared_ptr<std::atomic<uint64_t>> next_seq,
                                            CallStreamOptions options);
  // Starts the RPC (the connection is made in the background). Exactly once, after Create;
  // until then Enqueue queues calls and nothing ends the stream.
  void Start();

  // Queues one call and takes `done` (moved from) on success. False when the stream has
  // ended: `done` is untouched and the caller opens a new stream. Args that do not fit in one
  // message go as consecutive parts (StreamedCall.more). Precondition: the method name leaves
  // room for args (method.size() + kCallOverhead < max_message_bytes).
  bool Enqueue(absl::string_view method, absl::string_view args, absl::Duration timeout, CallDone& done);

  // Fails the calls whose deadline is past `now`; returns the earliest deadline still in the
  // heap (InfiniteFuture when none). That may be the deadline of a call answered meanwhile
  // (entries are dropped lazily), so a caller that sleeps until it wakes early, never late.
  // `expired` (optional) says whether any call failed now.
  absl::Time Expire(absl::Time now, bool* expired = nullptr);

  // For the owner's destruction: fails every pending call with `why` and cancels the RPC.
  // on_end still follows (with nothing unanswered).
  void Shutdown(const absl::Status& why);

  // The stream has ended or is ending: Enqueue fails.
  bool ended();
  const std::string& actor_id() const { return options_.actor_id; }
  const std::string& address() const { return options_.address; }

  // gRPC reactions.
  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  CallStream(std::shared_ptr<v1::ActorService::Stub> stub, std::shared_ptr<std::atomic<uint64_t>> next_seq,
             CallStreamOptions options);

  struct Slot {
    CallDone done;
    absl::Duration timeout;  // for the error; the deadline is in deadlines_
    std::string method;
    std::string parts;  // a result arriving in parts: those so far
    bool answered = false;
  };
  struct OutBatch {
    v1::ActorCallBatch msg;
    size_t bytes = 0;
  };

  // Under mu_: moves the next batch into out_ when no write is in flight. True: call
  // StartWrite(&out_) once mu_ is released.
  bool TakeBatchLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Under mu_: whether the hold taken in Create should now be released (ended, no write in
  // flight, not yet released). The caller calls RemoveHold once mu_ is released.
  bool ReleaseHoldLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PopAnsweredLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether call `id` has its result (or failed, or was handed over): no slot, or answered.
  bool SettledLocked(uint64_t id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the stream for new calls and hands over the completions of every call not answered.
  std::vector<CallDone> TakeUnansweredLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<v1::ActorService::Stub> stub_;
  const std::shared_ptr<std::atomic<uint64_t>> next_seq_;
  const CallStreamOptions options_;
  grpc::ClientContext ctx_;
  std::shared_ptr<CallStream> self_;                          // set by Create, released by OnDone
  v1::ActorResultBatch in_;                                   // the reader's (one read in flight at a time)
  v1::ActorCallBatch out_;                                    // the writer's (one write in flight at a time)
  std::vector<std::pair<CallDone, CallResult>> completions_;  // the reader's scratch

  absl::Mutex mu_;
  // Slot i is call id first_id_ + i; answered slots at the front are popped.
  std::deque<Slot> slots_ ABSL_GUARDED_BY(mu_);
  uint64_t first_id_ ABSL_GUARDED_BY(mu_) = 1;
  // (deadline, call id) of calls with a finite timeout, earliest on top. Settled calls leave
  // lazily: from the top, when Enqueue or Expire meets them. Whatever sits under the earliest
  // unsettled deadline stays until that call settles, as slots_ keeps every slot after its
  // oldest unanswered call: both are bounded by the calls made within one timeout.
  using Deadline = std::pair<absl::Time, uint64_t>;
  std::priority_queue<Deadline, std::vector<Deadline>, std::greater<Deadline>> deadlines_
      ABSL_GUARDED_BY(mu_);
  std::deque<OutBatch> queued_ ABSL_GUARDED_BY(mu_);  // calls not yet written, split by size
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  bool hold_released_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace skyrl::client_internal
