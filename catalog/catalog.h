// The model catalog: the supported-models table made data. One YAML file per table row under
// models/ (see docs/catalog.md for the schema and for how each printed row was read), plus
// models/hardware.yaml for the GPU types.
//
// Loading validates every field; an error names the file, the entry and the field
// ("models/kimi_k2_7.yaml: model Kimi-K2.7: arch.moe.experts: must be at least 1, got 0").
// A loaded Catalog is immutable: safe to share between threads for reading.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "catalog/hardware.h"

namespace skyrl::catalog {

enum class AttentionKind { kGqa, kMla };

// Softmax attention. GQA uses heads/kv_heads/head_dim; MLA (DeepSeek-style latent attention)
// uses the low-rank fields. `layers` 0 means the model has none.
struct Attention {
  AttentionKind kind = AttentionKind::kGqa;
  int layers = 0;
  int heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  bool qkv_bias = false;
  int q_lora_rank = 0;  // 0: queries projected directly from the hidden state
  int kv_lora_rank = 0;
  int qk_nope_dim = 0;
  int qk_rope_dim = 0;
  int v_head_dim = 0;
};

// Linear attention (Gated DeltaNet style): a fixed-size state per sequence, no per-token KV.
struct LinearAttention {
  int layers = 0;
  int qk_heads = 0;
  int v_heads = 0;
  int head_dim = 0;
};

// Mamba-2 mixer blocks (Nemotron-H style hybrids).
struct Mamba {
  int layers = 0;
  int d_inner = 0;
  int state = 0;
  int groups = 0;
  int heads = 0;
};

struct DenseFfn {
  int layers = 0;
  int64_t size = 0;
  bool gated = true;  // SwiGLU (3 matrices) or a plain 2-matrix MLP (squared ReLU, GELU)
};

struct Moe {
  int layers = 0;
  int experts = 0;
  int active = 0;  // routed experts per token
  int64_t expert_size = 0;
  int shared_experts = 0;
  int64_t shared_size = 0;  // defaults to expert_size
  bool gated = true;
};

// A ViT-style vision tower with a projector into the language model.
struct Vision {
  int layers = 0;
  int hidden = 0;
  int ffn = 0;
  int out_hidden = 0;
};

struct Architecture {
  int64_t hidden = 0;
  int64_t vocab = 0;
  bool tied_embeddings = false;
  Attention attention;
  LinearAttention linear_attention;
  Mamba mamba;
  DenseFfn ffn;
  Moe moe;
  int mtp_layers = 0;
  Vision vision;
};

// How a published parameter count was counted, so that ours is compared like for like.
// By default stated counts include embeddings and the vision tower and exclude MTP layers
// (DeepSeek's convention).
struct CountConvention {
  bool total_includes_mtp = false;
  enum class ActiveExcludes { kNone, kInputEmbedding, kEmbeddings };
  ActiveExcludes active_excludes = ActiveExcludes::kNone;
};

struct ModelEntry {
  std::string name;
  bool estimated = false;  // false: a public configuration
  std::string note;
  double stated_total = 0;   // parameters; from the table or the model card
  double stated_active = 0;  // 0: not stated (dense, or not given)
  CountConvention convention;
  Architecture arch;
};

enum class Support { kSupported, kUntested, kNotWorking };
enum class Mode { kFull, kLora };
enum class Placement { kSeparate, kColocated };

absl::string_view ModeName(Mode m);            // "full" | "lora"
absl::string_view ModeTitle(Mode m);           // "full fine-tuning" | "LoRA"
absl::string_view PlacementName(Placement p);  // "separate" | "colocated"
absl::string_view SupportName(Support s);      // "supported" | "untested" | "not_working"

// What the stated minimum hardware was read for: which size of the row, in which mode, with
// which placement. Verified by tests/catalog: the reference plans at the minimum and not below.
struct Reference {
  std::string model;
  Mode mode = Mode::kFull;
  Placement placement = Placement::kSeparate;
  // The training recipe (Assumptions::training_precision) the minimum was read for: bf16, or
  // a low-precision mode the row lists (fp8, mxfp8).
  std::string training_precision = "bf16";
  // The dtype of Adam's moments the minimum was read for (Assumptions::optimizer_state): "" for
  // the recipe's own, or fp32 | bf16 | fp8 (full fine-tuning on Megatron only).
  std::string optimizer_state;
  // true: the stated minimum is more than the model needs (it plans there, and also one step
  // below); tests then check the model's own minimum for the "refused below" half.
  bool conservative_minimum = false;
};

// One row of the supported-models tables.
struct Row {
  std::string file;     // path it was loaded from
  std::string family;   // the Model cell
  std::string table;    // "main" | "other"
  std::string printed;  // the row as printed (cells possibly shifted)
  std::string reading;  // how it was read
  Support full_ft = Support::kUntested;
  Support lora = Support::kUntested;
  std::vector<std::string> low_precision;  // fp8, mxfp8, fp8_rollout, int4_qat
  std::string status;                      // supported | expected
  std::vector<std::string> backends;       // fsdp | megatron
  HardwareSpec min_hardware;               // gpu "any" for "GPUs"
  Reference reference;
  // Set when the honest memory model cannot reproduce the stated minimum: why. The planner
  // then names its own minimum next to the table's.
  std::string conflict;
  std::string release_precision = "bf16";  // bf16 | int4 | mxfp4
  bool vision_trainable = false;
  std::string examples;
  std::vector<std::string> limitations;
  std::vector<ModelEntry> models;

  Support SupportFor(Mode m) const { return m == Mode::kFull ? full_ft : lora; }
};

class Catalog {
 public:
  // Loads every *.yaml under `dir` (hardware.yaml is the GPU list, every other file one row).
  static absl::StatusOr<Catalog> LoadDir(const std::string& dir);
  // For tests: one row from YAML text; `file` names it in errors.
  static absl::StatusOr<Row> ParseRow(const std::string& yaml_text, const std::string& file,
                                      const HardwareCatalog& hardware);

  const std::vector<Row>& rows() const { return rows_; }
  const HardwareCatalog& hardware() const { return hardware_; }

  struct Match {
    const Row* row;
    const ModelEntry* model;
  };
  // Finds a model by name, ignoring case, spaces, '-', '_' and '.' ("kimi k2.7" finds
  // Kimi-K2.7). NotFound lists the closest names.
  absl::StatusOr<Match> Find(absl::string_view name) const;

 private:
  std::vector<Row> rows_;
  HardwareCatalog hardware_;
};

// The default models/ folder: $SKYRL_MODELS_DIR, else the source tree's models/.
std::string DefaultModelsDir();

}  // namespace skyrl::catalog
