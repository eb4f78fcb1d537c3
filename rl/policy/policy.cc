#include "rl/policy/policy.h"

#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rl/policy/torch_status.h"

namespace skyrl::rl {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

Collective* CommOf(AutogradContext* ctx) {
  return reinterpret_cast<Collective*>(ctx->saved_data["comm"].toInt());
}

void AllReduceInPlace(Collective* comm, torch::Tensor& t) {
  TORCH_CHECK(t.is_contiguous() && t.scalar_type() == torch::kFloat32 && t.device().is_cpu(),
              "all-reduce needs a contiguous float32 CPU tensor");
  ThrowIfError(comm->AllReduceSum(t.data_ptr<float>(), t.numel()));
}

// Megatron's f: identity forward, all-reduce of the gradient backward. Sits in front of a
// column-parallel linear, whose input is replicated but whose input gradient is partial.
struct CopyToTensorParallel : public torch::autograd::Function<CopyToTensorParallel> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return x.clone();
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    torch::Tensor g = grads[0].contiguous().clone();
    AllReduceInPlace(CommOf(ctx), g);
    return {g, torch::Tensor()};
  }
};

// Megatron's g: all-reduce forward, identity backward. Follows a row-parallel linear, whose
// per-rank output is a partial sum.
struct ReduceFromTensorParallel : public torch::autograd::Function<ReduceFromTensorParallel> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t comm) {
    torch::Tensor y = x.contiguous().clone();
    AllReduceInPlace(reinterpret_cast<Collective*>(comm), y);
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {grads[0], torch::Tensor()};
  }
};

torch::Tensor RmsNorm(const torch::Tensor& x, const torch::Tensor& w) {
  return x * torch::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + 1e-5) * w;
}

// Index of the row range [lo, hi) of each sub-block `rank` holds along dim 0 (fused), or the
// single slice of split_dim.
std::vector<std::pair<int64_t, int64_t>> RankSlices(const ParamSpec& p, int tp, int rank) {
  std::vector<int64_t> blocks = p.fused.empty() ? std::vector<int64_t>{p.shape[p.split_dim]} : p.fused;
  std::vector<std::pair<int64_t, int64_t>> out;
  int64_t base = 0;
  for (int64_t b : blocks) {
    int64_t part = b / tp;
    out.push_back({base + rank * part, base + (rank + 1) * part});
    base += b;
  }
  return out;
}

absl::Status CheckShape(const std::string& name, const torch::Tensor& t, const std::vector<int64_t>& want,
                        absl::string_view what) {
  if (!t.defined())
    return absl::InvalidArgumentError(absl::StrCat(what, ": parameter ", name, " is undefined"));
  if (t.sizes().vec() != want) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": parameter ", name, " has shape [",
                                                   absl::StrJoin(t.sizes().vec(), ", "), "], want [",
                                                   absl::StrJoin(want, ", "), "]"));
  }
  if (t.scalar_type() != torch::kFloat32) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": parameter ", name, " is not float32"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, torch::Tensor>> ByName(const NamedTensors& ts,
                                                            const std::vector<ParamSpec>& specs,
                                                            absl::string_view what) {
  std::map<std::string, torch::Tensor> m;
  for (const auto& [n, t] : ts) {
    if (!m.emplace(n, t).second)
      return absl::InvalidArgumentError(absl::StrCat(what, ": parameter ", n, " appears twice"));
  }
  for (const ParamSpec& p : specs) {
    if (!m.count(p.name))
      return absl::InvalidArgumentError(absl::StrCat(what, ": parameter ", p.name, " is missing"));
  }
  if (m.size() != specs.size()) {
    for (const auto& [n, t] : m) {
      bool known = false;
      for (const ParamSpec& p : specs) known |= p.name == n;
      if (!known) return absl::InvalidArgumentError(absl::StrCat(what, ": unknown parameter ", n));
    }
  }
  return m;
}

}  // namespace

NamedTensors InitFullParameters(const PolicyConfig& c, uint64_t seed) {
  torch::NoGradGuard no_grad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  NamedTensors out;
  for (const ParamSpec& p : PolicyParamSpecs(c)) {
    torch::Tensor t;
    if (p.init_std == 0.0) {
      t = torch::ones(p.shape, torch::kFloat32);
    } else {
      t = at::normal(0.0, p.init_std, p.shape, gen, torch::kFloat32);
    }
    out.emplace_back(p.name, t);
  }
  return out;
}

