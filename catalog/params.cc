#include "catalog/params.h"

#include <algorithm>

namespace skyrl::catalog {
namespace {

double AttentionParams(const Attention& at, double h) {
  if (at.kind == AttentionKind::kGqa) {
    double q = static_cast<double>(at.heads) * at.head_dim;
    double kv = static_cast<double>(at.kv_heads) * at.head_dim;
    double p = h * q + 2 * h * kv + q * h;
    if (at.qkv_bias) p += q + 2 * kv;
    return p + h;
  }
  double H = at.heads, nope = at.qk_nope_dim, rope = at.qk_rope_dim, v = at.v_head_dim;
  double ql = at.q_lora_rank, kvl = at.kv_lora_rank;
  double q = ql > 0 ? h * ql + ql + ql * H * (nope + rope) : h * H * (nope + rope);
  double kv = h * (kvl + rope) + kvl + kvl * H * (nope + v);
  return q + kv + H * v * h + h;
}

double LinearParams(const LinearAttention& l, double h) {
  double qk = static_cast<double>(l.qk_heads) * l.head_dim;
  double v = static_cast<double>(l.v_heads) * l.head_dim;
  // q, k, v and output gate projections, per-head decay/beta, output, short conv, norm.
  return h * (2 * qk + 2 * v + 2.0 * l.v_heads) + v * h + (2 * qk + v) * 4 + h;
}

double MambaParams(const Mamba& m, double h) {
  double di = m.d_inner, gs = static_cast<double>(m.groups) * m.state, nh = m.heads;
  // in_proj (x, z, B, C, dt), conv1d, out_proj, A/D/dt_bias, inner and block norms.
  return h * (2 * di + 2 * gs + nh) + (di + 2 * gs) * 4 + di * h + 3 * nh + di + h;
}

double FfnParams(const DenseFfn& f, double h) {
  return (f.gated ? 3.0 : 2.0) * h * static_cast<double>(f.size) + h;
}

double ExpertParams(const Moe& m, double h) {
  return (m.gated ? 3.0 : 2.0) * h * static_cast<double>(m.expert_size);
}

double MoeDensePart(const Moe& m, double h) {
  double shared = static_cast<double>(m.shared_size > 0 ? m.shared_size : m.expert_size);
  return m.shared_experts * (m.gated ? 3.0 : 2.0) * h * shared + h * m.experts + h;
}

double VisionParams(const Vision& v) {
  if (v.layers == 0) return 0;
  double hv = v.hidden;
  double blocks = v.layers * (4 * hv * hv + 2 * hv * v.ffn + 4 * hv);
  double merger = (4 * hv) * (4 * hv) + (4 * hv) * v.out_hidden;  // 2x2 patch merger MLP
  return blocks + merger;
}

}  // namespace

ParamCounts CountParams(const Architecture& a) {
  ParamCounts c;
  double h = static_cast<double>(a.hidden);
  c.embeddings = static_cast<double>(a.vocab) * h * (a.tied_embeddings ? 1 : 2);
  c.dense = c.embeddings + h;  // + final norm
  if (a.attention.layers > 0) c.dense += a.attention.layers * AttentionParams(a.attention, h);
  if (a.linear_attention.layers > 0)
    c.dense += a.linear_attention.layers * LinearParams(a.linear_attention, h);
  if (a.mamba.layers > 0) c.dense += a.mamba.layers * MambaParams(a.mamba, h);
  if (a.ffn.layers > 0) c.dense += a.ffn.layers * FfnParams(a.ffn, h);
  if (a.moe.layers > 0) {
    c.dense += a.moe.layers * MoeDensePart(a.moe, h);
    c.experts = static_cast<double>(a.moe.layers) * a.moe.experts * ExpertParams(a.moe, h);
    c.active_experts = static_cast<double>(a.moe.layers) * a.moe.active * ExpertParams(a.moe, h);
  }
  if (a.mtp_layers > 0) {
    double per = 2 * h * h + 2 * h;
    if (a.attention.layers > 0) per += AttentionParams(a.attention, h);
    if (a.moe.layers > 0)
      per += MoeDensePart(a.moe, h) + a.moe.experts * ExpertParams(a.moe, h);
    else if (a.ffn.layers > 0)
      per += FfnParams(a.ffn, h);
    c.mtp = a.mtp_layers * per;
  }
  c.vision = VisionParams(a.vision);
  return c;
}

double ComparableTotal(const ModelEntry& m, const ParamCounts& c) {
  return c.total() + (m.convention.total_includes_mtp ? c.mtp : 0);
}

double ComparableActive(const ModelEntry& m, const ParamCounts& c) {
  double input_embedding = static_cast<double>(m.arch.vocab) * m.arch.hidden;
  switch (m.convention.active_excludes) {
    case CountConvention::ActiveExcludes::kNone:
      return c.active();
    case CountConvention::ActiveExcludes::kInputEmbedding:
      return c.active() - input_embedding;
    case CountConvention::ActiveExcludes::kEmbeddings:
      return c.active() - c.embeddings;
  }
  return c.active();
}

LoraCounts LoraParams(const Architecture& a, int rank) {
  double h = static_cast<double>(a.hidden), r = rank, p = 0;
  LoraCounts out;
  const Attention& at = a.attention;
  if (at.layers > 0) {
    double q = at.kind == AttentionKind::kGqa
                   ? static_cast<double>(at.heads) * at.head_dim
                   : static_cast<double>(at.heads) * (at.qk_nope_dim + at.qk_rope_dim);
    double kv =
        at.kind == AttentionKind::kGqa ? 2.0 * at.kv_heads * at.head_dim : at.kv_lora_rank + at.qk_rope_dim;
    // The output projection's input: all heads' values.
    double o = at.kind == AttentionKind::kGqa ? q : static_cast<double>(at.heads) * at.v_head_dim;
    // q, kv and output projections: r * (in + out) each.
    p += at.layers * r * ((h + q) + (h + kv) + (o + h));
  }
  if (a.linear_attention.layers > 0) {
    double v = static_cast<double>(a.linear_attention.v_heads) * a.linear_attention.head_dim;
    p += a.linear_attention.layers * r * (2 * (h + v) + (v + h));
  }
  if (a.mamba.layers > 0) p += a.mamba.layers * r * (2 * (h + a.mamba.d_inner) + (a.mamba.d_inner + h));
  if (a.ffn.layers > 0) p += a.ffn.layers * r * (a.ffn.gated ? 3 : 2) * (h + static_cast<double>(a.ffn.size));
  if (a.moe.layers > 0) {
    double per_expert = r * (a.moe.gated ? 3 : 2) * (h + static_cast<double>(a.moe.expert_size));
    double shared = static_cast<double>(a.moe.shared_size > 0 ? a.moe.shared_size : a.moe.expert_size);
    p += static_cast<double>(a.moe.layers) * a.moe.shared_experts * r * (a.moe.gated ? 3 : 2) * (h + shared);
    out.experts = static_cast<double>(a.moe.layers) * a.moe.experts * per_expert;
  }
  out.dense = p;
  return out;
}

int MixerLayers(const Architecture& a) {
  return a.attention.layers + a.linear_attention.layers + a.mamba.layers;
}

double KvBytesPerToken(const Architecture& a) {
  const Attention& at = a.attention;
  if (at.layers == 0) return 0;
  if (at.kind == AttentionKind::kGqa) return 2.0 * at.layers * at.kv_heads * at.head_dim * 2;
  return static_cast<double>(at.kv_lora_rank + at.qk_rope_dim) * at.layers * 2;
}

int KvShards(const Architecture& a) {
  if (a.attention.layers == 0) return 1;
  // MLA engines run data-parallel attention: each rank keeps the latents of its own sequences.
  if (a.attention.kind == AttentionKind::kMla) return 1 << 20;
  return std::max(1, a.attention.kv_heads);
}

double LargestLayerParams(const Architecture& a) {
  double h = static_cast<double>(a.hidden), mixer = 0, ffn = 0;
  if (a.attention.layers > 0) mixer = std::max(mixer, AttentionParams(a.attention, h));
  if (a.linear_attention.layers > 0) mixer = std::max(mixer, LinearParams(a.linear_attention, h));
  if (a.mamba.layers > 0) mixer = std::max(mixer, MambaParams(a.mamba, h));
  if (a.ffn.layers > 0) ffn = std::max(ffn, FfnParams(a.ffn, h));
  if (a.moe.layers > 0) ffn = std::max(ffn, MoeDensePart(a.moe, h) + a.moe.experts * ExpertParams(a.moe, h));
  return mixer + ffn;
}

}  // namespace skyrl::catalog
