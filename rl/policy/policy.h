// The policy: a small decoder-only transformer (pre-norm RMSNorm, causal multi-head
// attention with a fused QKV projection, SwiGLU MLP with a fused gate/up projection, learned
// position embedding), whose attention and MLP linears are Megatron-style tensor-parallel
// over an injected Collective:
//
//   column-parallel: qkv_proj (each of q/k/v split by heads), gate_up_proj (gate and up split
//                    on their own); input replicated, output sharded. Preceded by f:
//                    identity forward, all-reduce of the input gradient backward.
//   row-parallel:    o_proj, down_proj (split on the input dim); input sharded, output
//                    partial. Followed by g: all-reduce forward, identity backward.
//
// Embeddings, norms and the LM head are replicated (see config.h); their gradients come out
// identical on every rank because the all-reduces are bitwise deterministic.
//
// Thread safety: a Policy is used by one thread at a time (its rank's thread). Forward on a
// TP group must be called by every rank with equally shaped inputs, as for any collective.
// Ownership: the Policy does not own `comm`; REQUIRES it outlives the Policy.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "rl/collective/collective.h"
#include "rl/policy/config.h"

namespace skyrl::rl {

// Parameters by name, in model order (PolicyParamSpecs order).
using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// The full parameter set, initialised deterministically from `seed` (normal(0, std) for
// matrices, ones for norms); float32, no grad. REQUIRES: ValidatePolicyConfig passed.
NamedTensors InitFullParameters(const PolicyConfig& c, uint64_t seed);

// Rank `rank`'s shard of a full parameter set (copies). Split parameters take the rank's
// slice of split_dim, per fused sub-block; replicated ones are copied whole.
// InvalidArgument naming the parameter when a name is missing or a shape is wrong.
absl::StatusOr<NamedTensors> ShardParameters(const PolicyConfig& c, const NamedTensors& full, int tp,
                                             int rank);
// The inverse: shards[r] is rank r's shard; replicated parameters are taken from rank 0.
absl::StatusOr<NamedTensors> GatherShards(const PolicyConfig& c, const std::vector<NamedTensors>& shards);

class Policy {
 public:
  // Copies `shard` (ShardParameters(c, full, comm->WorldSize(), comm->Rank())) into fresh
  // leaf tensors that require grad. InvalidArgument naming the field or parameter.
  static absl::StatusOr<std::unique_ptr<Policy>> Create(const PolicyConfig& c, Collective* comm,
                                                        const NamedTensors& shard);

  // tokens: [B, T] int64, T <= max_len; `valid` [B, T] bool marks real tokens (false for
  // left padding; positions count valid tokens only). Returns logits [B, T, vocab] float32.
  // Throws c10::Error (bad shapes) or CollectiveError (a failed all-reduce): callers convert
  // at their edge with RunTorch (torch_status.h).
  torch::Tensor Forward(const torch::Tensor& tokens, const torch::Tensor& valid) const;

  const PolicyConfig& config() const { return config_; }
  Collective* comm() const { return comm_; }
  const std::vector<ParamSpec>& specs() const { return specs_; }
  // The live parameters (this rank's shard), in spec order.
  const NamedTensors& parameters() const { return params_; }
  std::vector<torch::Tensor> ParameterList() const;
  // Detached copies of this rank's shard.
  NamedTensors StateCopy() const;
  // Overwrites every parameter's values from `shard` (same names and shapes) without
  // touching autograd state; InvalidArgument naming the parameter otherwise.
  absl::Status LoadShard(const NamedTensors& shard);

 private:
  Policy(PolicyConfig c, Collective* comm) : config_(std::move(c)), comm_(comm) {}
  const torch::Tensor& P(size_t i) const { return params_[i].second; }

  PolicyConfig config_;
  Collective* comm_;
  std::vector<ParamSpec> specs_;
  NamedTensors params_;
};

}  // namespace skyrl::rl
