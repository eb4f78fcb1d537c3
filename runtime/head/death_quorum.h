// When a silent node's death is certain enough for its actors to start elsewhere: the peer
// lists the head sends, what each node may hold, and the confirmations a death waits for.
//
// Why it waits. A worker cut off from the head keeps its actors only while more than half of
// the nodes on its peer list (itself included) are cut off too and still count it alive
// (worker::HeadLink). So a node the head declares DEAD by silence is *pending*: its actors
// stay where they are, and start elsewhere only once one of these holds
//
//   peers     at least half (rounded up) of the nodes on every list it may hold have been
//             heard holding a list without it (they will not count it alive again), and
//             every support one of them gave it (HeartbeatRequest.supports) is a death
//             threshold old; a node that left (unregistered) counts, once the supports it
//             may have given run out;
//   stopped   it came back (registered again, told it was dead) and has heartbeated since,
//             holding no list: it stopped its old actors first;
//   gone      a worker in its process space found its worker process gone (the head says
//             which nodes, NodeManager decides what a report proves);
//   horizon   no lease its worker renewed can still run: workers keep their actors on their
//             peers' word for at most the keep limit K past the last request the head
//             answered, so K + T after the head last heard it, whoever is left to confirm;
//   gave up   its worker's retry window and a threshold have passed since it was last heard
//             (the worker has exited).
//
// Two halves of a list cannot both hold, so two incarnations of an actor do not serve at
// once, however the network splits; the price is that when more than half of a node's peers
// die with it, its actors wait for the horizon or the retry window. A node whose lists may
// all be of itself alone, or that may hold none, is confirmed at once: a lone node cannot be
// told from a dead one (and a worker holding no list fences its actors when cut off).
//
//     ALIVE ---silent T---> DEAD, pending ---(one of the above)---> DEAD, confirmed:
//       ^                    |     ^                                its actors restart
//       |             registers    | silent again (its retry
//       |                    v     | window or horizon only)
//       +---- confirmed ---- back: ALIVE, not announced; its first heartbeat holding no
//             (announced)    list is "stopped"
//
// Peer lists. A node's list is its ring neighbours among the ALIVE nodes: the kPeersEachSide
// after it in id order and as many before it, wrapping round (all of them in a smaller
// cluster), so a list costs O(1) to send and to hold at any size. The version changes with
// every change of the ALIVE set or of an address. What a node may hold is the list it last
// said it holds and the last one sent to it; a past version's ALIVE set is rebuilt from a
// log of changes (the last kMaxChanges) instead of a copy kept per version. After a head
// restart, a list a previous head sent is taken to be cut from the nodes recovered (those
// that may have been on such lists), until the node says it holds one of this head's.
//
// A pure state machine: time comes in as arguments (`now` from the head's clock, `steady_now`
// for the lease horizon), nothing is stored, nothing is locked. Its owner (NodeManager) holds
// its lock around every call and writes the node table.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "runtime/common/ids.h"

namespace skyrl::head {

// A worker's word that it counted a cut-off peer alive (HeartbeatRequest.supports).
struct PeerSupport {
  NodeId node;
  absl::Duration ago;  // when the heartbeat was sent
};

class DeathQuorum {
 public:
  static constexpr size_t kPeersEachSide = 8;
  // Changes of the ALIVE set kept to rebuild past lists.
  static constexpr size_t kMaxChanges = 1 << 16;
  // Pending::version of a death no list confirms (the node came back).
  static constexpr uint64_t kNoConfirmations = UINT64_MAX;
  // What a node holding a list this head cannot know (a previous head's) is counted to
  // hold: never a version of this head's.
  static constexpr uint64_t kPreviousHeadsList = 2;

  // The latest a pending death waits until, whatever its peers say (InfiniteFuture: no such
  // bound): its worker has given up on the head (head's clock), no lease it renewed can run
  // (steady clock).
  struct Deadlines {
    absl::Time give_up_at = absl::InfiniteFuture();
    absl::Time horizon = absl::InfiniteFuture();
  };
  // A pending death.
  struct Pending {
    uint64_t version = 0;                  // lists from this version on leave it out
    absl::flat_hash_set<NodeId> eligible;  // the peers on every list it may hold
    size_t needed = 0;                     // confirmations it takes
    absl::flat_hash_set<NodeId> confirmed;
    absl::Time not_before;  // the supports given to it have run out
    Deadlines deadlines;
    std::string reason;  // why it was declared dead
    // Registered again (ALIVE, told it was dead, so stopping its old actors): no list
    // confirms it any more; its own heartbeat since does (`stopped`).
    bool back = false;
    bool stopped = false;
  };
  enum class Why { kStopped, kProcessGone, kPeers, kHorizon, kGaveUp };
  struct Confirmed {
    NodeId node;
    Why why;
    size_t peers = 0;  // kPeers: how many confirmed
  };

  // `first_version`: the first list version; a head's versions never repeat an earlier
  // head's (its start time in nanoseconds).
  explicit DeathQuorum(uint64_t first_version);

