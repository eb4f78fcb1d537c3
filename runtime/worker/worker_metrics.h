// A worker's metrics (docs/operations.md "Metrics"), read at each scrape:
//   skyrl_worker_actor_processes                  actor processes running
//   skyrl_worker_actor_cpu_seconds_total{actor}   CPU time of each (user + system, /proc/<pid>/stat)
//   skyrl_worker_actor_resident_bytes{actor}      resident memory of each (/proc/<pid>/statm)
//   skyrl_worker_actor_exits_total{cause}         exits since start: exited (code 0), failed
//                                                 (other codes), signaled, killed (asked to stop)
//   skyrl_worker_gpus                             GPUs this node offers
// A process that ends between the listing and the read is left out of that scrape.
//
// Thread-safe.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "skyrl/worker.pb.h"

namespace skyrl::worker {

class WorkerMetrics : public prometheus::Collectable {
 public:
  // (actor id, pid) of each running actor process, asked at each scrape.
  using RunningFn = std::function<std::vector<std::pair<std::string, pid_t>>()>;
  WorkerMetrics(RunningFn running, int gpus_offered, std::string proc_root = "/proc")
      : running_(std::move(running)), gpus_(gpus_offered), proc_(std::move(proc_root)) {}

  void RecordExit(const v1::ActorExitInfo& e);
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const RunningFn running_;
  const int gpus_;
  const std::string proc_;
  mutable absl::Mutex mu_;
  std::map<std::string, double> exits_ ABSL_GUARDED_BY(mu_);
};

}  // namespace skyrl::worker
