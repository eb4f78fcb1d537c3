#include "catalog/render.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "catalog/capacity_planner.h"
#include "catalog/params.h"

namespace skyrl::catalog {
namespace {

constexpr double kGB = 1e9;

std::string Gb(double bytes) { return absl::StrFormat("%.1f", bytes / kGB); }
std::string Billions(double n) {
  return n >= 1e12 ? absl::StrFormat("%.2fT", n / 1e12) : absl::StrFormat("%.2fB", n / 1e9);
}

nlohmann::json MemoryJson(const MemoryBreakdown& m) {
  return {{"weights_gb", m.weights / kGB},     {"gradients_gb", m.gradients / kGB},
          {"optimizer_gb", m.optimizer / kGB}, {"adapters_gb", m.adapters / kGB},
          {"gathered_gb", m.gathered / kGB},   {"activations_gb", m.activations / kGB},
          {"kv_cache_gb", m.kv_cache / kGB},   {"overhead_gb", m.overhead / kGB},
          {"host_gb", m.host / kGB},           {"total_gb", m.total() / kGB}};
}

void MemoryRows(std::string* out, const char* who, const MemoryBreakdown& m, double usable) {
  absl::StrAppend(out, absl::StrFormat("  %-10s weights %7s  grads %7s  optim %7s  adapters %6s  gathered "
                                       "%6s  act %6s  kv %6s  overhead %4s  | total %7s of %s GB\n",
                                       who, Gb(m.weights), Gb(m.gradients), Gb(m.optimizer), Gb(m.adapters),
                                       Gb(m.gathered), Gb(m.activations), Gb(m.kv_cache), Gb(m.overhead),
                                       Gb(m.total()), Gb(usable)));
}

}  // namespace

// The full fine-tuning recipe in effect ("bf16" for LoRA, whose base stays bf16).
std::string TrainingName(const Plan& p) { return p.mode == Mode::kLora ? "bf16" : p.recipe.name; }

// The full fine-tuning state in effect: the moments' dtype and bytes per trainable parameter
// (weights + gradients + optimizer). With the optimizer partly in host memory it is the CPU
// optimizer's (fp32 moments, kHybridOptimizerBytes); nullopt for LoRA.
struct StateFacts {
  std::string moments;
  double bytes_per_param = 0;
};
std::optional<StateFacts> FullStateOf(const Plan& p) {
  if (p.mode != Mode::kFull) return std::nullopt;
  TrainingPrecision recipe = p.recipe;  // resolved once by the planner
  if (p.trainer.shape.offload_fraction > 0) {
    recipe.optimizer_state = "fp32";
    recipe.optimizer_bytes = kHybridOptimizerBytes;
  }
  return StateFacts{recipe.optimizer_state, recipe.BytesPerParam(p.assumptions.grad_bytes)};
}

std::string RenderPlanText(const Plan& p) {
  std::string out;
  ParamCounts c = CountParams(p.model->arch);
  absl::StrAppend(&out, p.model->name, " (", p.row->family, "): ", ModeTitle(p.mode), " on ",
                  p.cluster.shape.Describe(), ", ", PlacementName(p.placement), " pools\n");
  absl::StrAppend(&out, "  parameters: ", Billions(c.total()), " total, ", Billions(c.active()), " active",
                  p.model->estimated ? " (architecture estimated)" : "", "\n");
  absl::StrAppend(&out, absl::StrFormat("  assumptions: seq %d tokens x micro-batch %d, KV for %d sequences "
                                        "per engine, %.0f%% of HBM usable\n",
                                        p.assumptions.seq_len, p.assumptions.micro_batch,
                                        p.assumptions.kv_sequences, p.assumptions.usable_fraction * 100));
  const TrainerShape& t = p.trainer.shape;
  absl::StrAppend(&out, "\n  role       GPUs  layout                         \n");
  std::optional<StateFacts> state = FullStateOf(p);
  absl::StrAppend(
      &out,
      absl::StrFormat("  trainer    %4d  %s TP%d PP%d EP%d DP%d%s%s%s\n", t.gpus, t.backend, t.tp, t.pp, t.ep,
                      t.dp, TrainingName(p) == "bf16" ? "" : ", " + TrainingName(p) + " training",
                      state ? absl::StrFormat(", %s Adam moments over an fp32 master (%.4g B per parameter)",
                                              state->moments, state->bytes_per_param)
                            : "",
                      t.offload_fraction > 0
                          ? absl::StrFormat(", optimizer %.0f%% in host memory", t.offload_fraction * 100)
                          : ""));
  absl::StrAppend(&out,
                  absl::StrFormat("  generator  %4d  %d engine(s) x TP%d, %s weights\n", p.generator.gpus,
                                  p.generator.engines, p.generator.tp, p.generator.precision.name));
  absl::StrAppend(&out, "\n  memory per GPU (GB)\n");
  MemoryRows(&out, "trainer", p.trainer.memory, p.usable_bytes_per_gpu);
  MemoryRows(&out, "generator", p.generator.memory, p.usable_bytes_per_gpu);
  if (OffloadFacts f = OffloadFactsOf(p); f.fraction > 0)
    absl::StrAppend(
        &out,
        absl::StrFormat("  host       optimizer %.1f GB per trainer GPU, %.1f GB per node of %.1f GB usable "
                        "(%.0f GB per node)\n",
                        f.host_per_gpu / kGB, f.host_per_node / kGB, f.host_usable_per_node / kGB,
                        p.cluster.host_memory_gb));
  // Each group with where the scheduler placed it (PlaceGroups on the plan's cluster).
  absl::StrAppend(&out, "\n  placement groups (placed by the scheduler on a simulated ",
                  p.cluster.shape.ToString(), ")\n");
  for (const PlannedGroup& pg : p.groups) {
    const PlacementGroupSpec& g = pg.spec;
    const BundleSpec& b = g.bundles.front();
    absl::StrAppend(&out, absl::StrFormat("  %-14s %-11s %3d x {GPU: %g, CPU: %g} accelerator=%s%s%s  %s\n",
                                          g.name, g.strategy, g.bundles.size(), b.gpu, b.cpu,
                                          b.selector.at(std::string(kAcceleratorLabel)),
                                          g.domain_label.empty() ? "" : " same " + g.domain_label,
                                          g.affinity_group.empty() ? "" : " near " + g.affinity_group,
                                          DescribePlacement(pg.placement)));
  }
  const WeightSyncBound& w = p.weight_sync;
  if (w.planned) {
    const SyncPlanSummary& s = *w.planned;
    absl::StrAppend(&out, absl::StrFormat("\n  weight sync: %s -> %s, %s\n", s.sender_layout,
                                          s.receiver_layout, s.synced));
    absl::StrAppend(&out, absl::StrFormat("    moves %.2f GB (%d parameters, %d senders -> %d receivers)\n",
                                          s.bytes / kGB, s.params, s.senders, s.receivers));
    absl::StrAppend(
        &out, absl::StrFormat("    predicted %.3f s, lower bound %.3f s (ratio %.3f); planned in %.0f ms\n",
                              s.predicted_s, s.lower_bound_s,
                              s.lower_bound_s > 0 ? s.predicted_s / s.lower_bound_s : 1.0, s.planning_ms));
    absl::StrAppend(
        &out,
        absl::StrFormat(
            "    bandwidth-only estimate: %.3f s (%.1f GB of bf16 weights per engine over %s at %.0f GB/s)\n",
            w.bandwidth_estimate_s, 2 * (c.total()) / kGB, w.link, w.link_gb_s));
  } else {
    absl::StrAppend(
        &out, absl::StrFormat("\n  weight sync: %.1f GB per engine over %s (%.0f GB/s per GPU): >= %.2f s\n",
                              w.bytes / kGB, w.link, w.link_gb_s, w.lower_bound_s));
  }
  if (w.predicted_s && !w.planned)
    absl::StrAppend(&out, absl::StrFormat("    predicted: %.2f s\n", *w.predicted_s));
  absl::StrAppend(&out, "    ", p.weight_sync.note, "\n");
  if (!p.notes.empty()) {
    absl::StrAppend(&out, "\n  notes\n");
    for (const std::string& n : p.notes) absl::StrAppend(&out, "  - ", n, "\n");
  }
  return out;
}

std::string RenderPlanJson(const Plan& p) {
  ParamCounts c = CountParams(p.model->arch);
  nlohmann::json j;
  j["ok"] = true;
  j["model"] = p.model->name;
  j["family"] = p.row->family;
  j["mode"] = std::string(ModeName(p.mode));
  j["placement"] = std::string(PlacementName(p.placement));
  j["cluster"] = {{"nodes", p.cluster.shape.nodes},
                  {"gpus_per_node", p.cluster.shape.gpus_per_node},
                  {"gpu", p.cluster.gpu.name},
                  {"cpus_per_node", p.cluster.cpus_per_node},
                  {"host_memory_gb", p.cluster.host_memory_gb},
                  {"host_usable_fraction", p.cluster.host_usable_fraction},
                  {"memory_gb", p.cluster.gpu.memory_gb},
                  {"usable_gb_per_gpu", p.usable_bytes_per_gpu / kGB}};
  j["parameters"] = {{"total", c.total()},
                     {"active", c.active()},
                     {"mtp", c.mtp},
                     {"vision", c.vision},
                     {"estimated", p.model->estimated}};
  j["assumptions"] = {
      {"seq_len", p.assumptions.seq_len},           {"micro_batch", p.assumptions.micro_batch},
      {"kv_sequences", p.assumptions.kv_sequences}, {"usable_fraction", p.assumptions.usable_fraction},
      {"context_gb", p.assumptions.context_gb},     {"lora_rank", p.assumptions.lora_rank},
      {"grad_bytes", p.assumptions.grad_bytes},     {"mtp_enabled", p.assumptions.enable_mtp}};
  const TrainerShape& t = p.trainer.shape;
  j["trainer"] = {{"backend", t.backend},
                  {"gpus", t.gpus},
                  {"tp", t.tp},
                  {"pp", t.pp},
                  {"ep", t.ep},
                  {"dp", t.dp},
                  {"training_precision", TrainingName(p)},
                  {"memory_per_gpu", MemoryJson(p.trainer.memory)}};
  // Full fine-tuning: Adam's moments' dtype and the state per trainable parameter; null for LoRA.
  std::optional<StateFacts> state = FullStateOf(p);
  j["trainer"]["optimizer_state"] = state ? nlohmann::json(state->moments) : nlohmann::json(nullptr);
  j["trainer"]["state_bytes_per_param"] =
      state ? nlohmann::json(state->bytes_per_param) : nlohmann::json(nullptr);
  if (OffloadFacts f = OffloadFactsOf(p); f.fraction > 0)
    j["trainer"]["optimizer_offload"] = {{"fraction", f.fraction},
                                         {"host_gb_per_gpu", f.host_per_gpu / kGB},
                                         {"host_gb_per_node", f.host_per_node / kGB},
                                         {"host_usable_gb_per_node", f.host_usable_per_node / kGB},
                                         {"host_bytes_per_param", kHybridOptimizerBytes},
                                         {"transfer_gb_per_gpu_each_way", f.transfer_per_gpu / kGB},
                                         {"transfer_s_each_way", f.transfer_s}};
  else
    j["trainer"]["optimizer_offload"] = nullptr;
  j["generator"] = {{"gpus", p.generator.gpus},
                    {"tp", p.generator.tp},
                    {"engines", p.generator.engines},
                    {"precision", p.generator.precision.name},
                    {"memory_per_gpu", MemoryJson(p.generator.memory)}};
  // Per bundle: what it asks and where the scheduler placed it (node index and id, device ids).
  nlohmann::json groups = nlohmann::json::array();
  for (const PlannedGroup& pg : p.groups) {
    const PlacementGroupSpec& g = pg.spec;
    nlohmann::json bundles = nlohmann::json::array();
    for (size_t k = 0; k < g.bundles.size(); ++k) {
      const BundleSpec& b = g.bundles[k];
      nlohmann::json bj = {{"resources", {{"GPU", b.gpu}, {"CPU", b.cpu}}}, {"selector", b.selector}};
      if (k < pg.placement.bundles.size()) {  // always, for a plan (PlaceGroups places every bundle)
        const BundlePlacement& at = pg.placement.bundles[k];
        bj["node"] = at.node;
        bj["node_id"] = at.node_id;
        bj["gpu_ids"] = at.gpu_ids;
      }
      bundles.push_back(std::move(bj));
    }
    groups.push_back({{"name", g.name},
                      {"strategy", g.strategy},
                      {"domain_label", g.domain_label},
                      {"affinity_group", g.affinity_group},
                      {"bundles", bundles},
                      {"placement", DescribePlacement(pg.placement)}});
  }
  j["placement_groups"] = groups;
  j["weight_sync"] = {{"bytes", p.weight_sync.bytes},
                      {"link", p.weight_sync.link},
                      {"link_gb_s", p.weight_sync.link_gb_s},
                      {"lower_bound_s", p.weight_sync.lower_bound_s},
                      {"bandwidth_estimate_s", p.weight_sync.bandwidth_estimate_s},
                      {"predicted_s", p.weight_sync.predicted_s ? nlohmann::json(*p.weight_sync.predicted_s)
                                                                : nlohmann::json(nullptr)},
                      {"note", p.weight_sync.note}};
  if (p.weight_sync.planned) {
    const SyncPlanSummary& s = *p.weight_sync.planned;
    j["weight_sync"]["plan"] = {{"senders", s.senders},
                                {"receivers", s.receivers},
                                {"sender_layout", s.sender_layout},
                                {"receiver_layout", s.receiver_layout},
                                {"synced", s.synced},
                                {"bytes", s.bytes},
                                {"params", s.params},
                                {"predicted_s", s.predicted_s},
                                {"lower_bound_s", s.lower_bound_s},
                                {"planning_ms", s.planning_ms},
                                {"replicated_for_tp", s.replicated_for_tp}};
  } else {
    j["weight_sync"]["plan"] = nullptr;
  }
  j["notes"] = p.notes;
  return j.dump(2);
}

std::string RenderErrorJson(const absl::Status& s) {
  nlohmann::json j;
  j["ok"] = false;
  j["code"] = absl::StatusCodeToString(s.code());
  j["error"] = std::string(s.message());
  return j.dump(2);
}

namespace {

// The model's own minimum in its row's reference mode, placement and training recipe, on the
// row's GPU type.
std::string OwnMinimum(const Catalog& c, const Row& r, const ModelEntry& m) {
  Cluster min = StatedMinimum(c, r);
  PlanRequest opts;
  UseReferenceRecipe(r, &opts.assumptions);  // the recipe the row's minimum was read for
  std::optional<HardwareSpec> own =
      MinimumHardware(c, r, m, r.reference.mode, min.gpu, r.reference.placement, opts);
  return own ? own->ToString() : "-";
}

}  // namespace

std::string RenderCatalogText(const Catalog& c) {
  std::string out = absl::StrFormat("%-32s %-26s %10s %10s %-11s %-11s %-11s %-12s %s\n", "model", "row",
                                    "total", "active", "full FT", "LoRA", "row min", "own min", "source");
  for (const Row& r : c.rows())
    for (const ModelEntry& m : r.models) {
      ParamCounts pc = CountParams(m.arch);
      absl::StrAppend(&out,
                      absl::StrFormat("%-32s %-26s %10s %10s %-11s %-11s %-11s %-12s %s\n", m.name, r.family,
                                      Billions(pc.total()), Billions(pc.active()), SupportName(r.full_ft),
                                      SupportName(r.lora), r.min_hardware.ToString(), OwnMinimum(c, r, m),
                                      m.estimated ? "estimated" : "public"));
    }
  absl::StrAppend(&out,
                  "\nown min: the smallest cluster of the row's GPU type that fits the model in the row's "
                  "reference mode and placement (see docs/catalog.md)\n");
  return out;
}

std::string RenderCatalogJson(const Catalog& c) {
  nlohmann::json rows = nlohmann::json::array();
  for (const Row& r : c.rows()) {
    nlohmann::json models = nlohmann::json::array();
    for (const ModelEntry& m : r.models) {
      ParamCounts pc = CountParams(m.arch);
      models.push_back({{"name", m.name},
                        {"total", pc.total()},
                        {"active", pc.active()},
                        {"stated_total", m.stated_total},
                        {"stated_active", m.stated_active},
                        {"own_min_hardware", OwnMinimum(c, r, m)},
                        {"estimated", m.estimated}});
    }
    rows.push_back({{"family", r.family},
                    {"table", r.table},
                    {"full_ft", std::string(SupportName(r.full_ft))},
                    {"lora", std::string(SupportName(r.lora))},
                    {"low_precision", r.low_precision},
                    {"min_hardware", r.min_hardware.ToString()},
                    {"status", r.status},
                    {"reading", r.reading},
                    {"limitations", r.limitations},
                    {"models", models}});
  }
  return nlohmann::json({{"rows", rows}}).dump(2);
}

}  // namespace skyrl::catalog
