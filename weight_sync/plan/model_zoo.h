// Builders for transformer-shaped models (dense and MoE) with Megatron/vLLM sharding facts
// filled in; used by tests, the benchmark and examples. Parameter names follow Hugging Face
// ("model.layers.3.self_attn.qkv_proj.weight"); MTP heads are "mtp.*", LoRA adapters contain
// "lora_A"/"lora_B", the vision tower is "visual.*".
#pragma once

#include <string>

#include "weight_sync/plan/model.h"

namespace skyrl::weight_sync {

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
  int mtp_layers = 0;         // extra MTP head blocks, "mtp.<i>.*"
  int vision_layers = 0;      // a vision tower, "visual.blocks.<i>.*" (first stage)
  int64_t lora_rank = 0;      // LoRA adapters on qkv and o_proj
  DType dtype = DType::kBF16;
};

Model MakeTransformer(const TransformerConfig& c);

// Realistic shapes for the benchmark.
TransformerConfig Dense32B();     // Qwen2.5-32B-like
TransformerConfig Moe30BA3B();    // Qwen3-30B-A3B-like
TransformerConfig Moe1T();        // Kimi-K2 / DeepSeek-V3-like, 384 experts (MLA shaped as GQA)

}  // namespace skyrl::weight_sync
