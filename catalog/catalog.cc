#include "catalog/catalog.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "catalog/yaml_fields.h"

namespace skyrl::catalog {
namespace {

using internal::Fields;

Support ParseSupport(Fields& f, const char* key) {
  std::string s = f.Enum(key, true, {"supported", "untested", "not_working"});
  if (s == "supported") return Support::kSupported;
  if (s == "not_working") return Support::kNotWorking;
  return Support::kUntested;
}

Architecture ParseArch(Fields a) {
  a.OnlyKeys({"hidden", "vocab", "tied_embeddings", "attention", "linear_attention", "mamba", "ffn", "moe",
              "mtp_layers", "vision"});
  Architecture arch;
  arch.hidden = a.Int("hidden", true);
  arch.vocab = a.Int("vocab", true);
  arch.tied_embeddings = a.Bool("tied_embeddings", false);
  arch.mtp_layers = static_cast<int>(a.Int("mtp_layers", false, 0, 0));
  if (a.present("attention")) {
    Fields f = a.Sub("attention", true);
    f.OnlyKeys({"kind", "layers", "heads", "kv_heads", "head_dim", "qkv_bias", "q_lora_rank", "kv_lora_rank",
                "qk_nope_dim", "qk_rope_dim", "v_head_dim"});
    Attention& at = arch.attention;
    at.kind = f.Enum("kind", true, {"gqa", "mla"}) == "mla" ? AttentionKind::kMla : AttentionKind::kGqa;
    at.layers = static_cast<int>(f.Int("layers", true));
    at.heads = static_cast<int>(f.Int("heads", true));
    if (at.kind == AttentionKind::kGqa) {
      at.kv_heads = static_cast<int>(f.Int("kv_heads", true));
      at.head_dim = static_cast<int>(f.Int("head_dim", true));
      at.qkv_bias = f.Bool("qkv_bias", false);
      if (f.status().ok() && at.heads % at.kv_heads != 0)
        f.Fail(f.Path("kv_heads"), absl::StrCat("must divide heads (", at.heads, "), got ", at.kv_heads));
    } else {
      at.q_lora_rank = static_cast<int>(f.Int("q_lora_rank", false, 0, 0));
      at.kv_lora_rank = static_cast<int>(f.Int("kv_lora_rank", true));
      at.qk_nope_dim = static_cast<int>(f.Int("qk_nope_dim", true));
      at.qk_rope_dim = static_cast<int>(f.Int("qk_rope_dim", true));
      at.v_head_dim = static_cast<int>(f.Int("v_head_dim", true));
    }
  }
  if (a.present("linear_attention")) {
    Fields f = a.Sub("linear_attention", true);
    f.OnlyKeys({"layers", "qk_heads", "v_heads", "head_dim"});
    arch.linear_attention = {
        static_cast<int>(f.Int("layers", true)), static_cast<int>(f.Int("qk_heads", true)),
        static_cast<int>(f.Int("v_heads", true)), static_cast<int>(f.Int("head_dim", true))};
  }
  if (a.present("mamba")) {
    Fields f = a.Sub("mamba", true);
    f.OnlyKeys({"layers", "d_inner", "state", "groups", "heads"});
    arch.mamba = {static_cast<int>(f.Int("layers", true)), static_cast<int>(f.Int("d_inner", true)),
                  static_cast<int>(f.Int("state", true)), static_cast<int>(f.Int("groups", true)),
                  static_cast<int>(f.Int("heads", true))};
  }
  if (a.present("ffn")) {
    Fields f = a.Sub("ffn", true);
    f.OnlyKeys({"dense_layers", "size", "gated"});
    arch.ffn.layers = static_cast<int>(f.Int("dense_layers", true));
    arch.ffn.size = f.Int("size", true);
    arch.ffn.gated = f.Bool("gated", true);
  }
  if (a.present("moe")) {
    Fields f = a.Sub("moe", true);
    f.OnlyKeys({"layers", "experts", "active", "expert_size", "shared_experts", "shared_size", "gated"});
    Moe& m = arch.moe;
    m.layers = static_cast<int>(f.Int("layers", true));
    m.experts = static_cast<int>(f.Int("experts", true));
    m.active = static_cast<int>(f.Int("active", true));
    m.expert_size = f.Int("expert_size", true);
    m.shared_experts = static_cast<int>(f.Int("shared_experts", false, 0, 0));
    m.shared_size = f.Int("shared_size", false, 0);
    m.gated = f.Bool("gated", true);
    if (f.status().ok() && m.active > m.experts)
      f.Fail(f.Path("active"), absl::StrCat("must not exceed experts (", m.experts, "), got ", m.active));
  }
  if (a.present("vision")) {
    Fields f = a.Sub("vision", true);
    f.OnlyKeys({"layers", "hidden", "ffn", "out_hidden"});
    arch.vision = {static_cast<int>(f.Int("layers", true)), static_cast<int>(f.Int("hidden", true)),
                   static_cast<int>(f.Int("ffn", true)), static_cast<int>(f.Int("out_hidden", true))};
  }
  if (a.status().ok() && arch.attention.layers + arch.linear_attention.layers + arch.mamba.layers == 0)
    a.Fail("arch", "needs at least one mixer (attention, linear_attention or mamba)");
  if (a.status().ok() && arch.ffn.layers + arch.moe.layers == 0) a.Fail("arch", "needs ffn or moe layers");
  return arch;
}

ModelEntry ParseModel(const YAML::Node& node, const std::string& file, std::size_t index,
                      absl::Status* error) {
  std::string name =
      node.IsMap() && node["name"].IsScalar() ? node["name"].Scalar() : absl::StrCat("#", index);
  Fields f(node, absl::StrCat(file, ": model ", name), "");
  f.OnlyKeys({"name", "source", "note", "stated_total", "stated_active", "count_convention", "arch"});
  ModelEntry m;
  m.name = f.Str("name", true);
  m.estimated = f.Enum("source", true, {"public", "estimated"}) == "estimated";
  m.note = f.Str("note", false);
  m.stated_total = f.Count("stated_total", true);
  m.stated_active = f.Count("stated_active", false);
  if (f.present("count_convention")) {
    Fields cc = f.Sub("count_convention", true);
    cc.OnlyKeys({"total_includes_mtp", "active_excludes"});
    m.convention.total_includes_mtp = cc.Bool("total_includes_mtp", false);
    std::string ex = cc.Enum("active_excludes", false, {"none", "input_embedding", "embeddings"}, "none");
    m.convention.active_excludes = ex == "input_embedding" ? CountConvention::ActiveExcludes::kInputEmbedding
                                   : ex == "embeddings"    ? CountConvention::ActiveExcludes::kEmbeddings
                                                           : CountConvention::ActiveExcludes::kNone;
  }
  m.arch = ParseArch(f.Sub("arch", true));
  if (f.status().ok() && m.stated_active > 0 && m.arch.moe.layers == 0)
    f.Fail("stated_active", "given for a model without moe layers");
  *error = f.status();
  return m;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Normalize(absl::string_view s) {
  std::string out;
  for (char c : s)
    if (c != ' ' && c != '-' && c != '_' && c != '.')
      out += absl::ascii_tolower(static_cast<unsigned char>(c));
  return out;
}

}  // namespace

absl::string_view ModeName(Mode m) { return m == Mode::kFull ? "full" : "lora"; }
absl::string_view ModeTitle(Mode m) { return m == Mode::kFull ? "full fine-tuning" : "LoRA"; }
absl::string_view PlacementName(Placement p) { return p == Placement::kSeparate ? "separate" : "colocated"; }
absl::string_view SupportName(Support s) {
  switch (s) {
    case Support::kSupported:
      return "supported";
    case Support::kUntested:
      return "untested";
    case Support::kNotWorking:
      return "not_working";
  }
  return "?";
}

absl::StatusOr<Row> Catalog::ParseRow(const std::string& yaml_text, const std::string& file,
                                      const HardwareCatalog& hardware) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": not valid YAML: line ", e.mark.line + 1,
                                                   ", column ", e.mark.column + 1, ": ", e.msg));
  }
  Fields f(root, file, "");
  f.OnlyKeys({"family", "table", "printed", "reading", "support", "status", "backends", "min_hardware",
              "reference", "conflict", "release_precision", "vision_trainable", "examples", "limitations",
              "models"});
  Row row;
  row.file = file;
  row.family = f.Str("family", true);
  row.table = f.Enum("table", true, {"main", "other"});
  row.printed = f.Str("printed", true);
  row.reading = f.Str("reading", true);
  {
    Fields s = f.Sub("support", true);
    s.OnlyKeys({"full_ft", "lora", "low_precision"});
    row.full_ft = ParseSupport(s, "full_ft");
    row.lora = ParseSupport(s, "lora");
    row.low_precision = s.StrList("low_precision", false);
    for (const std::string& lp : row.low_precision)
      if (lp != "fp8" && lp != "mxfp8" && lp != "fp8_rollout" && lp != "int4_qat")
        s.Fail(s.Path("low_precision"),
               absl::StrCat("unknown mode \"", lp, "\" (known: fp8, mxfp8, fp8_rollout, int4_qat)"));
  }
  row.status = f.Enum("status", true, {"supported", "expected"});
  row.backends = f.StrList("backends", true);
  for (const std::string& b : row.backends)
    if (b != "fsdp" && b != "megatron")
      f.Fail("backends", absl::StrCat("unknown backend \"", b, "\" (fsdp, megatron)"));
  std::string mh = f.Str("min_hardware", true);
  row.conflict = f.Str("conflict", false);
  row.release_precision = f.Enum("release_precision", false, {"bf16", "int4", "mxfp4"}, "bf16");
  row.vision_trainable = f.Bool("vision_trainable", false);
  row.examples = f.Str("examples", false);
  row.limitations = f.StrList("limitations", false);
  {
    Fields r = f.Sub("reference", true);
    r.OnlyKeys({"model", "mode", "placement", "training_precision", "optimizer_state", "minimum"});
    row.reference.model = r.Str("model", true);
    row.reference.mode = r.Enum("mode", true, {"full", "lora"}) == "lora" ? Mode::kLora : Mode::kFull;
    row.reference.placement = r.Enum("placement", false, {"separate", "colocated"}, "separate") == "colocated"
                                  ? Placement::kColocated
                                  : Placement::kSeparate;
    row.reference.training_precision = r.Enum("training_precision", false, {"bf16", "fp8", "mxfp8"}, "bf16");
    row.reference.optimizer_state = r.Enum("optimizer_state", false, {"fp32", "bf16", "fp8"}, "");
    row.reference.conservative_minimum =
        r.Enum("minimum", false, {"exact", "conservative"}, "exact") == "conservative";
  }
  if (!f.status().ok()) return f.status();
  if (row.backends.empty())
    return absl::InvalidArgumentError(absl::StrCat(file, ": backends: must not be empty"));
  absl::StatusOr<HardwareSpec> h = ParseHardwareSpec(mh, absl::StrCat(file, ": min_hardware"));
  if (!h.ok()) return h.status();
  if (h->gpu != "any") {
    absl::StatusOr<GpuType> g = hardware.Find(h->gpu);
    if (!g.ok())
      return absl::InvalidArgumentError(absl::StrCat(file, ": min_hardware: ", g.status().message()));
    h->gpu = g->name;
  }
  row.min_hardware = *h;
  if (row.full_ft != Support::kSupported && row.lora != Support::kSupported && row.status == "supported")
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": support: a supported row needs full_ft or lora supported"));

  YAML::Node models = root["models"];
  if (!models.IsDefined() || !models.IsSequence() || models.size() == 0)
    return absl::InvalidArgumentError(absl::StrCat(file, ": models: must be a non-empty list"));
  for (std::size_t i = 0; i < models.size(); ++i) {
    absl::Status err;
    ModelEntry m = ParseModel(models[i], file, i, &err);
    if (!err.ok()) return err;
    for (const ModelEntry& o : row.models)
      if (o.name == m.name)
        return absl::InvalidArgumentError(absl::StrCat(file, ": model ", m.name, ": name: appears twice"));
    row.models.push_back(std::move(m));
  }
  bool found = false;
  for (const ModelEntry& m : row.models) found = found || m.name == row.reference.model;
  if (!found)
    return absl::InvalidArgumentError(absl::StrCat(file, ": reference.model: \"", row.reference.model,
                                                   "\" is not one of this row's models"));
  if (row.reference.training_precision != "bf16" &&
      std::find(row.low_precision.begin(), row.low_precision.end(), row.reference.training_precision) ==
          row.low_precision.end())
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": reference.training_precision: ", row.reference.training_precision,
                     " is not in support.low_precision"));
  if (!row.reference.optimizer_state.empty() && row.reference.mode != Mode::kFull)
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": reference.optimizer_state: only for full fine-tuning (mode: full)"));
  if (!row.reference.optimizer_state.empty() &&
      std::find(row.backends.begin(), row.backends.end(), "megatron") == row.backends.end())
    return absl::InvalidArgumentError(absl::StrCat(file,
                                                   ": reference.optimizer_state: needs the megatron backend "
                                                   "(Megatron-Core's precision-aware optimizer)"));
  if (row.reference.conservative_minimum && !row.conflict.empty())
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": reference.minimum: a conservative minimum and a conflict exclude each other"));
  if (row.SupportFor(row.reference.mode) == Support::kNotWorking)
    return absl::InvalidArgumentError(absl::StrCat(file, ": reference.mode: ", ModeName(row.reference.mode),
                                                   " is marked not_working for this row"));
  return row;
}

