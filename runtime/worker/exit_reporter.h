// worker::ExitReporter: tells the head of every actor process that ended on this node, in
// the order they ended, from its own thread, retrying while the head is unreachable (an exit
// is how the head learns to restart an actor, so none may be dropped on a transient error).
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "skyrl/actor_directory.pb.h"

namespace skyrl::worker {

class ExitReporter {
 public:
  // Sends one report (ActorDirectory.ReportActorExit).
  using Send = std::function<absl::Status(const v1::ReportActorExitRequest&)>;
  // The node id the head knows this node by; empty while not registered.
  using NodeId = std::function<std::string()>;

  ExitReporter(Send send, NodeId node_id) : send_(std::move(send)), node_id_(std::move(node_id)) {}
  ~ExitReporter() { Stop(); }

  // Queues an exit. Safe from any thread.
  void Add(const v1::ActorExitInfo& exit);
  // One attempt to report the oldest queued exit. It leaves the queue when the head took it,
  // or refused it as invalid (InvalidArgument: it would be refused again); any other error
  // keeps it first. Returns how long to wait before the next attempt: none while there is
  // more to send, longer after an error or while there is nothing to send or no node id.
  absl::Duration Step();
  size_t pending() const;

  // Runs Step on a thread of its own until Stop.
  void Start();
  void Stop();

 private:
  const Send send_;
  const NodeId node_id_;
  mutable absl::Mutex mu_;
  std::deque<v1::ActorExitInfo> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace skyrl::worker
