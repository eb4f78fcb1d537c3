// The model as weight sync sees it: a list of parameters with shapes, dtypes and the facts
// that decide how each one is sharded (tensor-parallel split dimension, fused sub-blocks,
// layer for pipeline stages, expert index for expert parallelism).
//
// Conventions (Megatron and vLLM agree on these): a linear weight is [out, in]; a
// column-parallel weight splits dim 0, a row-parallel weight splits dim 1. A fused weight
// (QKV, gate/up) lists its sub-block sizes along dim 0 and each sub-block is split on its
// own, so a TP rank holds [q_t; k_t; v_t], never a contiguous third of the fused rows.
//
// Plain values; no thread-safety concerns.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace skyrl::weight_sync {

enum class DType { kF32, kF16, kBF16, kFP8E4M3, kFP8E5M2, kI64, kI32, kU8 };

// Bytes per element: 4, 2, 2, 1, 1, 8, 4, 1.
int ElementSize(DType d);
absl::string_view DTypeName(DType d);
// The inverse of DTypeName; InvalidArgument listing the names for any other string.
absl::StatusOr<DType> ParseDType(absl::string_view name);

// Layer index values for parameters outside the transformer layers.
inline constexpr int kPreLayers = -1;   // embeddings: the first pipeline stage
inline constexpr int kPostLayers = -2;  // final norm, LM head, MTP heads: the last stage

struct Param {
  std::string name;
  std::vector<int64_t> shape;  // elements; empty = scalar
  DType dtype = DType::kBF16;
  // Tensor-parallel split dimension; -1 = replicated on every TP rank (norms, biases of
  // row-parallel layers, routers).
  int split_dim = -1;
  // Sizes of fused sub-blocks along split_dim (which must be 0); empty = one block.
  std::vector<int64_t> fused;
  // Optional, per block (one entry per fused block, or one for an unfused weight): the rows of
  // one attention head. A block of H heads splits by heads when TP divides H; when H divides TP
  // (more TP ranks than KV heads), each head is replicated on TP/H consecutive ranks, as vLLM
  // and Megatron do. 0 or empty: split by rows, TP must divide the block.
  std::vector<int64_t> head_rows;
  int layer = kPreLayers;  // kPreLayers, kPostLayers or 0..num_layers-1
  int expert = -1;         // MoE expert index, or -1 for dense parameters

  int64_t NumElements() const;
  int64_t NumBytes() const { return NumElements() * ElementSize(dtype); }
};

struct Model {
  std::vector<Param> params;
  int num_layers = 0;
  int num_experts = 0;  // 0 for dense models

  int64_t TotalBytes() const;
};

// Checks every parameter: non-negative dims, split_dim inside the shape, fused sizes sum to
// the split dimension (and only on dim 0), layer and expert inside the model's counts,
// unique names. InvalidArgument names the parameter and the field.
absl::Status ValidateModel(const Model& model);

// Which parameters a sync moves. Returns true to keep.
using ParamFilter = std::function<bool(const Param&)>;

// Keeps parameters whose name contains none of `substrings` (drop "mtp." heads, skip a
// frozen "vision_tower").
ParamFilter ExcludeNames(std::vector<std::string> substrings);
// Keeps only LoRA adapter tensors (names containing "lora_A" or "lora_B" or "lora_").
ParamFilter LoraOnly();

}  // namespace skyrl::weight_sync
