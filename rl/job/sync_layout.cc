#include "rl/job/sync_layout.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "rl/policy/config.h"

namespace skyrl::rl {

weight_sync::Model PolicySyncModel(const PolicyConfig& c) {
  weight_sync::Model model;
  model.num_layers = c.layers;
  for (const ParamSpec& p : PolicyParamSpecs(c)) {
    weight_sync::Param wp;
    wp.name = p.name;
    wp.shape = p.shape;
    wp.dtype = weight_sync::DType::kF32;
    wp.split_dim = p.split_dim;
    wp.fused = p.fused;
    wp.layer = p.layer;
    model.params.push_back(wp);
  }
  return model;
}

absl::StatusOr<std::unique_ptr<weight_sync::PreparedSync>> MakePolicySync(const PolicyConfig& c,
                                                                          int trainer_tp, int engines,
                                                                          int engine_tp) {
  weight_sync::ModelParallel trainer;
  trainer.tp = trainer_tp;
  weight_sync::ModelParallel engine;
  engine.tp = engine_tp;
  return weight_sync::PreparedSync::Make(PolicySyncModel(c), weight_sync::Layout::Of(trainer),
                                         weight_sync::Layout::Engines(engines, engine));
}

std::vector<uint8_t> FlattenShard(const NamedTensors& shard) {
  int64_t bytes = 0;
  for (const auto& [name, t] : shard) bytes += t.numel() * 4;
  std::vector<uint8_t> out(bytes);
  int64_t at = 0;
  for (const auto& [name, t] : shard) {
    torch::Tensor c = t.detach().to(torch::kFloat32).contiguous();
    std::memcpy(out.data() + at, c.data_ptr<float>(), c.numel() * 4);
    at += c.numel() * 4;
  }
  return out;
}

absl::StatusOr<NamedTensors> UnflattenShard(const PolicyConfig& c, int tp, absl::Span<const uint8_t> bytes) {
  NamedTensors out;
  int64_t at = 0;
  for (const ParamSpec& p : PolicyParamSpecs(c)) {
    const std::vector<int64_t> shape = ShardShape(p, tp);
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    if (at + n * 4 > static_cast<int64_t>(bytes.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("weights: ", bytes.size(), " bytes, too few for ", p.name));
    }
    torch::Tensor t = torch::empty(shape, torch::kFloat32);
    std::memcpy(t.data_ptr<float>(), bytes.data() + at, n * 4);
    out.emplace_back(p.name, t);
    at += n * 4;
  }
  if (at != static_cast<int64_t>(bytes.size())) {
    return absl::InvalidArgumentError(absl::StrCat("weights: ", bytes.size(), " bytes, want ", at));
  }
  return out;
}

}  // namespace skyrl::rl
