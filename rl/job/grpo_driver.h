// The distributed GRPO job (skyrl-grpo): the loop of RunLocalGrpo with the roles as actors
// over the runtime (the role actors of skyrl-actor-host-rl, host "rl"; role_protocol.h):
//
//   placement group: trainer.tp_size trainer bundles, generator.num_engines engine bundles and
//                    one bundle for reward + reference (CPU bundles); with colocate_all on a
//                    cluster with GPUs, bundle i {CPU 2, GPU 1} holds trainer rank i and engine
//                    rank i at GPU 0.5 each (same device). colocate_all: engines sleep before
//                    training, sync while asleep (staged), wake before generating.
//   per step:  driver MakePrompts -> engines generate (whole groups per engine, in parallel)
//              -> reward and reference (in parallel) -> driver MakeTrainBatch
//              -> every trainer shard trains (in parallel: their TP collective needs them all)
//              -> weight sync, shard to shard: weight_sync's TCP transport on the plan from
//                 the trainer's TP layout to the engines' (ws_send / ws_receive), or every
//                 trainer shard pushing its own shard to every engine with actor calls
//                 (sync_weights / load_shard); engines swap atomically with the new version
//
// Async mode (trainer.async.enabled, colocate_all false): step k + 1 generates on a thread while
// step k trains; the sync waits for it; batches staler than max_staleness are dropped and
// counted. The generation thread uses `client` concurrently with the driver thread. Every call has a deadline
// (ClientOptions.call_timeout). A TP-1 engine that dies is restarted by the runtime (max_restarts); the
// driver then pushes the current weights to it again and retries the call, up to `engine_retries` times per
// step. (Engines of generator.tensor_parallel_size > 1 are not restarted: their TP group would need
// re-forming.) Anything else that fails ends the run with the error (never a hang).
//
// Not thread-safe; one run per call. `client` must outlive the call.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rl/train/job_config.h"
#include "rl/train/local_trainer.h"
#include "rl/train/metrics.h"
#include "runtime/client/client.h"

namespace skyrl::rl {

// How each step's weights reach the engines.
enum class WeightSyncMode {
  // weight_sync's TCP transport on the PreparedSync plan (trainer TP layout -> engines),
  // falling back to kPush for a step when it fails.
  kTcp,
  kPush,  // every shard pushes to every engine with actor calls
};
// "tcp" or "push" (the --weight-sync flag); InvalidArgument naming `what` otherwise.
absl::StatusOr<WeightSyncMode> ParseWeightSyncMode(absl::string_view name, absl::string_view what);

struct DistributedOptions {
  int stop_after_target = 0;  // as RunLocalGrpo
  int engine_retries = 3;
  absl::Duration ready_timeout = absl::Seconds(120);  // placement group
  bool remove_actors = true;                          // kill the actors and remove the group at the end
  WeightSyncMode weight_sync = WeightSyncMode::kTcp;
};

// What a run recovered from, counted as it goes.
struct Recoveries {
  int engine_calls = 0;    // calls retried after an engine restarted
  int sync_fallbacks = 0;  // steps whose TCP weight sync failed and were pushed instead
  Recoveries& operator+=(const Recoveries& o) {
    engine_calls += o.engine_calls;
    sync_fallbacks += o.sync_fallbacks;
    return *this;
  }
};

struct JobActors {
  std::vector<std::string> trainers;
  std::vector<std::string> engines;  // every engine rank: engine e's rank r at e * engine_tp + r
  int engine_tp = 1;
  bool gpu_colocated =
      false;  // colocate_all on GPU bundles: trainer rank i and engine rank i share bundle i's device
  std::string reward, reference, placement_group;
};

struct DistributedSummary {
  RunSummary run;
  double overhead_fraction = 0;                       // sum(step_s - critical-path compute_s) / sum(step_s)
  double compute_s = 0;                               // critical-path model compute over the run
  std::vector<std::vector<int64_t>> engine_versions;  // per step: each engine rank's version after sync
  Recoveries recovered;
  // Connections the trainer shards opened for TCP weight sync over the run, by path: TCP, or
  // a Unix socket to an engine on the same host; and the bytes written straight into
  // same-host engines' buffers.
  int64_t sync_tcp_connections = 0, sync_local_connections = 0, sync_direct_write_bytes = 0;
  double setup_s = 0;     // placement group + actors, before step 1
  int engine_sleeps = 0;  // colocate_all: engine ranks put to sleep before training
  int engine_wakes = 0;   // colocate_all: engine ranks woken before generating
};

// `config_yaml` is the text `config` was parsed from (the actors parse it again).
absl::StatusOr<DistributedSummary> RunDistributedGrpo(
    Client& client, const std::string& config_yaml, const JobConfig& config,
    const DistributedOptions& options, const std::function<void(const StepMetrics&)>& on_step,
    const std::function<void(const JobActors&)>& on_started = nullptr);

}  // namespace skyrl::rl