absl::StatusOr<Catalog> Catalog::LoadDir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return absl::NotFoundError(absl::StrCat("models directory ", dir, " not found"));
  Catalog cat;
  absl::StatusOr<HardwareCatalog> hw = HardwareCatalog::Load((fs::path(dir) / "hardware.yaml").string());
  if (!hw.ok()) return hw.status();
  cat.hardware_ = std::move(*hw);
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (e.path().extension() == ".yaml" && name != "hardware.yaml") files.push_back(e.path().string());
  }
  if (ec) return absl::InternalError(absl::StrCat("cannot list ", dir, ": ", ec.message()));
  std::sort(files.begin(), files.end());
  for (const std::string& file : files) {
    absl::StatusOr<std::string> text = ReadFile(file);
    if (!text.ok()) return text.status();
    absl::StatusOr<Row> row = ParseRow(*text, file, cat.hardware_);
    if (!row.ok()) return row.status();
    for (const Row& other : cat.rows_)
      for (const ModelEntry& a : other.models)
        for (const ModelEntry& b : row->models)
          if (Normalize(a.name) == Normalize(b.name))
            return absl::InvalidArgumentError(
                absl::StrCat(file, ": model ", b.name, ": name: already defined in ", other.file));
    cat.rows_.push_back(std::move(*row));
  }
  if (cat.rows_.empty()) return absl::NotFoundError(absl::StrCat("no model rows (*.yaml) in ", dir));
  return cat;
}

