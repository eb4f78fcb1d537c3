// worker::HeadLink: a worker's protocol with the head. Registers the node, heartbeats at the
// period the head asks for, registers again when the head does not know the node (restarted
// on the in-memory store, or declared it dead: then the actors from before are stopped, since
// the head restarted them elsewhere), and exits when the head stays unreachable past the
// retry window.
//
// Fencing. The head declares a node dead after T = `period x misses` without a heartbeat and
// restarts its actors elsewhere; a node cut off from the head but alive would go on serving
// the old incarnations meanwhile (two trainer ranks of one index, two engines answering one
// id). So once the head has not answered for 0.4 T, the link asks every peer (the other ALIVE
// nodes, as the head last listed them; 64 at once, none past one that reaches the head)
// whether it reaches the head (holding no list yet, it fences at once): each asked
// peer sends the head a heartbeat there and then, says whether it was answered, and whether
// the asker is still on its own peer list. At the same time it tries the head once more
// itself, on a fresh connection (after a head restart, a connection still in its reconnect
// backoff is no reason to fence). Then:
//   - the head answered the last try: the link is whole.
//   - a peer reaches the head: the head is up and will declare this node dead. Fence: SIGKILL
//     every actor now, with the reason in its log and exit report; while fenced, actors
//     started meanwhile are killed too.
//   - more than half of the N nodes on the list (this one included) are cut off from the head
//     and count this node alive ("support" it): keep the actors. A peer that supports one
//     tells the head so in its heartbeats, and the head restarts a silent node's actors only
//     once half (rounded up) of that node's peers hold a list without it and every support
//     given to it is T old (head::NodeManager's confirmed deaths). Both halves cannot exist
//     at once, so whichever way the network splits (the head down, the head cut off from all,
//     several workers cut off together while it hears the rest), at most one side serves.
//     Asked again every round, and fenced as soon as that majority is gone. Once the head's
//     keep limit (RegisterNodeReply.headless_keep_ms, K) has passed since the last request
//     the head answered was sent, the lease is renewed no more (the actors stop within
//     0.9 T unless the head answers): so the head, which knows when it last heard the node,
//     knows the latest instant any of its leases can run, and restarts its actors then even
//     when no majority is left to confirm the death.
//   - fewer support it: fence. The head may be hearing a majority, which will confirm.
//   - no peers (a lone node): nothing to ask, no fencing. The head confirms a lone node's
//     death at once; its actors then wait for room on a node that joins, so two incarnations
//     can serve at once only if a node joins while this one is cut off.
// The head answers again: the link is whole; fenced actors' exits reach the head through the
// worker's exit reports and their actors restart.
// Timing: heartbeats time out after T/10 and, while the head does not answer, come every T/10
// instead of every period, so a round takes at most T/5; the question to the peers and the
// last try take at most T/5 together. The decision falls within 0.4 T + T/5 + T/5 = 0.8 T of
// the last answer, and SIGKILL is immediate: before the head's T, whatever the period.
// Heads with fewer than 4 misses do not ask workers to fence (RegisterNodeReply).
//
// The lease. The link cannot fence while its worker is frozen (SIGSTOP) or stalled, so the
// actors also hold a lease (LocalActors::Lease) and stop themselves when it runs out. Each
// answer from the head to a request sent at s renews it until s + 0.9 T, before the head's
// T (counted from when it heard the node, after s). Each round that keeps the actors on a
// majority's support renews it until 0.9 T after the round began, before any support given
// in that round is T old (the head waits that long); a lone node's round, for 0.9 T; neither
// past s + K + 0.9 T for the last answered request's s. Without fencing (fewer than 4 misses)
// there is no limit.
//
// Process checks. The head names the worker processes of silent nodes in this worker's
// process space (HeartbeatReply.check); the link reports those certainly gone (no such pid,
// or another start time) in the next heartbeat, which makes their deaths certain at once.
//
// The head, the peers, the node's actors and the clock are injected: the daemon passes gRPC
// and the real ones, tests fakes (Step() is one round, so nothing sleeps). Safe for
// concurrent use (Step from one thread; node_id and Contact from any).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/common/clock.h"
#include "runtime/common/ids.h"
#include "skyrl/node.pb.h"
#include "skyrl/worker.pb.h"

