// skyrl::Client: create, find, call and kill actors.
//
// The head is asked only where an actor lives; calls go straight to the actor's process. The
// address is cached per actor and looked up again when a call cannot reach it:
// - a call that fails because the actor died returns "actor died: <reason>": Unavailable while
//   it restarts, FailedPrecondition when it is DEAD for good (Ray's ActorUnavailableError and
//   ActorDiedError);
// - calls made while the actor is PENDING or RESTARTING wait in the client (up to
//   `restart_wait`) until it is ALIVE, then go to its address in the order they were made;
//   CallAsync itself never waits;
// - a call to a DEAD actor fails with FailedPrecondition "actor is dead: <reason>"; once the
//   head has evicted the record (skyrl-head --keep-terminal), NotFound.
//
// Every call (Call is CallAsync(...).get()) is queued on this client's one CallStream to the
// actor's process (opened on first use, again after it ends). Calls queued while the previous
// message was on the wire go out together in one message, and results come back the same
// way, so many calls in flight cost a few RPC messages instead of one RPC each. Futures are
// completed on gRPC's callback threads (results, look-ups) or on the client's three own
// threads (deadlines, failures, retries). Every call has its own deadline (DEADLINE_EXCEEDED;
// the stream and the other calls go on); when the stream breaks, every call not yet answered
// fails with the same explanation ("actor died: <reason>" when the head says so), asked once,
// or is made again when its CallOptions.retries allow. While calls are in flight the
// connection is pinged (ClientOptions.keepalive_*), so a frozen or cut-off process fails them
// as unreachable before their deadlines.
// With max_concurrency 1, calls of one Client run in the order they were made (each carries
// this client's sequence number for the actor's incarnation, kept across streams).
// Arguments bigger than one message (ClientOptions.max_message_bytes) fail at once with
// InvalidArgument. Destroying the Client fails the calls still in flight with Cancelled.
// Safe for concurrent use.
//
// Client is an interface, so that a driver can be tested against a fake; Connect returns the
// gRPC implementation (runtime/client/grpc_client.h).
#pragma once

#include <functional>
#include <future>
#include <optional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/common/proto_method.h"
#include "runtime/rpc/channel.h"
#include "skyrl/actor_directory.pb.h"
#include "skyrl/placement_group.pb.h"

