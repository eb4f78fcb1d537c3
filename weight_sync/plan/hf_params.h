// Hugging Face parameter lists: HfParamBuilder, the one builder of weight_sync::Model parameter
// lists named as Hugging Face checkpoints name them, with the Megatron/vLLM sharding facts of
// model.h filled in; and MakeTransformer, small and benchmark-sized transformers (dense, MoE)
// built with it for tests, the benchmark and examples. The catalog's BuildSyncModel
// (catalog/sync_plan.h) builds every architecture of models/*.yaml with the same builder.
//
// Names: embeddings "model.embed_tokens.weight", decoder layers "model.layers.<l>.*"
// ("model.layers.3.self_attn.qkv_proj.weight"), "model.norm.weight", "lm_head.weight"; MTP heads
// are "mtp.<i>.*", the vision tower "visual.*", LoRA adapters "<base>.lora_A.weight" and
// "<base>.lora_B.weight" (what ExcludeNames and LoraOnly filter on).
//
// Plain values; no thread-safety concerns.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "weight_sync/plan/model.h"

namespace skyrl::weight_sync {

// "model.layers.<layer>": the prefix of a decoder layer's parameters.
std::string HfLayerPrefix(int layer);

// Appends parameters to a Model in model order (the order in which a sync moves them). Callers
// compose an architecture from these blocks; the builder owns the conventions every architecture
// shares: names, [out, in] shapes, split dims, LoRA adapters, stacked experts.
class HfParamBuilder {
 public:
  // Every parameter gets `dtype`; `lora_rank` > 0 gives adapters to the linear layers built with
  // lora = true.
  explicit HfParamBuilder(int64_t lora_rank = 0, DType dtype = DType::kBF16) : r_(lora_rank), dtype_(dtype) {}

  // The model built so far; callers set num_layers and num_experts, and may edit or move it.
  Model& model() { return m_; }

  // One parameter as given (see Param for the fields).
  void Add(std::string name, std::vector<int64_t> shape, int split, int layer,
           std::vector<int64_t> fused = {}, std::vector<int64_t> head_rows = {}, int expert = -1);

  // A linear weight "<pre>.weight" [out, in]: column-parallel (split 0, optionally fused, with
  // head rows per block), row-parallel (split 1) or replicated (-1). With `lora` and a rank,
  // adapters follow the base's split: "<pre>.lora_A.weight" [r, in] is split like the base's
  // input (row-parallel) and "<pre>.lora_B.weight" [out, r] like its output (column-parallel).
  //
  // `stack` > 1 stacks that many identical weights (a group of experts) along dim 0, as grouped
  // MoE kernels store them; column-parallel sub-blocks stay separate blocks (each split on its
  // own), row-parallel ones split dim 1 per row, so every rank holds the same bytes as with
  // one tensor per expert.
  void Linear(const std::string& pre, int64_t out, int64_t in, int split, int layer, bool lora,
              std::vector<int64_t> fused = {}, std::vector<int64_t> head_rows = {}, int expert = -1,
              int64_t stack = 1);

  // An MLP "<pre>.*_proj" of `inter` hidden units. Gated (SwiGLU): one fused gate/up weight
  // "gate_up_proj" [gate; up], except with adapters, which LoRA puts on gate and up apart
  // ("gate_proj", "up_proj"); plain: "up_proj". Then the row-parallel "down_proj". `expert` and
  // `stack` as for Linear.
  void Mlp(const std::string& pre, int64_t hidden, int64_t inter, bool gated, int layer, bool lora,
           int expert = -1, int64_t stack = 1);

  // MoE blocks of one layer's "<mlp>" ("model.layers.<l>.mlp"). The router "<mlp>.gate.weight"
  // [experts, hidden], replicated.
  void Router(const std::string& mlp, int64_t experts, int64_t hidden, int layer);
  // `count` dense shared experts "<mlp>.shared_experts.<s>".
  void SharedExperts(const std::string& mlp, int count, int64_t hidden, int64_t inter, bool gated, int layer,
                     bool lora);
  // `experts` routed experts as `groups` MLPs (groups must divide experts), each stacking
  // experts/groups consecutive experts and carrying its group index as the expert index:
  // "<mlp>.experts.<e>" for one expert per group, "<mlp>.experts.<first>-<last>" otherwise.
  void RoutedExperts(const std::string& mlp, int experts, int groups, int64_t hidden, int64_t inter,
                     bool gated, int layer, bool lora);

  // "model.embed_tokens.weight" [vocab, hidden] (first stage) and "lm_head.weight" (last
  // stage), both split by vocabulary rows; "model.norm.weight", the final norm (last stage).
  void Embeddings(int64_t vocab, int64_t hidden);
  void FinalNorm(int64_t hidden);
  void LmHead(int64_t vocab, int64_t hidden);

 private:
  int64_t r_;
  DType dtype_;
  Model m_;
};

struct TransformerConfig {
  int layers = 2;
  int64_t hidden = 64;
  int64_t intermediate = 128;  // dense MLP
  int64_t heads = 4;
  int64_t kv_heads = 2;
  int64_t head_dim = 16;
  int64_t vocab = 256;
  // MoE: layers from first_moe_layer on use `experts` experts of moe_intermediate each, plus
  // `shared_experts` dense experts; 0 experts = dense model.
  int experts = 0;
  int64_t moe_intermediate = 0;
  int shared_experts = 0;
  int first_moe_layer = 0;
  int mtp_layers = 0;     // extra MTP head blocks, "mtp.<i>.*"
  int vision_layers = 0;  // a vision tower, "visual.blocks.<i>.*" (first stage)
  int64_t lora_rank = 0;  // LoRA adapters on qkv and o_proj
  DType dtype = DType::kBF16;
};

// A transformer with one fused QKV weight per layer ([q; k; v] with head rows, as engines hold
// it), gated MLPs and MoE layers of one tensor per expert.
Model MakeTransformer(const TransformerConfig& c);

// Realistic shapes for the benchmark.
TransformerConfig Dense32B();   // Qwen2.5-32B-like
TransformerConfig Moe30BA3B();  // Qwen3-30B-A3B-like
TransformerConfig Moe1T();      // Kimi-K2 / DeepSeek-V3-like, 384 experts (MLA shaped as GQA)

}  // namespace skyrl::weight_sync
