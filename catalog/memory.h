// The memory model: bytes per GPU for the trainer and the generator. Pure functions.
//
// Trainer (per GPU, first pipeline stage, the worst one):
//   full FT   all training state fully sharded over the trainer's GPUs (FSDP2 / ZeRO-3; in
//             Megatron the distributed optimizer with sharded parameters and gradients):
//             bf16 weights 2 B + gradients `grad_bytes` (bf16: 2 B) + Adam 12 B (fp32 master,
//             m, v) per trainable parameter (fp8/mxfp8 recipes and the moments' dtype: see
//             TrainingPrecision), divided by the GPUs holding a shard: dense
//             parameters by TP*PP*DP, experts by EP*PP*expert-DP (expert-DP = TP*DP/EP), so
//             both come to the trainer's GPU count. Plus the all-gathered working set of the
//             two layers in flight (bf16; dense part / TP, experts / EP).
//   LoRA      frozen bf16 base sharded by TP*PP (dense) and EP*PP (experts) in Megatron, by
//             all GPUs in FSDP; adapters of rank r on every linear layer, experts included and
//             sharded with their base, at 18 B each (bf16 weight, fp32 gradient, fp32 Adam
//             master, m and v).
//   frozen vision towers (all but Qwen-3.5) count 2 B/param with no gradient or optimizer.
//   activations: full recomputation: one bf16 checkpoint of h values per token per layer for
//             every layer (1F1B keeps PP micro-batches of L/PP layers on stage 0), plus one
//             layer's working set (34*h bytes per token, Korthikanti et al.) and fp32 logits
//             with their gradient (8*vocab bytes per token); all divided by TP (sequence
//             parallelism). tokens = seq_len * micro_batch.
//   overhead: CUDA context, NCCL buffers: context_gb per process.
// Generator (per GPU of one engine):
//   weights at rollout precision / TP, KV cache for kv_sequences * seq_len tokens (full
//   attention layers only; split by min(TP, KV heads), MLA latents are replicated), a workspace
//   (CUDA graphs, sampler) and a context.
#pragma once

#include <string>

#include "absl/status/statusor.h"

#include "catalog/catalog.h"
#include "catalog/params.h"