absl::StatusOr<NamedTensors> ShardParameters(const PolicyConfig& c, const NamedTensors& full, int tp,
                                             int rank) {
  if (auto s = ValidateTensorParallel(c, tp); !s.ok()) return s;
  if (rank < 0 || rank >= tp)
    return absl::InvalidArgumentError(absl::StrCat("rank: ", rank, " outside tp ", tp));
  const auto specs = PolicyParamSpecs(c);
  auto by_name = ByName(full, specs, "ShardParameters");
  if (!by_name.ok()) return by_name.status();
  return RunTorch("ShardParameters", [&]() -> absl::StatusOr<NamedTensors> {
    torch::NoGradGuard no_grad;
    NamedTensors out;
    for (const ParamSpec& p : specs) {
      const torch::Tensor& t = (*by_name)[p.name];
      if (auto s = CheckShape(p.name, t, p.shape, "ShardParameters"); !s.ok()) return s;
      if (p.split_dim < 0) {
        out.emplace_back(p.name, t.detach().clone());
        continue;
      }
      std::vector<torch::Tensor> parts;
      for (auto [lo, hi] : RankSlices(p, tp, rank)) parts.push_back(t.narrow(p.split_dim, lo, hi - lo));
      out.emplace_back(p.name, torch::cat(parts, p.split_dim).contiguous().clone());
    }
    return out;
  });
}

absl::StatusOr<NamedTensors> GatherShards(const PolicyConfig& c, const std::vector<NamedTensors>& shards) {
  const int tp = static_cast<int>(shards.size());
  if (auto s = ValidateTensorParallel(c, tp); !s.ok()) return s;
  const auto specs = PolicyParamSpecs(c);
  std::vector<std::map<std::string, torch::Tensor>> maps;
  for (int r = 0; r < tp; ++r) {
    auto m = ByName(shards[r], specs, absl::StrCat("GatherShards: rank ", r));
    if (!m.ok()) return m.status();
    maps.push_back(std::move(*m));
  }
  return RunTorch("GatherShards", [&]() -> absl::StatusOr<NamedTensors> {
    torch::NoGradGuard no_grad;
    NamedTensors out;
    for (const ParamSpec& p : specs) {
      const auto want = ShardShape(p, tp);
      for (int r = 0; r < tp; ++r) {
        if (auto s = CheckShape(p.name, maps[r][p.name], want, absl::StrCat("GatherShards: rank ", r));
            !s.ok())
          return s;
      }
      if (p.split_dim < 0) {
        out.emplace_back(p.name, maps[0][p.name].detach().clone());
        continue;
      }
      // Sub-block b of rank r sits at rows [b * part, (b + 1) * part) of r's shard.
      std::vector<int64_t> blocks = p.fused.empty() ? std::vector<int64_t>{p.shape[p.split_dim]} : p.fused;
      std::vector<torch::Tensor> parts;
      int64_t offset = 0;
      for (int64_t b : blocks) {
        for (int r = 0; r < tp; ++r) parts.push_back(maps[r][p.name].narrow(p.split_dim, offset, b / tp));
        offset += b / tp;
      }
      out.emplace_back(p.name, torch::cat(parts, p.split_dim).contiguous());
    }
    return out;
  });
}

absl::StatusOr<std::unique_ptr<Policy>> Policy::Create(const PolicyConfig& c, Collective* comm,
                                                       const NamedTensors& shard) {
  if (comm == nullptr) return absl::InvalidArgumentError("Policy: comm is null");
  const int tp = comm->WorldSize();
  if (auto s = ValidateTensorParallel(c, tp); !s.ok()) return s;
  std::unique_ptr<Policy> p(new Policy(c, comm));
  p->specs_ = PolicyParamSpecs(c);
  auto by_name = ByName(shard, p->specs_, "Policy");
  if (!by_name.ok()) return by_name.status();
  for (const ParamSpec& s : p->specs_) {
    const torch::Tensor& t = (*by_name)[s.name];
    if (auto st = CheckShape(s.name, t, ShardShape(s, tp), "Policy"); !st.ok()) return st;
    p->params_.emplace_back(s.name, t.detach().clone().contiguous().set_requires_grad(true));
  }
  return p;
}

std::vector<torch::Tensor> Policy::ParameterList() const {
  std::vector<torch::Tensor> out;
  for (const auto& [n, t] : params_) out.push_back(t);
  return out;
}

NamedTensors Policy::StateCopy() const {
  NamedTensors out;
  for (const auto& [n, t] : params_) out.emplace_back(n, t.detach().clone());
  return out;
}

