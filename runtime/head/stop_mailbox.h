// Stops the head asks of a worker through its heartbeat replies: a start on a node that the
// head could not reach to stop (a one-way partition: the worker still reaches the head). The
// actor side owns it and writes to it (ActorManager); the node service reads it when a
// heartbeat comes in (Exchange).
//
//   Request(node, start) --> asked in each heartbeat reply of `node` --> the worker reports
//   it stopped (Exchange) --> Reported(node, start) until Forget
//
// A request ends when the worker reports the start stopped, when it is forgotten, or (one
// that nobody waits for: `awaited` false) when the node is gone for good (NodeGone: its
// death confirmed, so its worker fenced its actors or left). A node gone for good takes no
// requests until it is back (NodeBack: registered and announced again). Only the last
// `keep_gone` nodes gone are remembered so (a churning cluster's ids do not pile up): a
// request for a node gone before those is kept, as for a node still there.
// Safe for concurrent use; its mutex is a leaf.
#pragma once

#include <cstdint>
#include <deque>
#include <utility>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "runtime/common/ids.h"

namespace skyrl::head {

// One start of an actor (ActorInfo.incarnation).
struct ActorStart {
  std::string actor_id;
  int64_t incarnation = 0;
  friend bool operator==(const ActorStart&, const ActorStart&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const ActorStart& s) {
    return H::combine(std::move(h), s.actor_id, s.incarnation);
  }
};

class StopMailbox {
 public:
  explicit StopMailbox(size_t keep_gone = 10000) : keep_gone_(keep_gone) {}

  // `reported` (optional; set before use) is told of each awaited start a worker reports
  // stopped, after Exchange releases the mailbox's lock.
  using OnReported = std::function<void(const NodeId& node, const ActorStart& start)>;
  void SetOnReported(OnReported reported) { reported_ = std::move(reported); }

  // Asks `node`'s worker to stop `start` (already reported stopped: nothing to ask).
  // `awaited`: someone waits for Reported, so the request outlives the node's death.
  void Request(const NodeId& node, const ActorStart& start, bool awaited = true);
  // Whether the worker reported the requested (awaited) `start` stopped.
  bool Reported(const NodeId& node, const ActorStart& start) const;
  // Ends a request and its report.
  void Forget(const NodeId& node, const ActorStart& start);
  // A heartbeat of `node` reporting `stopped`: records the reports of what was asked (other
  // reports count for nothing: a worker cannot end a wait it was not part of) and returns
  // the starts its reply asks to stop.
  std::vector<ActorStart> Exchange(const NodeId& node, const std::vector<ActorStart>& stopped);
  // The node is gone for good (its actors are stopped): requests nobody waits for end, and
  // none is taken until NodeBack.
  void NodeGone(const NodeId& node);
  void NodeBack(const NodeId& node);

 private:
  OnReported reported_;
  mutable absl::Mutex mu_;
  // Still asked (whether awaited), and reported stopped, by node.
  absl::flat_hash_map<NodeId, absl::flat_hash_map<ActorStart, bool>> asked_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<NodeId, absl::flat_hash_set<ActorStart>> done_ ABSL_GUARDED_BY(mu_);
  // Nodes gone for good, each with the number of its NodeGone; gone_order_ in that order
  // (an entry whose number no longer matches is stale: the node came back, and went again).
  const size_t keep_gone_;
  uint64_t gone_count_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<NodeId, uint64_t> gone_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<NodeId, uint64_t>> gone_order_ ABSL_GUARDED_BY(mu_);
};

}  // namespace skyrl::head
