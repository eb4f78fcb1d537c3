// A worker's metrics (docs/operations.md "Metrics"), read at each scrape:
//   skyrl_worker_actor_processes                  actor processes running
//   skyrl_worker_actor_cpu_seconds_total{actor}   CPU time of each (user + system, /proc/<pid>/stat)
//   skyrl_worker_actor_resident_bytes{actor}      resident memory of each (/proc/<pid>/statm)
//   skyrl_worker_actor_exits_total{cause}         exits since start: exited (code 0), failed
//                                                 (other codes), signaled, killed (asked to stop)
//   skyrl_worker_gpus                             GPUs this node offers
//   skyrl_worker_gpus_in_use                      of those, GPUs held by running actors
//   skyrl_worker_actor_start_seconds              histogram: launch to serving, per actor start
// and, asked of each running actor host (its Telemetry, with a short deadline):
//   skyrl_actor_calls_total{actor,class,method,code}  calls answered, by status code name
//   skyrl_actor_call_seconds{actor,class,method}      histogram: arrival to answer
//   skyrl_actor_queued_calls{actor,class}             calls waiting for an executor
//   skyrl_actor_running_calls{actor,class}            calls running
// A process that ends between the listing and the read is left out of that scrape, and so is
// a host that does not answer in time.
//
// Thread-safe.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "skyrl/actor.pb.h"
#include "skyrl/worker.pb.h"

namespace skyrl::worker {

class WorkerMetrics : public prometheus::Collectable {
 public:
  // (actor id, pid) of each running actor process, asked at each scrape.
  using RunningFn = std::function<std::vector<std::pair<std::string, pid_t>>()>;
  // What the actor hosts report, each asked at each scrape; either may be null.
  struct Hosts {
    std::function<int()> gpus_in_use;
    std::function<absl::StatusOr<v1::ActorTelemetryReply>(const std::string& actor_id)> telemetry;
  };
  WorkerMetrics(RunningFn running, int gpus_offered, std::string proc_root = "/proc", Hosts hosts = {})
      : running_(std::move(running)),
        gpus_(gpus_offered),
        proc_(std::move(proc_root)),
        hosts_(std::move(hosts)) {}

  void RecordExit(const v1::ActorExitInfo& e);
  void RecordStart(absl::Duration launch_to_serving);
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const RunningFn running_;
  const int gpus_;
  const std::string proc_;
  const Hosts hosts_;
  mutable absl::Mutex mu_;
  std::map<std::string, double> exits_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> start_buckets_ ABSL_GUARDED_BY(mu_);  // per kStartBounds, then +Inf
  double start_sum_s_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace skyrl::worker
