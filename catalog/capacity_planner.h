// The capacity planner behind `skyrl plan`: does a model fit a cluster, and how.
//
// For a (model, mode, cluster, placement) it chooses the trainer's TP/PP/EP/DP and the
// generator's engine TP and count, using the memory model of catalog/memory.h:
//   - separate pools (default): the trainer takes the first T GPUs, the generator the other
//     N-T; T is the feasible split closest to an even one. Colocated (--colocate): both use
//     every GPU, one sleeping while the other works (vLLM sleep mode / trainer offload), so a
//     GPU must hold the larger of the two plus both CUDA contexts.
//   - trainer layout: TP within a node (divides the GPUs per node and the attention heads),
//     PP a power of two, EP a divisor of TP*DP and of the expert count; among the layouts that
//     fit, the smallest PP, then the smallest TP (most data parallelism), then the largest EP.
//     FSDP rows shard over every trainer GPU (TP=PP=EP=1).
//   - generator: engines of the smallest TP (within a node) that fits, as many as the pool
//     holds.
// Refusals are FailedPrecondition (mode known not to work) or ResourceExhausted (does not
// fit), with the reason and the minimum cluster of that GPU type, e.g.
//   "Kimi-K2.7: full fine-tuning is known not to work; LoRA needs at least 2 nodes x 8 B300".
// Pure functions over an immutable Catalog: thread-safe.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "catalog/catalog.h"
#include "catalog/hardware.h"
#include "catalog/memory.h"
#include "catalog/placement.h"
#include "catalog/sync_plan.h"

namespace skyrl::catalog {

struct TrainerPlan {
  TrainerShape shape;
  MemoryBreakdown memory;  // per GPU
};

struct GeneratorPlan {
  int gpus = 0;
  int tp = 1;
  int engines = 0;
  RolloutPrecision precision;
  MemoryBreakdown memory;  // per GPU
};

// One weight sync from the trainer to every engine. Without a plan (the weight_sync planner
// failed, or PlanRequest::plan_weight_sync is off) only the bandwidth-only estimate is set;
// with one, `bytes`, `lower_bound_s` and `predicted_s` are the weight_sync planner's.
struct WeightSyncBound {
  double bytes = 0;                        // moved in one sync (estimate: what one engine receives, bf16)
  std::string link;                        // the estimate's link: "NIC" | "NVLink"
  double link_gb_s = 0;                    // per GPU, one direction
  double bandwidth_estimate_s = 0;         // bytes over the narrowest link (bandwidth-only)
  double lower_bound_s = 0;                // never faster than this (the planner's bound when planned)
  std::optional<double> predicted_s;       // the planner's (or PlanRequest::weight_sync_predictor's)
  std::optional<SyncPlanSummary> planned;  // layouts, bytes, times, planning time
  std::string note;
};

// One placement group of a plan: what the job asks the scheduler for, and where the scheduler
// places it (PlaceGroups on the plan's cluster; one BundlePlacement per bundle of `spec`).
struct PlannedGroup {
  PlacementGroupSpec spec;
  GroupPlacement placement;
};

struct Plan {
  const Row* row = nullptr;
  const ModelEntry* model = nullptr;
  Mode mode = Mode::kFull;
  Placement placement = Placement::kSeparate;
  Cluster cluster;
  Assumptions assumptions;
  // The training recipe in effect (ChooseTrainingRecipe of `assumptions`, resolved once by the
  // planner); only full fine-tuning uses it (a LoRA base stays bf16).
  TrainingPrecision recipe;
  double usable_bytes_per_gpu = 0;
  TrainerPlan trainer;
  GeneratorPlan generator;
  // The groups the job creates, in creation order (colocated: `colocated`; separate: `trainer`,
  // then one `generator-<i>` per engine), each with where the scheduler places it. A plan
  // exists only when the scheduler places them all.
  std::vector<PlannedGroup> groups;
  WeightSyncBound weight_sync;
  std::vector<std::string> notes;  // limitations and reading notes that apply
};

struct PlanRequest {
  std::string model;
  std::optional<Mode> mode;        // default: full if supported, else LoRA
  std::optional<Cluster> cluster;  // default: the row's stated minimum (smallest type for "GPUs")
  bool colocate = false;
  std::string backend;            // "" = DefaultBackend
  std::string rollout_precision;  // "" = the lowest the row supports
  Assumptions assumptions;
  // Run the weight_sync planner on every successful plan (PlanWeightSync). The probes of a
  // minimum search never build a plan (they only fit layouts: no placement, no weight sync).
  bool plan_weight_sync = true;
  // An override of the prediction (tests, what-if studies): given the finished plan (layouts,
  // cluster, bound), the predicted seconds of one weight sync. Called once per successful plan,
  // after the built-in planner, on the caller's thread. An error or a prediction below the
  // lower bound becomes a note; the plan stands.
  std::function<absl::StatusOr<double>(const Plan&)> weight_sync_predictor;
};

absl::StatusOr<Plan> MakePlan(const Catalog& catalog, const PlanRequest& request);

// What an offloaded optimizer costs a plan (all zero when plan.trainer.shape.offload_fraction
// is 0): bytes of host memory per trainer GPU and per fullest node, what the node offers, and
// the PCIe traffic of one optimizer step per GPU and direction with its least time.
struct OffloadFacts {
  double fraction = 0;
  double host_per_gpu = 0;
  double host_per_node = 0;
  double host_usable_per_node = 0;
  double transfer_per_gpu = 0;
  double transfer_s = 0;
};
OffloadFacts OffloadFactsOf(const Plan& plan);

// The same for a resolved row, model and mode; no defaults.
absl::StatusOr<Plan> PlanOn(const Catalog& catalog, const Row& row, const ModelEntry& model, Mode mode,
                            const Cluster& cluster, Placement placement, const PlanRequest& options);

// The smallest cluster of `gpu` that fits, among 1x1, 1x2, 1x4, 1x8, 2x8, ... 64x8; nullopt
// when none does. Nodes get `host_gb_per_gpu` GB of host memory per GPU (negative: the GPU
// type's reference system's share).
std::optional<HardwareSpec> MinimumHardware(const Catalog& catalog, const Row& row, const ModelEntry& model,
                                            Mode mode, const GpuType& gpu, Placement placement,
                                            const PlanRequest& options, double host_gb_per_gpu = -1);

// The training recipe the row's stated minimum was read for, filled into what `a` leaves unset:
// reference.training_precision when a->training_precision is empty, and
// reference.optimizer_state when a->optimizer_state is empty and the training precision is then
// the reference's (moments chosen for another recipe are not carried over). Callers apply it
// for the row's reference model in its reference mode only; MakePlan does so without a
// cluster, as `skyrl plan --list` does for every row's own minimum.
void UseReferenceRecipe(const Row& row, Assumptions* a);

// The row's stated minimum as a concrete cluster ("any" -> the smallest GPU type).
Cluster StatedMinimum(const Catalog& catalog, const Row& row);

// Clusters "one step below" a minimum: one node fewer, half the GPUs per node, the next
// smaller GPU type (each where it exists).
std::vector<Cluster> BelowMinimum(const Catalog& catalog, const Cluster& minimum);

}  // namespace skyrl::catalog