namespace skyrl::worker {

// The head, as the link needs it.
class HeadApi {
 public:
  virtual ~HeadApi() = default;
  virtual absl::StatusOr<v1::RegisterNodeReply> RegisterNode(const v1::RegisterNodeRequest& request,
                                                             absl::Duration timeout) = 0;
  virtual absl::StatusOr<v1::HeartbeatReply> Heartbeat(const v1::HeartbeatRequest& request,
                                                       absl::Duration timeout) = 0;
  // Drops the connection, so the next request dials afresh (no reconnect backoff).
  virtual void Reconnect() {}
};

// Other workers: whether they reach the head (WorkerService.HeadContact), asked by `asker`.
class PeerApi {
 public:
  virtual ~PeerApi() = default;
  virtual absl::StatusOr<v1::HeadContactReply> HeadContact(const std::string& address,
                                                           const std::string& asker,
                                                           absl::Duration timeout) = 0;
};

// This node's actor processes.
class LocalActors {
 public:
  virtual ~LocalActors() = default;
  virtual std::vector<ActorId> Running() const = 0;
  // The head declared the node dead: stop these, returning once they are gone (the head
  // restarts them elsewhere on the next heartbeat).
  virtual void Stop(const std::vector<ActorId>& ids) = 0;
  // The head asks (HeartbeatReply.stop) that start `incarnation` of `id` not run here: stop
  // it, or an older one, and refuse it later; true once none runs.
  virtual bool StopStart(const ActorId& id, int64_t incarnation) = 0;
  // SIGKILL every actor now, writing `reason` to its log and exit report.
  virtual int Fence(const std::string& reason) = 0;
  // The actors may serve for `valid_for` from now (InfiniteDuration: without limit); each
  // stops itself once that passes without another call (a frozen or stalled worker cannot
  // fence them). runtime/common/lease.h.
  virtual void Lease(absl::Duration /*valid_for*/) {}
};

struct HeadLinkOptions {
  std::string head_address;  // for messages
  // Exit after the head has been unreachable this long (the worker's actors die with it);
  // zero: never.
  absl::Duration retry_window = absl::Seconds(300);
  // Whether the worker process `pid` that started at `start_ticks` is certainly gone from
  // this machine (skyrl::ProcessGone); null: the head's questions are not answered.
  std::function<bool(int pid, int64_t start_ticks)> process_gone;
};

class HeadLink {
 public:
  // `node` describes this node (resources, labels, address); its node_id is filled in once
  // registered. The references must outlive the link.
  // `probe` is a second connection to the head, used from other threads to answer peers
  // (Contact); `head` is the Round thread's own.
  HeadLink(v1::NodeInfo node, HeadApi& head, HeadApi& probe, PeerApi& peers, LocalActors& actors,
           const Clock& clock, HeadLinkOptions options);

  struct Step {
    absl::Duration wait;           // until the next round
    std::optional<int> exit_code;  // set: the worker must exit with it
  };
  // One round: register or heartbeat; when the head does not answer, fence if need be.
  Step Round();

  // Empty until registered.
  std::string node_id() const;
  // For WorkerService.HeadContact from the node `asker`: sends the head a heartbeat now
  // (through `probe`), and says whether it was answered, how long since the head last
  // answered, fenced or not, and whether `asker` is on this node's peer list. Not answered
  // and on the list: a support, reported to the head for T.
  v1::HeadContactReply Contact(const std::string& asker = "");
  bool fenced() const;

