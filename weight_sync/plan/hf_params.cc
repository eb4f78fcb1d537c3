#include "weight_sync/plan/hf_params.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace skyrl::weight_sync {

std::string HfLayerPrefix(int layer) { return absl::StrCat("model.layers.", layer); }

void HfParamBuilder::Add(std::string name, std::vector<int64_t> shape, int split, int layer,
                         std::vector<int64_t> fused, std::vector<int64_t> head_rows, int expert) {
  Param p;
  p.name = std::move(name);
  p.shape = std::move(shape);
  p.dtype = dtype_;
  p.split_dim = split;
  p.fused = std::move(fused);
  p.head_rows = std::move(head_rows);
  p.layer = layer;
  p.expert = expert;
  m_.params.push_back(std::move(p));
}

void HfParamBuilder::Linear(const std::string& pre, int64_t out, int64_t in, int split, int layer, bool lora,
                            std::vector<int64_t> fused, std::vector<int64_t> head_rows, int expert,
                            int64_t stack) {
  if (stack > 1 && split == 0) {
    if (fused.empty()) fused = {out};
    if (head_rows.empty() && !fused.empty()) head_rows.assign(fused.size(), 0);
    std::vector<int64_t> f, hr;
    for (int64_t i = 0; i < stack; ++i) {
      f.insert(f.end(), fused.begin(), fused.end());
      hr.insert(hr.end(), head_rows.begin(), head_rows.end());
    }
    fused = std::move(f);
    head_rows = std::move(hr);
    bool any_heads = false;
    for (int64_t x : head_rows) any_heads |= x > 0;
    if (!any_heads) head_rows.clear();
  }
  Add(pre + ".weight", {stack * out, in}, split, layer, fused, head_rows, expert);
  if (!lora || r_ <= 0) return;
  if (split == 0) {
    Add(pre + ".lora_A.weight", {stack * r_, in}, -1, layer, {}, {}, expert);
    Add(pre + ".lora_B.weight", {stack * out, r_}, 0, layer, std::move(fused), std::move(head_rows), expert);
  } else {
    Add(pre + ".lora_A.weight", {stack * r_, in}, split, layer, {},
        split == 1 ? std::move(head_rows) : std::vector<int64_t>{}, expert);
    Add(pre + ".lora_B.weight", {stack * out, r_}, -1, layer, {}, {}, expert);
  }
}

void HfParamBuilder::Mlp(const std::string& pre, int64_t hidden, int64_t inter, bool gated, int layer,
                         bool lora, int expert, int64_t stack) {
  const int64_t h = hidden;
  if (gated) {
    // One fused gate/up weight; LoRA counts three adapters (gate, up, down), so with adapters
    // gate and up stay separate.
    if (lora && r_ > 0) {
      Linear(pre + ".gate_proj", inter, h, 0, layer, true, {}, {}, expert, stack);
      Linear(pre + ".up_proj", inter, h, 0, layer, true, {}, {}, expert, stack);
    } else {
      Linear(pre + ".gate_up_proj", 2 * inter, h, 0, layer, false, {inter, inter}, {}, expert, stack);
    }
  } else {
    Linear(pre + ".up_proj", inter, h, 0, layer, lora, {}, {}, expert, stack);
  }
  Linear(pre + ".down_proj", h, inter, 1, layer, lora, {}, {}, expert, stack);
}

void HfParamBuilder::Router(const std::string& mlp, int64_t experts, int64_t hidden, int layer) {
  Add(mlp + ".gate.weight", {experts, hidden}, -1, layer);
}

void HfParamBuilder::SharedExperts(const std::string& mlp, int count, int64_t hidden, int64_t inter,
                                   bool gated, int layer, bool lora) {
  for (int s = 0; s < count; ++s)
    Mlp(absl::StrCat(mlp, ".shared_experts.", s), hidden, inter, gated, layer, lora);
}

void HfParamBuilder::RoutedExperts(const std::string& mlp, int experts, int groups, int64_t hidden,
                                   int64_t inter, bool gated, int layer, bool lora) {
  const int per = experts / groups;
  for (int g = 0; g < groups; ++g) {
    std::string pre = per == 1 ? absl::StrCat(mlp, ".experts.", g)
                               : absl::StrCat(mlp, ".experts.", g * per, "-", (g + 1) * per - 1);
    Mlp(pre, hidden, inter, gated, layer, lora, g, per);
  }
}

void HfParamBuilder::Embeddings(int64_t vocab, int64_t hidden) {
  Add("model.embed_tokens.weight", {vocab, hidden}, 0, kPreLayers);
}

void HfParamBuilder::FinalNorm(int64_t hidden) { Add("model.norm.weight", {hidden}, -1, kPostLayers); }

void HfParamBuilder::LmHead(int64_t vocab, int64_t hidden) {
  Add("lm_head.weight", {vocab, hidden}, 0, kPostLayers);
}

Model MakeTransformer(const TransformerConfig& c) {
  HfParamBuilder b(c.lora_rank, c.dtype);
  const int64_t h = c.hidden, hd = c.head_dim, q = c.heads * hd, kv = c.kv_heads * hd;
  for (int i = 0; i < c.vision_layers; ++i) {
    const std::string pre = absl::StrCat("visual.blocks.", i);
    b.Linear(pre + ".attn.qkv", 3 * h, h, 0, kPreLayers, false, {h, h, h});
    b.Linear(pre + ".attn.proj", h, h, 1, kPreLayers, false);
  }
  b.Embeddings(c.vocab, h);
  for (int l = 0; l < c.layers; ++l) {
    const std::string pre = HfLayerPrefix(l);
    b.Add(pre + ".input_layernorm.weight", {h}, -1, l);
    // o_proj carries no head rows (the catalog's does): the fp8 conversion gives it scales of
    // q/32 columns, which a head size would then have to divide.
    b.Linear(pre + ".self_attn.qkv_proj", q + 2 * kv, h, 0, l, true, {q, kv, kv}, {hd, hd, hd});
    b.Linear(pre + ".self_attn.o_proj", h, q, 1, l, true);
    b.Add(pre + ".post_attention_layernorm.weight", {h}, -1, l);
    if (c.experts > 0 && l >= c.first_moe_layer) {
      b.Router(pre + ".mlp", c.experts, h, l);
      b.RoutedExperts(pre + ".mlp", c.experts, c.experts, h, c.moe_intermediate, true, l, false);
      b.SharedExperts(pre + ".mlp", c.shared_experts, h, c.moe_intermediate, true, l, false);
    } else {
      b.Mlp(pre + ".mlp", h, c.intermediate, true, l, false);
    }
  }
  b.FinalNorm(h);
  for (int i = 0; i < c.mtp_layers; ++i) {
    const std::string pre = absl::StrCat("mtp.", i);
    b.Linear(pre + ".eh_proj", h, 2 * h, 1, kPostLayers, false);
    b.Mlp(pre + ".mlp", h, c.intermediate, true, kPostLayers, false);
  }
  b.LmHead(c.vocab, h);
  Model m = std::move(b.model());
  m.num_layers = c.layers;
  m.num_experts = c.experts;
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
