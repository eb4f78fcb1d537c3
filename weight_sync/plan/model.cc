#include "weight_sync/plan/model.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace skyrl::weight_sync {

int ElementSize(DType d) {
  switch (d) {
    case DType::kF32:
      return 4;
    case DType::kF16:
      return 2;
    case DType::kBF16:
      return 2;
    case DType::kFP8E4M3:
      return 1;
    case DType::kFP8E5M2:
      return 1;
    case DType::kI64:
      return 8;
    case DType::kI32:
      return 4;
    case DType::kU8:
      return 1;
  }
  return 1;
}

absl::string_view DTypeName(DType d) {
  switch (d) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kFP8E4M3:
      return "fp8_e4m3";
    case DType::kFP8E5M2:
      return "fp8_e5m2";
    case DType::kI64:
      return "i64";
    case DType::kI32:
      return "i32";
    case DType::kU8:
      return "u8";
  }
  return "?";
}

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16, DType::kFP8E4M3, DType::kFP8E5M2, DType::kI64,
                  DType::kI32, DType::kU8})
    if (DTypeName(d) == name) return d;
  return absl::InvalidArgumentError(
      absl::StrCat("dtype '", name, "' is not one of f32, f16, bf16, fp8_e4m3, fp8_e5m2, i64, i32, u8"));
}

int64_t Param::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t Model::TotalBytes() const {
  int64_t n = 0;
  for (const Param& p : params) n += p.NumBytes();
  return n;
}

absl::Status ValidateModel(const Model& model) {
  if (model.num_layers < 0) return absl::InvalidArgumentError("model.num_layers must be >= 0");
  if (model.num_experts < 0) return absl::InvalidArgumentError("model.num_experts must be >= 0");
  absl::flat_hash_set<std::string> names;
  for (const Param& p : model.params) {
    std::string where = absl::StrCat("param '", p.name, "': ");
    if (p.name.empty()) return absl::InvalidArgumentError("param with an empty name");
    if (!names.insert(p.name).second)
      return absl::InvalidArgumentError(absl::StrCat(where, "duplicate name"));
    if (p.shape.size() > 6)
      return absl::InvalidArgumentError(
          absl::StrCat(where, "shape has ", p.shape.size(), " dims; at most 6 are supported"));
    for (int64_t d : p.shape)
      if (d <= 0) return absl::InvalidArgumentError(absl::StrCat(where, "shape dims must be > 0, got ", d));
    if (p.split_dim < -1 || p.split_dim >= static_cast<int>(p.shape.size()))
      return absl::InvalidArgumentError(
          absl::StrCat(where, "split_dim ", p.split_dim, " outside a ", p.shape.size(), "-dim shape"));
    if (!p.fused.empty()) {
      if (p.split_dim != 0)
        return absl::InvalidArgumentError(
            absl::StrCat(where, "fused sub-blocks need split_dim 0, got ", p.split_dim));
      int64_t sum = 0;
      for (int64_t f : p.fused) {
        if (f <= 0) return absl::InvalidArgumentError(absl::StrCat(where, "fused sizes must be > 0"));
        sum += f;
      }
      if (sum != p.shape[0])
        return absl::InvalidArgumentError(
            absl::StrCat(where, "fused sizes sum to ", sum, ", shape[0] is ", p.shape[0]));
    }
    if (!p.head_rows.empty()) {
      const size_t blocks = p.fused.empty() ? 1 : p.fused.size();
      if (p.split_dim < 0 || p.head_rows.size() != blocks)
        return absl::InvalidArgumentError(
            absl::StrCat(where, "head_rows needs a split_dim and one entry per block (", blocks, "), got ",
                         p.head_rows.size()));
      for (size_t b = 0; b < blocks; ++b) {
        int64_t size = p.fused.empty() ? p.shape[p.split_dim] : p.fused[b];
        if (p.head_rows[b] < 0 || (p.head_rows[b] > 0 && size % p.head_rows[b] != 0))
          return absl::InvalidArgumentError(absl::StrCat(where, "head_rows[", b, "]=", p.head_rows[b],
                                                         " does not divide the block of ", size));
      }
    }
    if (p.layer != kPreLayers && p.layer != kPostLayers && (p.layer < 0 || p.layer >= model.num_layers))
      return absl::InvalidArgumentError(
          absl::StrCat(where, "layer ", p.layer, " outside 0..", model.num_layers - 1));
    if (p.expert < -1 || p.expert >= model.num_experts)
      return absl::InvalidArgumentError(
          absl::StrCat(where, "expert ", p.expert, " outside the model's ", model.num_experts, " experts"));
  }
  return absl::OkStatus();
}

ParamFilter ExcludeNames(std::vector<std::string> substrings) {
  return [subs = std::move(substrings)](const Param& p) {
    for (const std::string& s : subs)
      if (absl::StrContains(p.name, s)) return false;
    return true;
  };
}

ParamFilter LoraOnly() {
  return [](const Param& p) { return absl::StrContains(p.name, "lora_"); };
}

}  // namespace skyrl::weight_sync