 private:
  // The head answered a request sent at `sent`: the link is whole, and the lease renewed.
  void Reached(absl::Time sent) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The head did not answer: fence when the threshold and the peers say so.
  void MaybeFence(absl::Time now);
  struct Peer {
    std::string node_id;
    std::string address;
  };
  // Why to fence (a peer reaches the head, or too few support this node), or "" to keep the
  // actors.
  std::string ReasonToFence(const std::vector<Peer>& peers, absl::Duration timeout);
  void FenceLocked(std::string reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How long a round that began at `began` (within the keep limit) and keeps the actors may
  // renew their lease for: 0.9 T from then.
  absl::Duration KeepTermLocked(absl::Time began) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The head's keep limit from a registration reply (a fencing link only; 0: no limit).
  void AdoptKeepLocked(int64_t keep_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The same from a heartbeat reply, whose 0 says nothing (a head that does not fence, or
  // does not know the field): the limit the link has stays.
  void AdoptKeepLocked(const v1::HeartbeatReply& reply) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The period (and so the death threshold T) a heartbeat reply asks for: longer in a large
  // cluster. The head counts on the longer of this and the one this link said it applies.
  void AdoptPeriodLocked(const v1::HeartbeatReply& reply) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a round that began at `began` may still renew the lease (within the keep limit);
  // says so once when it may not.
  bool MayRenew(absl::Time began) ABSL_LOCKS_EXCLUDED(mu_);
  // Checks the worker processes the head asks about (HeartbeatReply.check), to report those
  // gone in the next heartbeat.
  void CheckAsked(const v1::HeartbeatReply& reply) ABSL_LOCKS_EXCLUDED(mu_);
  // A heartbeat: this node, its list's version, the supports it gave within T.
  v1::HeartbeatRequest HeartbeatLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AdoptPeersLocked(const v1::HeartbeatReply& reply) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stops the starts the reply asks to (HeartbeatReply.stop), to report them stopped.
  void StopAsked(const v1::HeartbeatReply& reply) ABSL_LOCKS_EXCLUDED(mu_);
  // One more heartbeat on a fresh connection; true when the head answered.
  bool LastTry(absl::Duration timeout);
  // How long the actors' lease runs from an answer: 0.9 T.
  absl::Duration LeaseTerm() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How long a request to the head or a peer may take.
  absl::Duration RequestTimeout() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  v1::NodeInfo node_;  // the Round thread's
  HeadApi& head_;
  HeadApi& probe_;
  PeerApi& peers_api_;
  LocalActors& actors_;
  const Clock& clock_;
  const HeadLinkOptions options_;

  mutable absl::Mutex mu_;
  std::string node_id_ ABSL_GUARDED_BY(mu_);
  bool registered_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration period_ ABSL_GUARDED_BY(mu_) = absl::Seconds(1);
  int misses_ ABSL_GUARDED_BY(mu_) = 0;  // the head's (RegisterNodeReply.heartbeat_misses)
  absl::Duration death_after_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();  // 0: the head does not guard
  // How long after its last answer the peers' word may keep the actors (0: no limit).
  absl::Duration keep_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  bool past_keep_ ABSL_GUARDED_BY(mu_) = false;                 // said so once
  absl::Time last_sent_ ABSL_GUARDED_BY(mu_);                   // send time of the last request answered
  std::optional<absl::Time> last_answer_ ABSL_GUARDED_BY(mu_);  // when that answer came
  std::vector<Peer> peers_ ABSL_GUARDED_BY(mu_);
  uint64_t peers_version_ ABSL_GUARDED_BY(mu_) = 0;
  // node id -> when this node last supported it (Contact).
  absl::flat_hash_map<std::string, absl::Time> supports_ ABSL_GUARDED_BY(mu_);
  // Actors running when the head last said it did not know the node (see Round).
  std::optional<std::vector<ActorId>> stale_ ABSL_GUARDED_BY(mu_);
  bool fenced_ ABSL_GUARDED_BY(mu_) = false;
  std::string fence_reason_ ABSL_GUARDED_BY(mu_);
  bool cleared_ ABSL_GUARDED_BY(mu_) = false;  // peers asked this outage: a majority supports
  // Starts stopped as the head asked, reported in each heartbeat while it still asks.
  std::vector<v1::ActorStart> stopped_ ABSL_GUARDED_BY(mu_);
  // Worker processes the head asked about that are gone, reported in the next heartbeats.
  std::vector<v1::ProcessCheck> gone_ ABSL_GUARDED_BY(mu_);
};

}  // namespace skyrl::worker
