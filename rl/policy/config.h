// The policy's shape and the tensor-parallel facts of each of its parameters. Torch-free, so
// that the job, the weight-sync wiring and the config loader can use it without LibTorch.
//
// Parameter names and conventions follow weight_sync/plan/model.h (and Megatron/vLLM): a
// linear weight is [out, in]; column-parallel weights split dim 0, row-parallel weights split
// dim 1; a fused weight (qkv_proj, gate_up_proj) lists its sub-blocks along dim 0 and each
// sub-block is split on its own, so a TP rank holds [q_t; k_t; v_t] and [gate_t; up_t].
//
// Plain values; no thread-safety concerns.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace skyrl::rl {

struct PolicyConfig {
  int vocab = 0;
  int layers = 2;
  int d_model = 64;
  int heads = 4;
  int max_len = 32;    // positions (learned position embedding)
  int mlp_hidden = 0;  // SwiGLU intermediate size; 0 = 4 * d_model
  double init_std = 0.02;

  int MlpHidden() const { return mlp_hidden > 0 ? mlp_hidden : 4 * d_model; }
  int HeadDim() const { return d_model / heads; }
};

// InvalidArgument naming the field: positive sizes, heads dividing d_model.
absl::Status ValidatePolicyConfig(const PolicyConfig& c);
// Also checks that `tp` divides the heads and the MLP's intermediate size; errors name `field`.
absl::Status ValidateTensorParallel(const PolicyConfig& c, int tp, absl::string_view field = "tp_size");

// How one parameter is laid out and split.
struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;  // full (unsharded) shape
  int split_dim = -1;          // -1: replicated on every TP rank
  std::vector<int64_t> fused;  // sub-block sizes along dim 0; empty = one block
  int layer = -1;              // -1 before the layers, -2 after them (weight_sync's kPre/kPost)
  double init_std = 0.0;       // 0: initialised to ones (norm weights)
};

// Every parameter of the policy, in model order. Embeddings, position embeddings, norms and
// the LM head are replicated over TP ranks (a vocabulary of tens of tokens is not worth
// splitting); the attention and MLP linears are split Megatron-style.
std::vector<ParamSpec> PolicyParamSpecs(const PolicyConfig& c);

// The shape rank `rank` of `tp` holds. REQUIRES: ValidateTensorParallel passed.
std::vector<int64_t> ShardShape(const ParamSpec& p, int tp);

}  // namespace skyrl::rl
