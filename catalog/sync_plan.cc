#include "catalog/sync_plan.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "catalog/capacity_planner.h"
#include "weight_sync/plan/hf_params.h"
#include "weight_sync/plan/transfer_planner.h"

namespace skyrl::catalog {
namespace {

namespace ws = weight_sync;

// The architecture's blocks, in model order, with weight_sync's Hugging Face parameter builder
// (weight_sync/plan/hf_params.h). `lora` marks the linear layers that get adapters: mixers and
// FFNs, experts included; not embeddings, routers, LM head, MTP, vision.
void AddAttention(ws::HfParamBuilder& b, const std::string& pre, const Attention& at, int64_t h, int layer,
                  bool lora) {
  b.Add(pre + ".input_layernorm.weight", {h}, -1, layer);
  const std::string a = pre + ".self_attn";
  if (at.kind == AttentionKind::kGqa) {
    const int64_t hd = at.head_dim, q = at.heads * hd, kv = at.kv_heads * hd;
    // LoRA is counted on separate q and kv projections (catalog::LoraParams), so they are kept
    // apart here; the base weights are what engines fuse, and the sync moves them the same.
    b.Linear(a + ".q_proj", q, h, 0, layer, lora, {}, {hd});
    b.Linear(a + ".kv_proj", 2 * kv, h, 0, layer, lora, {kv, kv}, {hd, hd});
    if (at.qkv_bias) b.Add(a + ".qkv_proj.bias", {q + 2 * kv}, 0, layer, {q, kv, kv}, {hd, hd, hd});
    b.Linear(a + ".o_proj", h, q, 1, layer, lora, {}, {hd});
    return;
  }
  const int64_t H = at.heads, qk = at.qk_nope_dim + at.qk_rope_dim, v = at.v_head_dim;
  const int64_t ql = at.q_lora_rank, kvl = at.kv_lora_rank, rope = at.qk_rope_dim;
  if (ql > 0) {
    b.Linear(a + ".q_a_proj", ql, h, -1, layer, false);
    b.Add(a + ".q_a_layernorm.weight", {ql}, -1, layer);
    b.Linear(a + ".q_b_proj", H * qk, ql, 0, layer, false, {}, {qk});
  } else {
    b.Linear(a + ".q_proj", H * qk, h, 0, layer, false, {}, {qk});
  }
  b.Linear(a + ".kv_a_proj_with_mqa", kvl + rope, h, -1, layer, false);
  b.Add(a + ".kv_a_layernorm.weight", {kvl}, -1, layer);
  b.Linear(a + ".kv_b_proj", H * (at.qk_nope_dim + v), kvl, 0, layer, false, {}, {at.qk_nope_dim + v});
  b.Linear(a + ".o_proj", h, H * v, 1, layer, lora, {}, {v});
}

// The adapters MLA gets besides o_proj's, as catalog::LoraParams counts them: q (h -> H*qk,
// split by heads) and kv (h -> kvl + rope, replicated), one rank-r pair each over the
// low-rank query and key/value paths.
void AddMlaLora(ws::HfParamBuilder& b, const std::string& pre, const Attention& at, int64_t h, int layer,
                int64_t r) {
  const int64_t H = at.heads, qk = at.qk_nope_dim + at.qk_rope_dim;
  const std::string a = pre + ".self_attn";
  b.Add(a + ".q.lora_A.weight", {r, h}, -1, layer);
  b.Add(a + ".q.lora_B.weight", {H * qk, r}, 0, layer, {}, {qk});
  b.Add(a + ".kv.lora_A.weight", {r, h}, -1, layer);
  b.Add(a + ".kv.lora_B.weight", {at.kv_lora_rank + at.qk_rope_dim, r}, -1, layer);
}

void AddLinearAttention(ws::HfParamBuilder& b, const std::string& pre, const LinearAttention& l, int64_t h,
                        int layer, bool lora) {
  const int64_t hd = l.head_dim, qk = l.qk_heads * hd, v = l.v_heads * hd, vh = l.v_heads;
  b.Add(pre + ".input_layernorm.weight", {h}, -1, layer);
  const std::string a = pre + ".linear_attn";
  // LoRA (catalog::LoraParams): two adapters of h -> v and one of v -> h.
  b.Linear(a + ".in_proj_qk", 2 * qk, h, 0, layer, false, {qk, qk}, {hd, hd});
  b.Linear(a + ".in_proj_v", v, h, 0, layer, lora, {}, {hd});
  b.Linear(a + ".in_proj_z", v, h, 0, layer, lora, {}, {hd});
  b.Linear(a + ".in_proj_ba", 2 * vh, h, 0, layer, false, {vh, vh}, {1, 1});
  b.Add(a + ".conv1d.weight", {2 * qk + v, 4}, 0, layer, {qk, qk, v}, {hd, hd, hd});
  b.Linear(a + ".out_proj", h, v, 1, layer, lora, {}, {hd});
}

void AddMamba(ws::HfParamBuilder& b, const std::string& pre, const Mamba& mb, int64_t h, int layer,
              bool lora) {
  const int64_t di = mb.d_inner, gs = static_cast<int64_t>(mb.groups) * mb.state, nh = mb.heads;
  const int64_t p = nh > 0 && di % nh == 0 ? di / nh : 0, st = mb.state;
  b.Add(pre + ".input_layernorm.weight", {h}, -1, layer);
  const std::string a = pre + ".mixer";
  // LoRA (catalog::LoraParams): two adapters of h -> d_inner (x, z) and one of d_inner -> h.
  b.Linear(a + ".in_proj_x", di, h, 0, layer, lora, {}, {p});
  b.Linear(a + ".in_proj_z", di, h, 0, layer, lora, {}, {p});
  b.Linear(a + ".in_proj_bcdt", 2 * gs + nh, h, 0, layer, false, {gs, gs, nh}, {st, st, 1});
  b.Add(a + ".conv1d.weight", {di + 2 * gs, 4}, 0, layer, {di, gs, gs}, {p, st, st});
  b.Add(a + ".A_log", {nh}, 0, layer, {}, {1});
  b.Add(a + ".D", {nh}, 0, layer, {}, {1});
  b.Add(a + ".dt_bias", {nh}, 0, layer, {}, {1});
  b.Add(a + ".norm.weight", {di}, 0, layer, {}, {p});
  b.Linear(a + ".out_proj", h, di, 1, layer, lora, {}, {p});
}

// Routed experts as `groups` tensors per projection, each stacking experts/groups consecutive
// experts (groups == experts: one tensor per expert).
void AddMoe(ws::HfParamBuilder& b, const std::string& pre, const Moe& moe, int64_t h, int layer, bool lora,
            int groups) {
  b.Add(pre + ".post_attention_layernorm.weight", {h}, -1, layer);
  b.Router(pre + ".mlp", moe.experts, h, layer);
  const int64_t shared = moe.shared_size > 0 ? moe.shared_size : moe.expert_size;
  b.SharedExperts(pre + ".mlp", moe.shared_experts, h, shared, moe.gated, layer, lora);
  b.RoutedExperts(pre + ".mlp", moe.experts, groups, h, moe.expert_size, moe.gated, layer, lora);
}

void AddDenseFfn(ws::HfParamBuilder& b, const std::string& pre, const DenseFfn& f, int64_t h, int layer,
                 bool lora) {
  b.Add(pre + ".post_attention_layernorm.weight", {h}, -1, layer);
  b.Mlp(pre + ".mlp", h, f.size, f.gated, layer, lora);
}

enum class MixerKind { kAttention, kLinear, kMamba };

// The kinds of the mixers in order, spread evenly: the rarer kinds take the last position of
// each period (the i-th of n in a model of M mixers at (i+1)*M/n - 1, the next free one before
// it on a collision), the most common kind fills the rest: 3 linear : 1 attention gives
// L L L A L L L A ... as Qwen3-Next lays them out.
std::vector<MixerKind> InterleaveMixers(const Architecture& a) {
  std::vector<std::pair<int, MixerKind>> kinds = {{a.linear_attention.layers, MixerKind::kLinear},
                                                  {a.mamba.layers, MixerKind::kMamba},
                                                  {a.attention.layers, MixerKind::kAttention}};
  std::stable_sort(kinds.begin(), kinds.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  const int total = MixerLayers(a);
  std::vector<int> slot(total, -1);
  for (int k = 0; k < 2; ++k) {
    const int n = kinds[k].first;
    for (int i = 0; i < n; ++i) {
      int pos = static_cast<int>(static_cast<int64_t>(i + 1) * total / n) - 1;
      while (slot[pos] >= 0) pos = (pos + total - 1) % total;
      slot[pos] = k;
    }
  }
  std::vector<MixerKind> out;
  for (int j = 0; j < total; ++j) out.push_back(kinds[slot[j] >= 0 ? slot[j] : 2].second);
  return out;
}

bool BlockSplits(int64_t block, int64_t unit, int tp) {
  if (tp <= 1) return true;
  if (unit > 0) {
    int64_t heads = block / unit;
    return heads % tp == 0 || tp % heads == 0;
  }
  return block % tp == 0;
}

std::string Describe(const ws::ModelParallel& mp, const std::string& backend) {
  std::string s = absl::StrCat(backend, " TP", mp.tp, " x PP", mp.pp);
  if (mp.ep > 1 || mp.experts == ws::ExpertSharding::kWholeOverAllRanks)
    absl::StrAppend(&s, " x EP",
                    mp.experts == ws::ExpertSharding::kWholeOverAllRanks ? mp.ep * mp.tp : mp.ep);
  if (mp.replicas > 1) absl::StrAppend(&s, " (x ", mp.replicas, " replicas)");
  return s;
}

}  // namespace

absl::StatusOr<SyncModel> BuildSyncModel(const Architecture& a, const SyncModelOptions& o) {
  if (a.hidden <= 0 || a.vocab <= 0)
    return absl::InvalidArgumentError("arch: hidden and vocab must be positive");
  if (o.lora_rank < 0) return absl::InvalidArgumentError("lora_rank: must be >= 0");
  const bool lora = o.lora_rank > 0;
  const int64_t h = a.hidden;
  ws::HfParamBuilder b(o.lora_rank);
  const int mixers = MixerLayers(a);
  const int ffns = a.ffn.layers + a.moe.layers;
  const int layers = std::max({mixers, ffns, 1});
  ws::Model& m = b.model();
  m.num_layers = layers;
  int groups = a.moe.experts;
  if (o.expert_groups > 0) {
    if (a.moe.experts % o.expert_groups != 0)
      return absl::InvalidArgumentError(absl::StrCat("expert_groups: ", o.expert_groups,
                                                     " does not divide the ", a.moe.experts, " experts"));
    groups = o.expert_groups;
  }
  m.num_experts = a.moe.layers > 0 ? groups : 0;

  const Vision& v = a.vision;
  if (v.layers > 0) {
    const int64_t hv = v.hidden;
    for (int i = 0; i < v.layers; ++i) {
      std::string pre = absl::StrCat("visual.blocks.", i);
      b.Add(pre + ".norm1.weight", {hv}, -1, ws::kPreLayers);
      b.Add(pre + ".norm1.bias", {hv}, -1, ws::kPreLayers);
      b.Linear(pre + ".attn.qkv", 3 * hv, hv, 0, ws::kPreLayers, false, {hv, hv, hv});
      b.Linear(pre + ".attn.proj", hv, hv, 1, ws::kPreLayers, false);
      b.Add(pre + ".norm2.weight", {hv}, -1, ws::kPreLayers);
      b.Add(pre + ".norm2.bias", {hv}, -1, ws::kPreLayers);
      b.Linear(pre + ".mlp.fc1", v.ffn, hv, 0, ws::kPreLayers, false);
      b.Linear(pre + ".mlp.fc2", hv, v.ffn, 1, ws::kPreLayers, false);
    }
    b.Linear("visual.merger.fc1", 4 * hv, 4 * hv, 0, ws::kPreLayers, false);
    b.Linear("visual.merger.fc2", v.out_hidden, 4 * hv, 1, ws::kPreLayers, false);
  }
  b.Embeddings(a.vocab, h);

  // Mixer j sits in layer j*layers/mixers and FFN block k in k*layers/ffns (both injective since
  // neither count exceeds `layers`); model order is by layer, mixer first.
  std::vector<MixerKind> kinds = InterleaveMixers(a);
  std::vector<int> mixer_at(layers, -1), ffn_at(layers, -1);
  for (int j = 0; j < mixers; ++j) mixer_at[static_cast<int64_t>(j) * layers / mixers] = j;
  for (int k = 0; k < ffns; ++k) ffn_at[static_cast<int64_t>(k) * layers / ffns] = k;
  for (int l = 0; l < layers; ++l) {
    const std::string pre = ws::HfLayerPrefix(l);
    if (int j = mixer_at[l]; j >= 0) {
      switch (kinds[j]) {
        case MixerKind::kAttention:
          AddAttention(b, pre, a.attention, h, l, lora);
          if (lora && a.attention.kind == AttentionKind::kMla)
            AddMlaLora(b, pre, a.attention, h, l, o.lora_rank);
          break;
        case MixerKind::kLinear:
          AddLinearAttention(b, pre, a.linear_attention, h, l, lora);
          break;
        case MixerKind::kMamba:
          AddMamba(b, pre, a.mamba, h, l, lora);
          break;
      }
    }
    if (int k = ffn_at[l]; k >= 0) {
      // "First k dense": the dense FFN layers come before the MoE layers.
      if (k < a.ffn.layers)
        AddDenseFfn(b, pre, a.ffn, h, l, lora);
      else
        AddMoe(b, pre, a.moe, h, l, lora, groups);
    }
  }
  b.FinalNorm(h);
  for (int i = 0; i < a.mtp_layers; ++i) {
    // DeepSeek-style MTP block: norms of the embedding and the hidden state, a 2h -> h
    // projection, one decoder layer (attention + the model's FFN kind).
    const std::string pre = absl::StrCat("mtp.", i);
    b.Add(pre + ".enorm.weight", {h}, -1, ws::kPostLayers);
    b.Add(pre + ".hnorm.weight", {h}, -1, ws::kPostLayers);
    b.Linear(pre + ".eh_proj", h, 2 * h, 1, ws::kPostLayers, false);
    if (a.attention.layers > 0) AddAttention(b, pre, a.attention, h, ws::kPostLayers, false);
    if (a.moe.layers > 0)
      AddMoe(b, pre, a.moe, h, ws::kPostLayers, false, groups);
    else if (a.ffn.layers > 0)
      AddDenseFfn(b, pre, a.ffn, h, ws::kPostLayers, false);
  }
  if (!a.tied_embeddings) b.LmHead(a.vocab, h);

  SyncModel out;
  // A block one of the TP sizes cannot split is replicated instead (engines and Megatron would
  // pad or replicate it; either way every rank needs those bytes).
  for (ws::Param& p : m.params) {
    if (p.split_dim < 0) continue;
    std::vector<int64_t> blocks = p.fused.empty() ? std::vector<int64_t>{p.shape[p.split_dim]} : p.fused;
    bool ok = true;
    for (size_t i = 0; i < blocks.size() && ok; ++i) {
      int64_t unit = p.head_rows.empty() ? 0 : p.head_rows[i];
      if (unit > 0 && blocks[i] % unit != 0) unit = 0, p.head_rows[i] = 0;
      for (int tp : o.tp_sizes) ok = ok && BlockSplits(blocks[i], unit, tp);
    }
    if (!ok) {
      p.split_dim = -1;
      p.fused.clear();
      p.head_rows.clear();
      ++out.replicated_for_tp;
    }
  }
  if (absl::Status s = ws::ValidateModel(m); !s.ok())
    return absl::InternalError(absl::StrCat("sync model: ", s.message()));
  out.model = std::move(m);
  return out;
}

absl::StatusOr<SyncSetup> MakeSyncSetup(const Plan& plan, const Architecture& arch) {
  const TrainerShape& t = plan.trainer.shape;
  const GeneratorPlan& g = plan.generator;
  const bool fsdp = t.backend == "fsdp";
  const bool lora = plan.mode == Mode::kLora;

  const int experts = arch.moe.layers > 0 ? arch.moe.experts : 0;
  SyncSetup s;
  int sender_spread = 1;  // ranks the trainer spreads whole experts (or expert blocks) over
  if (fsdp) {
    s.senders = ws::Layout::Of(ws::Fsdp{t.gpus, 1});
    s.sender_layout = absl::StrCat("fsdp ", t.gpus, " shards");
  } else {
    // The catalog's EP divides TP*DP (Megatron folds expert parallelism over the data- and
    // tensor-parallel ranks). When EP is a multiple of TP that divides TP*DP, experts lie whole
    // on EP ranks and repeat over TP*DP/EP expert-data-parallel copies: weight_sync's
    // kWholeOverAllRanks with ep' = EP/TP and replicas = DP/ep'. Otherwise (EP below TP, or
    // not a multiple) experts are taken as split by TP like dense weights, with every DP
    // replica holding them: the same bytes per rank when EP = 1 and an approximation else.
    ws::ModelParallel mp;
    mp.tp = t.tp;
    mp.pp = t.pp;
    if (experts > 0 && t.ep >= t.tp && t.ep % t.tp == 0 && t.dp % (t.ep / t.tp) == 0) {
      mp.experts = ws::ExpertSharding::kWholeOverAllRanks;
      mp.ep = t.ep / t.tp;
      mp.replicas = t.dp / mp.ep;
      sender_spread = t.ep;
    } else {
      mp.experts = ws::ExpertSharding::kEpThenTp;
      mp.ep = 1;
      mp.replicas = t.dp;
    }
    s.senders = ws::Layout::Of(mp);
    s.sender_layout = Describe(mp, "megatron");
  }
  s.engine.tp = g.tp;
  const bool whole = experts > 0 && experts % g.tp == 0;
  s.engine.experts = whole ? ws::ExpertSharding::kWholeOverAllRanks : ws::ExpertSharding::kEpThenTp;
  s.engines = g.engines;
  s.receivers = ws::Layout::Engines(g.engines, s.engine);
  s.receiver_layout = absl::StrCat(g.engines, g.engines == 1 ? " engine" : " engines", " x TP", g.tp);

  SyncModelOptions mo;
  mo.lora_rank = lora ? plan.assumptions.lora_rank : 0;
  mo.tp_sizes = {fsdp ? 1 : t.tp, g.tp};
  // Group experts as coarsely as both sides' expert spreads allow (both divide the expert
  // count, so their lcm does): the same bytes on every rank, a few hundred tensors to plan
  // instead of tens of thousands for 384-expert models.
  if (experts > 0) mo.expert_groups = std::lcm(sender_spread, whole ? g.tp : 1);
  absl::StatusOr<SyncModel> sm = BuildSyncModel(arch, mo);
  if (!sm.ok()) return sm.status();
  s.model = std::move(sm->model);
  s.replicated_for_tp = sm->replicated_for_tp;

  std::vector<std::string> dropped;
  if (!plan.assumptions.enable_mtp && arch.mtp_layers > 0) dropped.push_back("mtp.");
  if (!plan.row->vision_trainable && arch.vision.layers > 0) dropped.push_back("visual.");
  if (lora) {
    s.filter = ws::LoraOnly();
    s.synced = "LoRA adapters only";
  } else {
    s.filter = ws::ExcludeNames(dropped);
    s.synced = "all trained weights";
    if (!dropped.empty())
      absl::StrAppend(&s.synced, " (without ",
                      dropped.size() == 2    ? "MTP layers and the frozen vision tower"
                      : dropped[0] == "mtp." ? "MTP layers"
                                             : "the frozen vision tower",
                      ")");
  }
  return s;
}

absl::StatusOr<SyncPlanSummary> PlanWeightSync(const Plan& plan) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<SyncSetup> setup = MakeSyncSetup(plan, plan.model->arch);
  if (!setup.ok()) return setup.status();
  const ws::Model& model = setup->model;
  SyncPlanSummary s;
  s.sender_layout = setup->sender_layout;
  s.receiver_layout = setup->receiver_layout;
  s.synced = setup->synced;
  s.senders = setup->senders.Ranks();
  s.receivers = setup->receivers.Ranks();
  s.replicated_for_tp = setup->replicated_for_tp;

  ws::PlanOptions po;
  po.cost.nvlink_bytes_per_s = plan.cluster.gpu.nvlink_gb_s * 1e9 / 2;  // vendor figure is both directions
  po.cost.nic_bytes_per_s = plan.cluster.gpu.nic_gb_s * 1e9;
  po.cost.gpus_per_node = plan.cluster.shape.gpus_per_node;
  po.cost.receiver_first_gpu = plan.placement == Placement::kColocated ? 0 : plan.trainer.shape.gpus;
  po.filter = setup->filter;
  for (const ws::Param& p : model.params)
    if (po.filter(p)) ++s.params;
  absl::StatusOr<ws::Plan> wp = ws::MakePlan(model, setup->senders, setup->receivers, po);
  if (!wp.ok())
    return absl::InvalidArgumentError(absl::StrCat("weight-sync layouts: ", wp.status().message()));
  s.bytes = wp->total_bytes;
  s.predicted_s = wp->predicted_s;
  s.lower_bound_s = wp->lower_bound_s;
  s.planning_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return s;
}

}  // namespace skyrl::catalog