namespace skyrl::catalog {

struct Assumptions {
  int64_t seq_len = 16384;        // prompt + response tokens per sequence
  int micro_batch = 1;            // sequences per trainer micro-batch
  int kv_sequences = 64;          // sequences each engine keeps in its KV cache
  double usable_fraction = 0.92;  // of HBM; the rest is fragmentation and allocator slack
  double context_gb = 3;          // CUDA context + NCCL buffers, per process
  double generator_workspace_gb = 2;
  int lora_rank = 32;
  double grad_bytes = 2;    // bf16 gradients
  bool enable_mtp = false;  // trainer.mtp.enabled: MTP layers are trained and served
  // bf16 | fp8 | mxfp8: the full fine-tuning state (see TrainingPrecision); fp8 and mxfp8 only
  // for rows that list them. "" is bf16, except that catalog::MakePlan without a cluster (the
  // row's stated minimum) uses the recipe the row's minimum was read for.
  std::string training_precision;
  // fp32 | bf16 | fp8: the dtype Adam's two moments are stored in, full fine-tuning only (the
  // fp32 master stays). "" is the recipe's own (bf16: fp32; fp8, mxfp8: bf16), except that
  // catalog::MakePlan without a cluster uses the row's reading (UseReferenceRecipe). A value
  // other than the recipe's own needs Megatron-Core's precision-aware optimizer (see
  // OptimizerStateBytes), so the Megatron backend.
  std::string optimizer_state;
  // Allows Megatron-Core's CPU optimizer offload for full fine-tuning (--optimizer-cpu-offload
  // --optimizer-offload-fraction F, see kHybridOptimizerBytes). The planner uses it only when
  // the trainer does not fit the GPUs without it, with the smallest fraction F (a multiple of
  // 1/kOffloadFractionSteps) that fits, and only if the nodes' host memory holds the offloaded part. Off by
  // default: applied automatically it would plan rows below their stated minimum (docs/catalog.md).
  bool optimizer_offload = false;
};

// Megatron-Core's HybridDeviceOptimizer (megatron/core/optimizer/cpu_offloading), which
// --optimizer-cpu-offload installs, steps every parameter it owns in fp32 whatever the training
// recipe: an fp32 master copy (param_update_in_fp32), torch Adam's moments in the master's
// dtype (fp32 m and v: its CPU optimizer takes no moment dtype, so the recipes' bf16 moments do
// not apply) and an fp32 copy of the gradient it steps on (on the host a pinned staging buffer,
// pin_cpu_grads; on the GPU the bf16 gradient cast to fp32). 4 + 8 + 4 B per parameter, on the
// host for the offloaded fraction and on the GPU for the rest; it replaces the recipe's
// optimizer state. The weights and the bf16 gradients stay on the GPU.
inline constexpr double kHybridOptimizerBytes = 16;
// Offload fractions are searched in steps of 1/kOffloadFractionSteps (Megatron takes any
// fraction; 5% steps keep the printed flag readable).
inline constexpr int kOffloadFractionSteps = 20;

// Bytes per trainable parameter of the sharded full fine-tuning state. One recipe per name,
// the same for every row (docs/catalog.md, "Low-precision training"):
//   bf16   bf16 weights 2 + gradients `grad_bytes` + Adam 12 (fp32 master, m, v).
//   fp8    Megatron-Core FP8 training with FP8 parameters (--fp8-param-gather: the bf16 copy is
//          dropped; the FP8 weight and the transpose its GEMMs use, 1 B each) and the
//          precision-aware optimizer keeping Adam's moments in bf16 over an fp32 master
//          (--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16, the
//          storage DeepSeek-V3 reports for its FP8 training, section 3.3.3): 2 + grads + 8.
//   mxfp8  the same on Blackwell with MXFP8 parameters: rowwise and columnwise copies, each
//          1 B plus one E8M0 scale byte per 32 elements (2.0625 B) + grads + 8.
// The moments' dtype (`optimizer_state`) is a separate choice (Assumptions::optimizer_state,
// WithOptimizerState); the optimizer then holds kMasterBytes + 2 x OptimizerStateBytes.
struct TrainingPrecision {
  std::string name = "bf16";
  double weight_bytes = 2;
  double optimizer_bytes = 12;
  std::string optimizer_state = "fp32";  // Adam's m and v
  // Weights + gradients + optimizer per trainable parameter.
  double BytesPerParam(double grad_bytes) const { return weight_bytes + grad_bytes + optimizer_bytes; }
};
// The fp32 master copy every recipe keeps (Megatron's --main-params-dtype fp32, the default;
// its 16-bit parameter remainders for bf16 parameters are not modelled: see docs/catalog.md).
inline constexpr double kMasterBytes = 4;
// Bytes of one Adam moment stored as `state`, as Megatron-Core's precision-aware optimizer
// (--use-precision-aware-optimizer --exp-avg-dtype / --exp-avg-sq-dtype, Transformer Engine's
// FusedAdam) stores it: fp32 4, bf16 2, fp8 1 (E4M3 with one fp32 scale per tensor, not
// counted); 0 for an unknown name. (Megatron also offers fp16, 2 B like bf16; not a catalog
// choice.)
double OptimizerStateBytes(absl::string_view state);
// The recipe for `name` when the row lists it (bf16 always). InvalidArgument otherwise, naming
// --training-precision and what the row offers.
absl::StatusOr<TrainingPrecision> ChooseTrainingPrecision(const Row& row, const std::string& name);
// `recipe` with Adam's moments stored as `state` ("" keeps the recipe's own). InvalidArgument
// naming --optimizer-state for an unknown value.
absl::StatusOr<TrainingPrecision> WithOptimizerState(TrainingPrecision recipe, const std::string& state);
// Both of the above from a.training_precision and a.optimizer_state.
absl::StatusOr<TrainingPrecision> ChooseTrainingRecipe(const Row& row, const Assumptions& a);

struct MemoryBreakdown {
  double weights = 0;
  double gradients = 0;
  double optimizer = 0;
  double adapters = 0;
  double gathered = 0;  // ZeRO-3 all-gathered layers in flight
  double activations = 0;
  double kv_cache = 0;
  double overhead = 0;
  double host = 0;              // bytes per GPU held in host memory (offloaded optimizer); not in total()
  double offloaded_params = 0;  // parameters per GPU whose optimizer runs on the host
  double total() const {
    return weights + gradients + optimizer + adapters + gathered + activations + kv_cache + overhead;
  }
};

struct TrainerShape {
  std::string backend;  // fsdp | megatron
  int gpus = 1;
  int tp = 1, pp = 1, ep = 1, dp = 1;
  // Full fine-tuning: of the trainable parameters, the fraction whose optimizer runs in host
  // memory (Megatron's --optimizer-offload-fraction); 0 = no CPU optimizer at all.
  double offload_fraction = 0;
};

// Full fine-tuning uses `recipe` (ChooseTrainingRecipe's answer for `a`: resolve it once, not
// per layout); with s.offload_fraction > 0 the optimizer is the HybridDeviceOptimizer
// (kHybridOptimizerBytes) split between the GPU and `host`. LoRA keeps a bf16 base and is never
// offloaded (it ignores `recipe`).
MemoryBreakdown TrainerMemory(const ModelEntry& m, const Row& row, Mode mode, const TrainerShape& s,
                              const Assumptions& a, const TrainingPrecision& recipe);
// The same, resolving the recipe from a.training_precision and a.optimizer_state (bf16 with fp32
// moments when they are not valid: callers validate with ChooseTrainingRecipe first).
MemoryBreakdown TrainerMemory(const ModelEntry& m, const Row& row, Mode mode, const TrainerShape& s,
                              const Assumptions& a);

struct RolloutPrecision {
  std::string name;  // bf16 | fp8 | int4 | mxfp4
  double bytes_per_param = 2;
};
// The lowest precision the row supports for rollouts (the release precision for INT4/MXFP4
// checkpoints), or `requested` when it is one the row supports. InvalidArgument otherwise.
absl::StatusOr<RolloutPrecision> ChooseRolloutPrecision(const Row& row, const std::string& requested);

MemoryBreakdown GeneratorMemory(const ModelEntry& m, int tp, const RolloutPrecision& p, const Assumptions& a);

// Megatron for MoE and for models over 40B when the row offers it, else the row's first.
std::string DefaultBackend(const Row& row, const ModelEntry& m);

}  // namespace skyrl::catalog
