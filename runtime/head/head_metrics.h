// The head's metrics, read from its tables at each scrape (docs/operations.md "Metrics"):
//   skyrl_nodes{state}                    nodes by state (alive, dead)
//   skyrl_node_resources{node,resource,kind}  per alive node: total and used (kind="total"|"used")
//   skyrl_actors{state,class}             actors by state and class
//   skyrl_placement_groups{state}         placement groups by state
//   skyrl_jobs{state}                     jobs by state
//   skyrl_actor_restarts_total            restarts since the head started
//   skyrl_actor_deaths_total{cause}       deaths since the head started (ActorManager::DeathCause)
//   skyrl_placement_group_pending_seconds{group}  each PENDING group: seconds since created
//   skyrl_rpc_server_handled_total{method,code}, skyrl_rpc_server_handling_seconds{method}
//   skyrl_store_operations_total{op,code}, skyrl_store_operation_seconds{op}: the backend's
//                                         operations (set up by OpenHead)
//   skyrl_store_write_behind_pending      writes waiting for Redis
// and from the step records jobs write (job_metrics_keys.h), for each job running or ended in
// the last 5 minutes, its last step's figures:
//   skyrl_job_step{job_id}, skyrl_job_mean_reward{job_id}, skyrl_job_kl{job_id},
//   skyrl_job_tokens_per_second{job_id}, skyrl_job_staleness{job_id}, skyrl_job_step_seconds{job_id},
//   skyrl_job_phase_seconds{job_id,phase}, skyrl_job_weight_sync_bytes{job_id},
//   skyrl_job_weight_sync_gigabytes_per_second{job_id}; and skyrl_job_dropped_samples_total{job_id}.
// Every state is reported, 0 when none is in it, so a series never disappears.
//
// Thread-safe (the managers are); keeps a reference to `head`, which must outlive it.
#pragma once

#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace skyrl::head {

class Head;

class HeadMetrics : public prometheus::Collectable {
 public:
  explicit HeadMetrics(Head& head) : head_(head) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  Head& head_;
};

}  // namespace skyrl::head
