// The weight-sync plan of a capacity plan: the catalog's architecture as a weight_sync::Model,
// the chosen trainer and generator layouts as weight_sync layouts, and weight_sync's transfer
// planner run under the cluster's cost model (docs/catalog.md, "Weight sync").
//
// Pure functions; thread-safe. The Model returned owns its data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "catalog/catalog.h"
#include "weight_sync/plan/layout.h"
#include "weight_sync/plan/model.h"

namespace skyrl::catalog {

struct Plan;

struct SyncModelOptions {
  // LoRA adapters ("<base>.lora_A.weight" [r, in], "<base>.lora_B.weight" [out, r]) on every
  // linear layer of the mixers and FFNs (experts included), as catalog::LoraParams counts
  // them; 0: none.
  int lora_rank = 0;
  // The TP sizes the model will be split with (both sides of the sync). A split block that one
  // of them cannot divide (by heads or by rows) is marked replicated instead, so that layouts
  // validate; the count of such parameters is returned in SyncModel::replicated_for_tp.
  std::vector<int> tp_sizes;
  // Routed experts as this many tensors per projection per layer, each stacking
  // experts/expert_groups consecutive experts along dim 0 (grouped-GEMM storage); it must
  // divide the expert count. 0: one tensor per expert. weight_sync places a group like one
  // expert, so any group count that the layouts' expert spreads divide gives every rank the
  // same bytes as per-expert tensors, with far fewer tensors to plan.
  int expert_groups = 0;
};

struct SyncModel {
  weight_sync::Model model;
  int replicated_for_tp = 0;  // split parameters turned replicated (see SyncModelOptions)
};

// Builds the parameter list with weight_sync's HfParamBuilder (weight_sync/plan/hf_params.h, the
// one builder of Hugging Face parameter lists): names follow Hugging Face
// ("model.layers.3.self_attn.q_proj.weight"; MTP layers "mtp.<i>.*", the vision tower "visual.*",
// adapters "*lora_A*"/"*lora_B*"), shapes [out, in], bf16, TP split dims with fused KV / gate-up
// sub-blocks and head sizes, one parameter per routed expert (or per group of experts, see
// expert_groups) with its index, layers for pipeline stages. Without adapters the element count
// equals CountParams(arch).total() + mtp (same terms; tests check it).
// Mixers and FFN blocks go to layers max(mixers, ffn blocks) apart, spread evenly (hybrids
// interleave their mixer kinds; "first k dense" FFN layers come first).
absl::StatusOr<SyncModel> BuildSyncModel(const Architecture& arch, const SyncModelOptions& options);

// What `skyrl plan` prints about one weight sync.
struct SyncPlanSummary {
  int senders = 0;
  int receivers = 0;
  std::string sender_layout;    // "megatron TP2 x PP1 x EP8 (x 2 replicas)" / "fsdp 8 shards"
  std::string receiver_layout;  // "4 engines x TP2"
  std::string synced;           // "all weights" / "LoRA adapters only" / "... without MTP, vision"
  int64_t bytes = 0;            // moved in one sync
  int64_t params = 0;           // parameters in the sync model (after the filter)
  double predicted_s = 0;       // the plan's slowest endpoint under the cost model
  double lower_bound_s = 0;     // weight_sync's lower bound for these layouts
  double planning_ms = 0;       // wall time to build the model and plan
  int replicated_for_tp = 0;
};

// What a sync of a capacity plan moves, between which layouts (PlanWeightSync's inputs to the
// planner, and the weight check's, catalog/verify_sync.h).
struct SyncSetup {
  weight_sync::Model model;
  weight_sync::Layout senders, receivers;
  weight_sync::ModelParallel engine;  // each engine's layout (receivers = `engines` of these)
  int engines = 0;
  weight_sync::ParamFilter filter;  // MTP dropped unless enabled, a frozen vision tower, LoRA only
  std::string sender_layout, receiver_layout, synced;  // as SyncPlanSummary says them
  int replicated_for_tp = 0;
};

// The sync of `plan` for `arch`: the plan's own architecture, or a scaled-down one of the same
// structure (catalog/verify_sync.h). InvalidArgument when a layout cannot be expressed.
absl::StatusOr<SyncSetup> MakeSyncSetup(const Plan& plan, const Architecture& arch);

// Plans one weight sync for a finished capacity plan: senders are the trainer's GPUs (first in
// the cluster), receivers the engines (after the trainer, or on the same GPUs when colocated);
// NVLink per direction = half the vendor's bidirectional figure, the NIC per GPU as listed.
// InvalidArgument when a layout cannot be expressed (the message says which).
absl::StatusOr<SyncPlanSummary> PlanWeightSync(const Plan& plan);

}  // namespace skyrl::catalog
