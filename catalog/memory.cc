#include "catalog/memory.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace skyrl::catalog {
namespace {
constexpr double kGB = 1e9;

bool Has(const std::vector<std::string>& v, absl::string_view x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}
}  // namespace

MemoryBreakdown TrainerMemory(const ModelEntry& m, const Row& row, Mode mode, const TrainerShape& s,
                              const Assumptions& a) {
  absl::StatusOr<TrainingPrecision> recipe = ChooseTrainingRecipe(row, a);
  return TrainerMemory(m, row, mode, s, a, recipe.ok() ? *recipe : TrainingPrecision{});
}

MemoryBreakdown TrainerMemory(const ModelEntry& m, const Row& row, Mode mode, const TrainerShape& s,
                              const Assumptions& a, const TrainingPrecision& recipe) {
  const Architecture& arch = m.arch;
  ParamCounts c = CountParams(arch);
  double vision_frozen = row.vision_trainable ? 0 : c.vision;
  double dense = c.dense + (c.vision - vision_frozen) + (a.enable_mtp ? c.mtp : 0);
  double experts = c.experts;
  double layer_experts = arch.moe.layers > 0 ? experts / arch.moe.layers : 0;
  double layer_dense = LargestLayerParams(arch) - layer_experts;
  double h = static_cast<double>(arch.hidden);
  double tokens = static_cast<double>(a.seq_len) * a.micro_batch;

  MemoryBreakdown b;
  const bool fsdp = s.backend == "fsdp";
  const int tp = fsdp ? 1 : s.tp, pp = fsdp ? 1 : s.pp, ep = fsdp ? 1 : s.ep;
  const int dp = fsdp ? s.gpus : s.dp;
  const double edp = static_cast<double>(tp) * dp / ep;
  if (mode == Mode::kFull) {
    // Fully sharded state: each GPU holds 1/(TP*PP*DP) of the dense and 1/(EP*PP*EDP) of the
    // experts.
    double shard =
        dense / (static_cast<double>(tp) * pp * dp) + experts / (static_cast<double>(ep) * pp * edp);
    b.weights = recipe.weight_bytes * shard;
    b.gradients = a.grad_bytes * shard;
    b.optimizer = recipe.optimizer_bytes * shard;
    if (s.offload_fraction > 0) {
      const double f = std::min(1.0, s.offload_fraction);
      b.optimizer = kHybridOptimizerBytes * (1 - f) * shard;
      b.host = kHybridOptimizerBytes * f * shard;
      b.offloaded_params = f * shard;
    }
    b.weights += 2 * vision_frozen / (fsdp ? s.gpus : tp * pp);
    b.gathered = 2 * 2 * (layer_dense / tp + layer_experts / ep);
  } else {
    if (fsdp) {
      b.weights = 2 * (dense + experts + vision_frozen) / s.gpus;
      b.gathered = 2 * 2 * (layer_dense + layer_experts);
    } else {
      b.weights =
          2 * (dense / (tp * pp) + experts / (static_cast<double>(ep) * pp) + vision_frozen / (tp * pp));
    }
    LoraCounts lora = LoraParams(arch, a.lora_rank);
    b.adapters = fsdp ? 18 * (lora.dense + lora.experts) / s.gpus
                      : 18 * (lora.dense / (tp * pp) + lora.experts / (static_cast<double>(ep) * pp));
  }
  double layers = MixerLayers(arch);
  b.activations = tokens * (layers * 2 * h + 34 * h) / tp + tokens * static_cast<double>(arch.vocab) * 8 / tp;
  b.overhead = a.context_gb * kGB;
  return b;
}

double OptimizerStateBytes(absl::string_view state) {
  if (state == "fp32") return 4;
  if (state == "bf16") return 2;
  if (state == "fp8") return 1;
  return 0;
}