absl::StatusOr<Catalog::Match> Catalog::Find(absl::string_view name) const {
  std::string want = Normalize(name);
  if (want.empty()) return absl::InvalidArgumentError("--model: must not be empty");
  std::vector<std::string> close;
  for (const Row& r : rows_)
    for (const ModelEntry& m : r.models) {
      std::string have = Normalize(m.name);
      if (have == want) return Match{&r, &m};
      if (have.find(want) != std::string::npos || want.find(Normalize(r.family)) == 0)
        close.push_back(m.name);
    }
  if (close.size() == 1) {
    for (const Row& r : rows_)
      for (const ModelEntry& m : r.models)
        if (m.name == close[0]) return Match{&r, &m};
  }
  if (close.empty())
    return absl::NotFoundError(
        absl::StrCat("--model: no model named \"", name, "\" (skyrl plan --list shows them)"));
  return absl::NotFoundError(
      absl::StrCat("--model: \"", name,
                   "\" is ambiguous or unknown; did you mean one of: ", absl::StrJoin(close, ", "), "?"));
}

std::string DefaultModelsDir() {
  if (const char* env = std::getenv("SKYRL_MODELS_DIR"); env != nullptr && *env != '\0') return env;
  return SKYRL_SOURCE_MODELS_DIR;
}

}  // namespace skyrl::catalog
