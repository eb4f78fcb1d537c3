#include "rl/policy/config.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace skyrl::rl {

absl::Status ValidatePolicyConfig(const PolicyConfig& c) {
  auto positive = [](const char* field, int64_t v) -> absl::Status {
    if (v <= 0) return absl::InvalidArgumentError(absl::StrCat("model.", field, ": must be > 0, got ", v));
    return absl::OkStatus();
  };
  for (auto [f, v] : {std::pair<const char*, int64_t>{"vocab", c.vocab},
                      {"layers", c.layers},
                      {"d_model", c.d_model},
                      {"heads", c.heads},
                      {"max_len", c.max_len}}) {
    if (auto s = positive(f, v); !s.ok()) return s;
  }
  if (c.mlp_hidden < 0)
    return absl::InvalidArgumentError(absl::StrCat("model.mlp_hidden: must be >= 0, got ", c.mlp_hidden));
  if (c.d_model % c.heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.heads: ", c.heads, " does not divide d_model ", c.d_model));
  }
  if (!(c.init_std > 0) || !std::isfinite(c.init_std)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.init_std: must be a positive number, got ", c.init_std));
  }
  return absl::OkStatus();
}

absl::Status ValidateTensorParallel(const PolicyConfig& c, int tp, absl::string_view field) {
  if (auto s = ValidatePolicyConfig(c); !s.ok()) return s;
  if (tp <= 0) return absl::InvalidArgumentError(absl::StrCat(field, ": must be > 0, got ", tp));
  if (c.heads % tp != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", tp, " does not divide model.heads ", c.heads));
  }
  if (c.MlpHidden() % tp != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", tp, " does not divide the MLP intermediate size ", c.MlpHidden()));
  }
  return absl::OkStatus();
}

std::vector<ParamSpec> PolicyParamSpecs(const PolicyConfig& c) {
  const int64_t d = c.d_model, v = c.vocab, f = c.MlpHidden();
  // GPT-2 style: residual-branch outputs start smaller so the residual stream stays O(1).
  const double out_std = c.init_std / std::sqrt(2.0 * c.layers);
  std::vector<ParamSpec> out;
  out.push_back({"model.embed_tokens.weight", {v, d}, -1, {}, -1, c.init_std});
  out.push_back({"model.embed_positions.weight", {c.max_len, d}, -1, {}, -1, c.init_std});
  for (int l = 0; l < c.layers; ++l) {
    std::string pre = absl::StrCat("model.layers.", l);
    out.push_back({pre + ".input_layernorm.weight", {d}, -1, {}, l, 0.0});
    out.push_back({pre + ".self_attn.qkv_proj.weight", {3 * d, d}, 0, {d, d, d}, l, c.init_std});
    out.push_back({pre + ".self_attn.o_proj.weight", {d, d}, 1, {}, l, out_std});
    out.push_back({pre + ".post_attention_layernorm.weight", {d}, -1, {}, l, 0.0});
    out.push_back({pre + ".mlp.gate_up_proj.weight", {2 * f, d}, 0, {f, f}, l, c.init_std});
    out.push_back({pre + ".mlp.down_proj.weight", {d, f}, 1, {}, l, out_std});
  }
  out.push_back({"model.norm.weight", {d}, -1, {}, -2, 0.0});
  out.push_back({"lm_head.weight", {v, d}, -1, {}, -2, c.init_std});
  return out;
}

std::vector<int64_t> ShardShape(const ParamSpec& p, int tp) {
  std::vector<int64_t> s = p.shape;
  if (p.split_dim >= 0) s[p.split_dim] /= tp;
  return s;
}

}  // namespace skyrl::rl
