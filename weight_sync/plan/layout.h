// Layouts: how a set of ranks shards a model. One type serves both sides of a sync: a trainer
// is one group (Megatron TP x PP x EP with DP replicas, or FSDP flat shards with replicas), an
// inference fleet is one group per engine (each with its own TP, optional EP).
//
// Rank numbering: groups take consecutive ranks in order. Inside a model-parallel group the
// replica index is outermost, then the pipeline stage, then the EP index, then the TP index
// (TP innermost, so a TP group sits on one node as usual). Inside an FSDP group the replica
// is outermost, then the shard index.
//
// Plain values; no thread-safety concerns.
#pragma once

#include <cstdint>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "weight_sync/plan/box.h"
#include "weight_sync/plan/model.h"

namespace skyrl::weight_sync {

// How expert weights are spread inside one model-parallel replica.
enum class ExpertSharding {
  // Experts go to EP ranks in contiguous blocks and each expert is split by TP like a dense
  // weight (Megatron with expert-tensor-parallel = TP).
  kEpThenTp,
  // Experts are spread whole over all tp * ep ranks of a stage in contiguous blocks (vLLM's
  // expert parallelism, where the engine's TP ranks double as EP ranks).
  kWholeOverAllRanks,
};

// Megatron-style model parallelism (also vLLM/SGLang engines, which split the same way).
// Dense parameters: split by TP along their split_dim (fused sub-blocks separately), held by
// the stage owning their layer, replicated over EP ranks and replicas.
struct ModelParallel {
  int tp = 1;
  int pp = 1;
  int ep = 1;
  int replicas = 1;  // data-parallel copies of the whole model
  ExpertSharding experts = ExpertSharding::kEpThenTp;
  // First layer of each stage (size pp, starting at 0, increasing). Empty: layers split as
  // evenly as possible, earlier stages taking the remainder.
  std::vector<int> stage_first_layer;

  int Ranks() const { return tp * pp * ep * replicas; }
};

// FSDP (ZeRO-3) flat shards: all parameters concatenated in model order as bytes, padded to a
// multiple of `shards`, and cut into `shards` equal pieces; HSDP has `replicas` > 1.
struct Fsdp {
  int shards = 1;
  int replicas = 1;

  int Ranks() const { return shards * replicas; }
};

using LayoutGroup = std::variant<ModelParallel, Fsdp>;

struct Layout {
  std::vector<LayoutGroup> groups;

  int Ranks() const;
  // Convenience: a trainer of one group, or `engines` identical inference engines.
  static Layout Of(LayoutGroup g) { return Layout{{std::move(g)}}; }
  static Layout Engines(int engines, const ModelParallel& engine);
};

// Checks the layout against the model: positive sizes, enough layers for the stages, TP
// dividing every split dimension (per fused sub-block), EP dividing the expert count.
// InvalidArgument names the group, field and parameter.
absl::Status ValidateLayout(const Model& model, const Layout& layout);

// One rank's piece of one parameter: boxes of the full tensor (byte space). The rank stores
// them concatenated in this order, each in its own row-major layout.
struct Holding {
  int rank = 0;
  std::vector<Box> boxes;
};

// Precomputed per (model, layout): answers who holds what. Thread-compatible (const methods
// may run concurrently). Keeps a pointer to `model`: REQUIRES the model outlives the map.
class ShardMap {
 public:
  // Validates both (InvalidArgument naming the field) and precomputes FSDP flat offsets.
  static absl::StatusOr<ShardMap> Build(const Model& model, const Layout& layout);

  int Ranks() const { return ranks_; }
  // Every rank holding a part of parameter `p`, in rank order.
  std::vector<Holding> Holders(int p) const;
  // The boxes rank `rank` holds of parameter `p` (empty when none).
  std::vector<Box> BoxesOf(int p, int rank) const;
  // Bytes of rank `rank`'s whole shard.
  int64_t ShardBytes(int rank) const;

 private:
  const Model* model_ = nullptr;
  Layout layout_;
  int ranks_ = 0;
  std::vector<int> group_first_rank_;
  // Per FSDP group: byte offset of each parameter in the flat buffer, and the shard size.
  std::vector<std::vector<int64_t>> flat_offset_;
  std::vector<int64_t> flat_shard_bytes_;

  void AddGroupHoldings(int g, int p, std::vector<Holding>& out) const;
};

// The stage of layer index `layer` (kPreLayers, kPostLayers allowed) under `mp`.
int StageOf(const ModelParallel& mp, int num_layers, int layer);

}  // namespace skyrl::weight_sync