absl::Status Policy::LoadShard(const NamedTensors& shard) {
  auto by_name = ByName(shard, specs_, "LoadShard");
  if (!by_name.ok()) return by_name.status();
  const int tp = comm_->WorldSize();
  for (size_t i = 0; i < specs_.size(); ++i) {
    const torch::Tensor& t = (*by_name)[specs_[i].name];
    if (auto s = CheckShape(specs_[i].name, t, ShardShape(specs_[i], tp), "LoadShard"); !s.ok()) return s;
  }
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < specs_.size(); ++i) params_[i].second.copy_((*by_name)[specs_[i].name]);
  return absl::OkStatus();
}

torch::Tensor Policy::Forward(const torch::Tensor& tokens, const torch::Tensor& valid) const {
  TORCH_CHECK(tokens.dim() == 2 && tokens.scalar_type() == torch::kInt64, "tokens must be [B, T] int64");
  TORCH_CHECK(valid.sizes() == tokens.sizes() && valid.scalar_type() == torch::kBool,
              "valid must be [B, T] bool");
  const int64_t B = tokens.size(0), T = tokens.size(1);
  TORCH_CHECK(T <= config_.max_len, "sequence length ", T, " exceeds model.max_len ", config_.max_len);
  TORCH_CHECK(tokens.numel() == 0 ||
                  (tokens.min().item<int64_t>() >= 0 && tokens.max().item<int64_t>() < config_.vocab),
              "token id outside the vocabulary");
  const int tp = comm_->WorldSize();
  const int64_t heads = config_.heads / tp, hd = config_.HeadDim(), dl = heads * hd;
  const int64_t fl = config_.MlpHidden() / tp;
  const auto comm_id = reinterpret_cast<int64_t>(comm_);
  auto f = [&](const torch::Tensor& x) { return tp == 1 ? x : CopyToTensorParallel::apply(x, comm_id); };
  auto g = [&](const torch::Tensor& x) { return tp == 1 ? x : ReduceFromTensorParallel::apply(x, comm_id); };

  // Positions count real tokens only, so a left-padded prompt starts at position 0.
  torch::Tensor pos = (valid.to(torch::kInt64).cumsum(1) - 1).clamp(0, config_.max_len - 1);
  torch::Tensor x = torch::embedding(P(0), tokens) + torch::embedding(P(1), pos);
  // Causal, and no attention to padding; a query always sees itself so no row is empty.
  torch::Tensor causal = torch::ones({T, T}, torch::kBool).tril();
  torch::Tensor allowed = causal.unsqueeze(0) & valid.unsqueeze(1);
  allowed = allowed | torch::eye(T, torch::kBool).unsqueeze(0);
  torch::Tensor bias =
      torch::zeros({B, 1, T, T}, torch::kFloat32)
          .masked_fill(allowed.logical_not().unsqueeze(1), -std::numeric_limits<float>::infinity());
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));

  size_t i = 2;
  for (int l = 0; l < config_.layers; ++l, i += 6) {
    torch::Tensor h = f(RmsNorm(x, P(i)));
    torch::Tensor qkv = torch::matmul(h, P(i + 1).t());  // [B, T, 3 * dl] = [q_t | k_t | v_t]
    auto heads_first = [&](const torch::Tensor& t) { return t.view({B, T, heads, hd}).transpose(1, 2); };
    torch::Tensor q = heads_first(qkv.narrow(2, 0, dl));
    torch::Tensor k = heads_first(qkv.narrow(2, dl, dl));
    torch::Tensor v = heads_first(qkv.narrow(2, 2 * dl, dl));
    torch::Tensor att = torch::softmax(torch::matmul(q, k.transpose(2, 3)) * scale + bias, -1);
    torch::Tensor o = torch::matmul(att, v).transpose(1, 2).reshape({B, T, dl});
    x = x + g(torch::matmul(o, P(i + 2).t()));

    h = f(RmsNorm(x, P(i + 3)));
    torch::Tensor gu = torch::matmul(h, P(i + 4).t());  // [B, T, 2 * fl] = [gate_t | up_t]
    torch::Tensor act = torch::silu(gu.narrow(2, 0, fl)) * gu.narrow(2, fl, fl);
    x = x + g(torch::matmul(act, P(i + 5).t()));
  }
  x = RmsNorm(x, P(i));
  return torch::matmul(x, P(i + 1).t());
}

}  // namespace skyrl::rl