absl::StatusOr<TrainingPrecision> ChooseTrainingPrecision(const Row& row, const std::string& name) {
  if (name.empty() || name == "bf16") return TrainingPrecision{};
  // fp32 master 4 B + bf16 first and second moments 2 B each.
  constexpr double kOptimizer = kMasterBytes + 2 + 2;
  if (name == "fp8" && Has(row.low_precision, "fp8"))
    return TrainingPrecision{"fp8", 2 * 1.0, kOptimizer, "bf16"};
  if (name == "mxfp8" && Has(row.low_precision, "mxfp8"))
    return TrainingPrecision{"mxfp8", 2 * (1 + 1.0 / 32), kOptimizer, "bf16"};
  std::vector<std::string> offered = {"bf16"};
  for (const char* n : {"fp8", "mxfp8"})
    if (Has(row.low_precision, n)) offered.push_back(n);
  return absl::InvalidArgumentError(absl::StrCat("--training-precision: ", row.family, " supports ",
                                                 absl::StrJoin(offered, ", "), " training, not \"", name,
                                                 "\""));
}

absl::StatusOr<TrainingPrecision> WithOptimizerState(TrainingPrecision recipe, const std::string& state) {
  if (state.empty()) return recipe;
  double bytes = OptimizerStateBytes(state);
  if (bytes <= 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "--optimizer-state: Adam's moments are stored as fp32, bf16 or fp8, not \"", state, "\""));
  recipe.optimizer_state = state;
  recipe.optimizer_bytes = kMasterBytes + 2 * bytes;
  return recipe;
}

absl::StatusOr<TrainingPrecision> ChooseTrainingRecipe(const Row& row, const Assumptions& a) {
  absl::StatusOr<TrainingPrecision> recipe = ChooseTrainingPrecision(row, a.training_precision);
  if (!recipe.ok()) return recipe.status();
  return WithOptimizerState(*recipe, a.optimizer_state);
}

absl::StatusOr<RolloutPrecision> ChooseRolloutPrecision(const Row& row, const std::string& requested) {
  std::vector<RolloutPrecision> offered;
  if (row.release_precision == "int4" || Has(row.low_precision, "int4_qat")) offered.push_back({"int4", 0.5});
  if (row.release_precision == "mxfp4") offered.push_back({"mxfp4", 4.25 / 8});  // 4-bit + a scale per 32
  if (Has(row.low_precision, "fp8") || Has(row.low_precision, "mxfp8") ||
      Has(row.low_precision, "fp8_rollout"))
    offered.push_back({"fp8", 1.0});
  offered.push_back({"bf16", 2.0});
  if (requested.empty()) return offered.front();
  std::vector<std::string> names;
  for (const RolloutPrecision& p : offered) {
    if (p.name == requested) return p;
    names.push_back(p.name);
  }
  return absl::InvalidArgumentError(absl::StrCat("--rollout-precision: ", row.family, " supports ",
                                                 absl::StrJoin(names, ", "), " rollouts, not \"", requested,
                                                 "\""));
}

MemoryBreakdown GeneratorMemory(const ModelEntry& m, int tp, const RolloutPrecision& p,
                                const Assumptions& a) {
  ParamCounts c = CountParams(m.arch);
  MemoryBreakdown b;
  b.weights = (c.total() + (a.enable_mtp ? c.mtp : 0)) * p.bytes_per_param / tp;
  double tokens = static_cast<double>(a.kv_sequences) * a.seq_len;
  b.kv_cache = tokens * KvBytesPerToken(m.arch) / std::min(tp, KvShards(m.arch));
  b.activations = a.generator_workspace_gb * kGB;
  b.overhead = a.context_gb * kGB;
  return b;
}

std::string DefaultBackend(const Row& row, const ModelEntry& m) {
  bool megatron = Has(row.backends, "megatron"), fsdp = Has(row.backends, "fsdp");
  if (megatron && (!fsdp || m.arch.moe.layers > 0 || CountParams(m.arch).total() > 40e9)) return "megatron";
  return row.backends.front();
}

}  // namespace skyrl::catalog
