#include "weight_sync/plan/model_zoo.h"

#include "absl/strings/str_cat.h"

namespace skyrl::weight_sync {
namespace {

Param P(std::string name, std::vector<int64_t> shape, DType dt, int split, int layer,
        std::vector<int64_t> fused = {}, int expert = -1) {
  Param p;
  p.name = std::move(name);
  p.shape = std::move(shape);
  p.dtype = dt;
  p.split_dim = split;
  p.fused = std::move(fused);
  p.layer = layer;
  p.expert = expert;
  return p;
}

void AddMlp(Model& m, const std::string& pre, int64_t h, int64_t inter, DType dt, int layer,
            int expert = -1) {
  m.params.push_back(P(pre + ".gate_up_proj.weight", {2 * inter, h}, dt, 0, layer, {inter, inter}, expert));
  m.params.push_back(P(pre + ".down_proj.weight", {h, inter}, dt, 1, layer, {}, expert));
}

}  // namespace

Model MakeTransformer(const TransformerConfig& c) {
  Model m;
  m.num_layers = c.layers;
  m.num_experts = c.experts;
  const DType dt = c.dtype;
  const int64_t h = c.hidden, q = c.heads * c.head_dim, kv = c.kv_heads * c.head_dim;
  for (int i = 0; i < c.vision_layers; ++i) {
    std::string pre = absl::StrCat("visual.blocks.", i);
    m.params.push_back(P(pre + ".attn.qkv.weight", {3 * h, h}, dt, 0, kPreLayers, {h, h, h}));
    m.params.push_back(P(pre + ".attn.proj.weight", {h, h}, dt, 1, kPreLayers));
  }
  m.params.push_back(P("model.embed_tokens.weight", {c.vocab, h}, dt, 0, kPreLayers));
  for (int l = 0; l < c.layers; ++l) {
    std::string pre = absl::StrCat("model.layers.", l);
    m.params.push_back(P(pre + ".input_layernorm.weight", {h}, dt, -1, l));
    m.params.push_back(P(pre + ".self_attn.qkv_proj.weight", {q + 2 * kv, h}, dt, 0, l, {q, kv, kv}));
    m.params.back().head_rows = {c.head_dim, c.head_dim, c.head_dim};
    m.params.push_back(P(pre + ".self_attn.o_proj.weight", {h, q}, dt, 1, l));
    if (c.lora_rank > 0) {
      m.params.push_back(P(pre + ".self_attn.qkv_proj.lora_A.weight", {c.lora_rank, h}, dt, -1, l));
      m.params.push_back(P(pre + ".self_attn.qkv_proj.lora_B.weight", {q + 2 * kv, c.lora_rank}, dt, 0, l,
                           {q, kv, kv}));
      m.params.push_back(P(pre + ".self_attn.o_proj.lora_A.weight", {c.lora_rank, q}, dt, 1, l));
      m.params.push_back(P(pre + ".self_attn.o_proj.lora_B.weight", {h, c.lora_rank}, dt, -1, l));
    }
    m.params.push_back(P(pre + ".post_attention_layernorm.weight", {h}, dt, -1, l));
    if (c.experts > 0 && l >= c.first_moe_layer) {
      m.params.push_back(P(pre + ".mlp.gate.weight", {c.experts, h}, dt, -1, l));
      for (int e = 0; e < c.experts; ++e)
        AddMlp(m, absl::StrCat(pre, ".mlp.experts.", e), h, c.moe_intermediate, dt, l, e);
      for (int s = 0; s < c.shared_experts; ++s)
        AddMlp(m, absl::StrCat(pre, ".mlp.shared_experts.", s), h, c.moe_intermediate, dt, l);
    } else {
      AddMlp(m, pre + ".mlp", h, c.intermediate, dt, l);
    }
  }
  m.params.push_back(P("model.norm.weight", {h}, dt, -1, kPostLayers));
  for (int i = 0; i < c.mtp_layers; ++i) {
    std::string pre = absl::StrCat("mtp.", i);
    m.params.push_back(P(pre + ".eh_proj.weight", {h, 2 * h}, dt, 1, kPostLayers));
    AddMlp(m, pre + ".mlp", h, c.intermediate, dt, kPostLayers);
  }
  m.params.push_back(P("lm_head.weight", {c.vocab, h}, dt, 0, kPostLayers));
  return m;
}

TransformerConfig Dense32B() {
  TransformerConfig c;
  c.layers = 64;
  c.hidden = 5120;
  c.intermediate = 27648;
  c.heads = 40;
  c.kv_heads = 8;
  c.head_dim = 128;
  c.vocab = 152064;
  return c;
}

TransformerConfig Moe30BA3B() {
  TransformerConfig c;
  c.layers = 48;
  c.hidden = 2048;
  c.intermediate = 6144;
  c.heads = 32;
  c.kv_heads = 4;
  c.head_dim = 128;
  c.vocab = 151936;
  c.experts = 128;
  c.moe_intermediate = 768;
  return c;
}

TransformerConfig Moe1T() {
  TransformerConfig c;
  c.layers = 61;
  c.hidden = 7168;
  c.intermediate = 18432;
  c.heads = 64;
  c.kv_heads = 64;
  c.head_dim = 128;
  c.vocab = 163840;
  c.experts = 384;
  c.moe_intermediate = 2048;
  c.shared_experts = 1;
  c.first_moe_layer = 1;
  c.mtp_layers = 1;
  return c;
}

}  // namespace skyrl::weight_sync