namespace skyrl {

// The largest working directory (compressed) UploadWorkingDir takes: what one head KV value holds.
inline constexpr int64_t kMaxWorkingDirBytes = (64 << 20) - 4096;

// An actor's options are its spec (protos/skyrl/actor_spec.proto): the one options type of the
// Python and C++ clients, the head and the worker, so an option added to the proto needs no
// code here. ActorSpecFor makes one: the class, its resources (default one CPU), namespace
// "default"; the rest is set on the spec itself.
//   v1::ActorSpec spec = ActorSpecFor("counter", {{"GPU", 1}});
//   spec.set_name("tally");
//   client->CreateActor(spec);
v1::ActorSpec ActorSpecFor(const std::string& class_name,
                           const std::map<std::string, double>& resources = {{"CPU", 1}});

struct Bundle {
  std::map<std::string, double> resources;
  std::map<std::string, std::string> label_selector;
};

struct PlacementGroupOptions {
  std::string name;
  std::string ns = "default";
  std::vector<Bundle> bundles;
  v1::PlacementStrategy strategy = v1::PACK;
  std::string domain_label;       // keep every bundle within one value of this node label
  std::string affinity_group_id;  // prefer this group's nodes
  bool wait_for_nodes = false;    // stay PENDING instead of failing when the cluster can never fit it
  bool detached = false;
};

struct ActorHandle {
  std::string actor_id;
};

struct ClientOptions {
  absl::Duration call_timeout = absl::Seconds(60);  // per call, unless the call says otherwise
  absl::Duration restart_wait = absl::Seconds(30);
  // The largest message this client sends to an actor (one call, or one batch of streamed
  // calls): 4 KiB to rpc::kMaxMessageBytes, the actor hosts' receive limit.
  size_t max_message_bytes = rpc::kMaxMessageBytes;
  // The largest args one call may have, and the largest result it takes: larger than a
  // message, they go as several parts (an actor host takes and gives up to
  // rpc::kDefaultMaxCallBytes). At least max_message_bytes.
  size_t max_call_bytes = rpc::kDefaultMaxCallBytes;
  // While calls to an actor are in flight, its connection is pinged after keepalive_time
  // without news and closed when no answer comes within keepalive_timeout: the calls then
  // fail as they would if the process had died, instead of each waiting out its deadline
  // (a vanished machine or a frozen process sends no reset). keepalive_time is at least 5 s,
  // the most often actor hosts accept pings.
  absl::Duration keepalive_time = absl::Seconds(30);
  absl::Duration keepalive_timeout = absl::Seconds(10);
};

// How one call is made.
struct CallOptions {
  // The call's deadline, counted from when it goes out to the actor (InfiniteDuration: none);
  // unset: ClientOptions.call_timeout. A deadline fails the call, never retries it.
  std::optional<absl::Duration> timeout;
  // Ray's max_task_retries: the call is made again, up to this many times (-1: without end),
  // when the client finds it Unavailable (the actor died under it and may restart, or could
  // not be reached; an Unavailable the actor's method returns is its result, not retried) or
  // when `retry_result` says so of its result. Each retry waits a little longer
  // (5 ms, doubling, at most 1 s) and goes to wherever the actor is then. A retry runs after
  // calls made since: only the first attempt keeps its place in the order.
  int retries = 0;
  // A result (not an error) that asks to be made again, retries permitting: Ray's
  // retry_exceptions, for results that carry an exception. Called on the client's threads.
  std::function<bool(const std::string& result)> retry_result;
  // Whether the actor's max_pending_calls bounds this call (see CallAsync). The Python
  // binding says no: Python handles count their own calls, each copy of a handle apart.
  bool pending_limit = true;
};

class Client {
 public:
  // `head` is HOST:PORT; `token` the cluster token (see rpc::LoadToken).
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const std::string& head, std::string token,
                                                         ClientOptions options = {});
  virtual ~Client() = default;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Creates the actor and returns once it is ALIVE; a constructor error is FailedPrecondition
  // with its message. Its job is this client's (SKYRL_JOB_ID) unless the spec names one.
  // With `return_pending`, returns once the head has recorded the actor (PENDING), not once
  // it is ALIVE: calls made meanwhile wait for it (up to ClientOptions.restart_wait), and a
  // constructor error is the actor's death reason. A cluster with no room now but room
  // enough in principle keeps it PENDING until room comes; one that can never hold it is
  // still ResourceExhausted at once. (Ray's semantics.)
  virtual absl::StatusOr<ActorHandle> CreateActor(v1::ActorSpec spec, bool return_pending) = 0;
  absl::StatusOr<ActorHandle> CreateActor(v1::ActorSpec spec) { return CreateActor(std::move(spec), false); }
  // An actor of `class_name` with the default spec (ActorSpecFor).
  absl::StatusOr<ActorHandle> CreateActor(const std::string& class_name) {
    return CreateActor(ActorSpecFor(class_name), false);
  }
  // Many actors in one CreateActors call per 10,000 (an engine fleet): one result per spec,
  // in order. Each is created or fails on its own, as CreateActor would (a constructor error
  // is FailedPrecondition); a failed item leaves nothing behind and does not stop the
  // others. When the call itself fails, every item of it carries that error: none was
  // created when it was refused (e.g. Unauthenticated), but after a deadline some may have
  // been, as with CreateActor.
  virtual std::vector<absl::StatusOr<ActorHandle>> CreateActors(std::vector<v1::ActorSpec> specs) = 0;
  virtual absl::StatusOr<ActorHandle> GetActor(const std::string& name,
                                               const std::string& ns = "default") = 0;
  virtual absl::StatusOr<v1::ActorInfo> Describe(const ActorHandle& actor) = 0;
  virtual absl::Status Kill(const ActorHandle& actor) = 0;
  // Kills the actor's process as a crash would end it: the actor restarts if its max_restarts
  // allow, and is DEAD otherwise (Ray's kill(no_restart=False)). Not ALIVE: left as it is.
  virtual absl::Status Restart(const ActorHandle& actor) = 0;
  // Ray's blocked tasks: the actor (a task executor whose task waits on others) lends its CPU
  // while `blocked`, so the tasks it waits for can run where it holds it. Returns whether it
  // holds its CPU again (unblocking while others use it: false; a later unblock retries).
  virtual absl::StatusOr<bool> SetBlocked(const ActorHandle& actor, bool blocked) = 0;

