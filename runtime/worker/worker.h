// The worker daemon's body: one per node. skyrl-worker's main parses flags into
// WorkerOptions and calls RunWorker, which serves the node's WorkerService (actor processes,
// runtime/worker/worker_service.h), keeps the node registered and heartbeating
// (worker::HeadLink), reports actor exits (worker::ExitReporter), and leaves the cluster on
// SIGTERM or SIGINT.
#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/worker/node_resources.h"

namespace skyrl::worker {

struct WorkerOptions {
  std::string head;                   // HOST:PORT
  std::string token;                  // the cluster token
  std::string bind = "127.0.0.1";     // what this worker and its actors listen on
  int port = 0;                       // this worker's service (0: any free port)
  std::string node_ip = "127.0.0.1";  // the address other nodes reach this one at
  std::string resources;              // overrides detected resources, e.g. "CPU=8,GPU=4"
  std::string labels;                 // e.g. "accelerator=H100,pool=train"
  std::string gpu_ids;                // declared device ids instead of detected ones, e.g. "0,1"
  absl::Duration head_retry_window = absl::Seconds(300);  // zero: never give up on the head
  std::string log_dir;                                    // actor logs (empty: $TMPDIR/skyrl-worker-<pid>)
  std::string actor_host;          // actor host binary (empty: skyrl-actor-host beside this one)
  std::string python;              // interpreter for Python actors and tasks (empty: the one built for)
  bool python_fork_server = true;  // Python actors forked from a prestarted interpreter (fork_server.h)
  int metrics_port = -1;           // Prometheus /metrics on bind:port (worker_metrics.h); -1 off, 0 any
};

// What this node offers the head: its resources and GPU ids (detected, or as the flags say)
// and its labels.
struct NodeDescription {
  NodeOffer offer;
  std::map<std::string, std::string> labels;
};

// Checks the head address and reads the node's resources, GPU ids and labels (detecting the
// GPUs once); InvalidArgument naming the flag.
absl::StatusOr<NodeDescription> DescribeNode(const WorkerOptions& options);

// Serves `node` (from DescribeNode). Returns the process exit code: 2 when the log folder
// cannot be made or the port not bound (the error on stderr), 0 after leaving on a signal. Exits the process
// (HeadLink's code) when the head stays away past the retry window.
int RunWorker(WorkerOptions options, const NodeDescription& node);

}  // namespace skyrl::worker