  // --- Peer lists.
  uint64_t version() const { return version_; }
  size_t alive_count() const { return alive_.size(); }
  // A node's state or address changed; `alive`: whether it is ALIVE now.
  void Changed(const NodeId& id, bool alive);
  // The list `id` is sent now, itself left out.
  std::vector<NodeId> PeersOf(const NodeId& id) const;
  // The list of `id` among `alive`, itself included (a worker counts itself).
  static absl::flat_hash_set<NodeId> ListOf(const NodeId& id, const std::set<NodeId>& alive);

  // --- Recovery, after a head restart: every node of the table once, then the pending
  // deaths. `alive`: ALIVE in the table (it may hold a previous head's list); `on_lists`:
  // it may be on a previous head's lists (ALIVE, pending, or dead too recently for its
  // worker to have given up).
  void Recovered(const NodeId& id, bool alive, bool on_lists);
  // A death the previous head had not confirmed: confirmed afresh against the nodes
  // recovered, once the supports given meanwhile run out (`not_before`).
  void RecoveredPending(const NodeId& id, bool back, absl::Time not_before, Deadlines deadlines,
                        std::string reason);

  // --- What nodes say and do.
  // Registered (again) holding list `holds` (0: none) until it has the reply. A pending
  // death becomes `back`; returns whether it was pending.
  bool Registered(const NodeId& id, uint64_t holds);
  // Heard holding `holds` (0: none; a version this head never sent counts as a previous
  // head's list); `sent`: the reply carries the current list. Its supports delay the deaths
  // they were given to by `limit` (the longest threshold). Returns the version it holds as
  // the quorum counts it (for the reply).
  uint64_t Heard(const NodeId& id, uint64_t holds, bool sent, const std::vector<PeerSupport>& supports,
                 absl::Time now, absl::Duration limit);
  // Left (unregistered; its worker stopped): it supports no one once `limit` has passed, so
  // it confirms every death it could, then. Whatever was pending for it ends.
  void Left(const NodeId& id, absl::Time now, absl::Duration limit);

  // --- Deaths.
  // What confirms the death of `id`, declared now by silence: for a node back from a death
  // still pending, that death, now by its deadlines alone (it may not have had the reply
  // that told it to stop its actors); otherwise, with `confirm` (workers fence), its peers
  // on every list it may hold; else nothing (needed 0: certain at once).
  Pending Declare(const NodeId& id, absl::Time now, Deadlines deadlines, bool confirm,
                  absl::Duration limit) const;
  // Waits for `pending` (from Declare), from the current version on.
  void Await(const NodeId& id, Pending pending);
  // Whether a death from Declare waits at all (else it is certain at once).
  static bool Waits(const Pending& p) { return p.needed > 0 || p.version == kNoConfirmations; }
  // The pending death of `id`, or null. The pointer is valid until the next call that
  // changes the quorum: copy what is needed before one.
  const Pending* Find(const NodeId& id) const;
  bool pending(const NodeId& id) const { return pending_.contains(id); }
  // The pending deaths confirmed by now; `process_gone`: a node whose worker process was
  // found gone (NodeManager's word). Ready does not forget them: Forget does, once stored.
  std::vector<Confirmed> Ready(absl::Time now, absl::Time steady_now,
                               const std::function<bool(const NodeId&)>& process_gone) const;
  // Gone for good (confirmed dead, or left): what was kept about its lists and death ends.
  void Forget(const NodeId& id);
  // Past ALIVE sets are rebuilt at most once between two calls of this (each liveness check).
  void ClearCache() { alive_at_.clear(); }

 private:
  // The lists a node may hold: the one it last said it has, and the one last sent.
  struct Held {
    uint64_t reported = 0;
    uint64_t sent = 0;
  };
  Pending Confirmation(const NodeId& id, absl::Time now, Deadlines deadlines, absl::Duration limit) const;
  // The ALIVE nodes at `version`; null when the log no longer reaches back that far (or the
  // version is not this head's).
  const std::set<NodeId>* AliveAt(uint64_t version) const;
  const std::set<NodeId>& RecoveredSet() const;

  uint64_t version_;
  std::set<NodeId> alive_;  // in id order: the ring lists are cut from
  struct Change {
    uint64_t version = 0;
    NodeId node;
    bool alive = false;  // what the change made it
  };
  // Every change of the ALIVE set after log_floor_.
  std::deque<Change> changes_;
  uint64_t log_floor_;
  mutable std::map<uint64_t, std::set<NodeId>> alive_at_;
  std::vector<NodeId> recovered_;
  mutable std::optional<std::set<NodeId>> recovered_set_;
  absl::flat_hash_map<NodeId, Held> held_;
  // Nodes that left, and when.
  absl::flat_hash_map<NodeId, absl::Time> left_;
  absl::flat_hash_map<NodeId, Pending> pending_;
};

}  // namespace skyrl::head