  // Placement groups. Create returns the group CREATED or PENDING (with its reason); a group
  // this cluster can never hold is ResourceExhausted saying what is missing, and where.
  virtual absl::StatusOr<v1::PlacementGroupInfo> CreatePlacementGroup(
      const PlacementGroupOptions& options) = 0;
  // The group once CREATED; DeadlineExceeded with the pending reason after `timeout`.
  virtual absl::StatusOr<v1::PlacementGroupInfo> WaitPlacementGroup(const std::string& id,
                                                                    absl::Duration timeout) = 0;
  virtual absl::Status RemovePlacementGroup(const std::string& id) = 0;

  // Runtime environments: packs folder `dir` (regular files, folders and symlinks inside it;
  // at most kMaxWorkingDirBytes compressed, else FailedPrecondition naming the limit) and
  // stores it on the head once, named by its content; returns that name ("sha256:<hex>") for
  // ActorSpec.working_dir. Uploading the same content again stores nothing new.
  virtual absl::StatusOr<std::string> UploadWorkingDir(const std::string& dir) = 0;

  // The head's KV store: sets `key` to `value`, replacing what is there.
  virtual absl::Status KvPut(const std::string& key, const std::string& value) = 0;
  // The value under `key`; NotFound when there is none.
  virtual absl::StatusOr<std::string> KvGet(const std::string& key) = 0;

  // One call, waiting for its result: CallAsync(...).get(), on the actor's CallStream (the
  // actor service's unary Call RPC stays for other clients). `timeout` defaults to
  // call_timeout.
  absl::StatusOr<std::string> Call(const ActorHandle& actor, const std::string& method,
                                   const std::string& args) {
    return CallAsync(actor, method, args).get();
  }
  absl::StatusOr<std::string> Call(const ActorHandle& actor, const std::string& method,
                                   const std::string& args, absl::Duration timeout) {
    return CallAsync(actor, method, args, timeout).get();
  }
  // One call on the actor's CallStream; the future holds the result. Never blocks: a call to
  // an actor whose address is not known yet (starting, restarting, moved) waits in this
  // client, in the order it was made, while the client asks the head where the actor is;
  // then it goes out ahead of any later call. A call whose actor stays PENDING or RESTARTING
  // for ClientOptions.restart_wait fails with Unavailable saying so; one to a DEAD actor
  // fails with FailedPrecondition. An actor whose spec sets max_pending_calls takes at most
  // that many of this client's calls whose results are not in yet: one more fails at once
  // with ResourceExhausted (Ray's PendingCallsLimitExceeded); the client knows the limit once
  // it has created or looked up the actor (its first call looks it up).
  virtual std::future<absl::StatusOr<std::string>> CallAsync(const ActorHandle& actor,
                                                             const std::string& method,
                                                             const std::string& args,
                                                             CallOptions options) = 0;
  std::future<absl::StatusOr<std::string>> CallAsync(const ActorHandle& actor, const std::string& method,
                                                     const std::string& args) {
    return CallAsync(actor, method, args, CallOptions{});
  }
  std::future<absl::StatusOr<std::string>> CallAsync(const ActorHandle& actor, const std::string& method,
                                                     const std::string& args, absl::Duration timeout) {
    CallOptions o;
    o.timeout = timeout;
    return CallAsync(actor, method, args, std::move(o));
  }

  // Protobuf messages as arguments and results: serializes `request`, parses the result as
  // `Reply`; a result that does not parse is Internal naming the type.
  template <typename Reply, typename Request>
  absl::StatusOr<Reply> CallProto(const ActorHandle& actor, const std::string& method,
                                  const Request& request) {
    absl::StatusOr<std::string> bytes = Call(actor, method, request.SerializeAsString());
    if (!bytes.ok()) return bytes.status();
    Reply reply;
    if (!reply.ParseFromString(*bytes))
      return absl::InternalError("actor " + actor.actor_id + " method " + method + ": result is not a " +
                                 Reply::descriptor()->full_name());
    return reply;
  }
  // The same for a method declared as a ProtoMethod: its request and reply types are checked.
  template <typename Request, typename Reply>
  absl::StatusOr<Reply> CallProto(const ActorHandle& actor, const ProtoMethod<Request, Reply>& method,
                                  const Request& request) {
    return CallProto<Reply>(actor, method.name, request);
  }

 protected:
  Client() = default;
};

}  // namespace skyrl
