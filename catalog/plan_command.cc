#include "catalog/plan_command.h"

#include "catalog/verify_sync.h"

#include "absl/strings/str_cat.h"
#include "catalog/capacity_planner.h"
#include "catalog/catalog.h"
#include "catalog/render.h"

namespace skyrl::catalog {

void AddPlanFlags(CLI::App* cmd, PlanCommandOptions* o) {
  cmd->add_option("--model", o->model, "model name, e.g. Kimi-K2.7 or Qwen3-8B (--list shows them)");
  cmd->add_option("--mode", o->mode, "full | lora (default: full where supported, else lora)")
      ->check(CLI::IsMember({"full", "lora"}));
  cmd->add_option("--cluster", o->cluster,
                  "NODESxGPUSxTYPE (2x8xB200) or a cluster YAML file (default: the table's minimum)");
  cmd->add_flag("--colocate", o->colocate, "trainer and generator share every GPU (default: separate pools)");
  cmd->add_flag("--json", o->json, "machine-readable output");
  cmd->add_flag("--list", o->list, "list the catalog's models");
  cmd->add_flag(
      "--verify", o->verify,
      "also sync a scaled-down copy of the model from the plan's trainer layout to its engines over TCP, "
      "every rank its own process, and check every engine byte");
  cmd->add_flag("--mtp", o->mtp, "train and serve the MTP layers (trainer.mtp.enabled=true)");
  cmd->add_option("--backend", o->backend,
                  "fsdp | megatron (default: megatron for MoE and >40B where offered)")
      ->check(CLI::IsMember({"fsdp", "megatron"}));
  cmd->add_option("--rollout-precision", o->rollout_precision,
                  "bf16 | fp8 | int4 | mxfp4 (default: lowest supported)");
  cmd->add_option("--training-precision", o->training_precision,
                  "bf16 | fp8 | mxfp8: full fine-tuning state (fp8/mxfp8: FP8 parameters, bf16 Adam moments; "
                  "rows that list them)")
      ->check(CLI::IsMember({"bf16", "fp8", "mxfp8"}));
  cmd->add_option(
         "--optimizer-state", o->optimizer_state,
         "fp32 | bf16 | fp8: dtype of Adam's moments in full fine-tuning, over an fp32 master (default: the "
         "training precision's own, fp32 for bf16 and bf16 for fp8/mxfp8; other values need Megatron-Core's "
         "precision-aware optimizer)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp8"}));
  cmd->add_flag(
      "--optimizer-offload", o->optimizer_offload,
      "full fine-tuning on Megatron: when the trainer does not fit the GPUs, run part of the optimizer "
      "in host memory (Megatron-Core's CPU optimizer; host memory from hardware.yaml or host_memory_gb in a "
      "cluster file)");
  cmd->add_option("--models-dir", o->models_dir,
                  "catalog folder (default: $SKYRL_MODELS_DIR or the source tree's models/)");
  cmd->add_option("--seq-len", o->seq_len, "prompt + response tokens per sequence")
      ->check(CLI::Range(int64_t{256}, int64_t{1} << 21));
  cmd->add_option("--micro-batch", o->micro_batch, "sequences per trainer micro-batch")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--kv-sequences", o->kv_sequences, "sequences each engine keeps in KV cache")
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--lora-rank", o->lora_rank, "LoRA rank")->check(CLI::Range(1, 4096));
}

int RunPlanCommand(const PlanCommandOptions& o, std::ostream& out, std::ostream& err) {
  auto fail = [&](const absl::Status& s, int code) {
    if (o.json)
      out << RenderErrorJson(s) << "\n";
    else
      err << "skyrl plan: " << s.message() << "\n";
    return code;
  };
  absl::StatusOr<Catalog> catalog =
      Catalog::LoadDir(o.models_dir.empty() ? DefaultModelsDir() : o.models_dir);
  if (!catalog.ok()) return fail(catalog.status(), 2);
  if (o.list && o.verify) {
    std::vector<RowCheck> rows;
    bool all = true;
    for (const Row& r : catalog->rows()) {
      rows.push_back(CheckRow(*catalog, r));
      all = all && rows.back().plans_at_minimum && rows.back().refused_below && rows.back().weights_verified;
    }
    out << RenderRowChecks(rows);
    return all ? 0 : 3;
  }
  if (o.list) {
    out << (o.json ? RenderCatalogJson(*catalog) + "\n" : RenderCatalogText(*catalog));
    return 0;
  }
  if (o.model.empty()) return fail(absl::InvalidArgumentError("--model: required (or --list)"), 2);
  PlanRequest req;
  req.model = o.model;
  if (!o.mode.empty()) req.mode = o.mode == "lora" ? Mode::kLora : Mode::kFull;
  if (!o.cluster.empty()) {
    absl::StatusOr<Cluster> c = ParseCluster(o.cluster, catalog->hardware());
    if (!c.ok()) return fail(c.status(), 2);
    req.cluster = *c;
  }
  req.colocate = o.colocate;
  req.backend = o.backend;
  req.rollout_precision = o.rollout_precision;
  req.assumptions.training_precision = o.training_precision;
  req.assumptions.optimizer_state = o.optimizer_state;
  req.assumptions.optimizer_offload = o.optimizer_offload;
  req.assumptions.seq_len = o.seq_len;
  req.assumptions.micro_batch = o.micro_batch;
  req.assumptions.kv_sequences = o.kv_sequences;
  req.assumptions.lora_rank = o.lora_rank;
  req.assumptions.enable_mtp = o.mtp;
  absl::StatusOr<Plan> plan = MakePlan(*catalog, req);
  if (!plan.ok()) {
    bool refusal = absl::IsResourceExhausted(plan.status()) || absl::IsFailedPrecondition(plan.status());
    // Internal: the planner contradicts itself (e.g. the scheduler would refuse its groups).
    return fail(plan.status(), refusal ? 1 : absl::IsInternal(plan.status()) ? 3 : 2);
  }
  out << (o.json ? RenderPlanJson(*plan) + "\n" : RenderPlanText(*plan));
  if (!o.verify) return 0;
  absl::StatusOr<VerifyResult> v = VerifyWeightSync(*plan);
  if (!v.ok()) return fail(v.status(), 3);
  out << FormatVerifyResult(*v) << "\n";
  return v->verified ? 0 : 3;
}

}  // namespace skyrl::catalog
