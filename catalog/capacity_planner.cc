#include "catalog/capacity_planner.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace skyrl::catalog {
namespace {

constexpr double kGB = 1e9;

std::string Gb(double bytes) { return absl::StrFormat("%.1f GB", bytes / kGB); }

struct TrainerFit {
  bool ok = false;
  TrainerPlan plan;           // the chosen layout when ok, else the smallest-footprint one
  double best_total = 1e300;  // smallest per-GPU total over all layouts tried
  // With offload allowed: the least host memory per node among layouts that fit the GPUs only
  // with part of the optimizer on the host, but not the host (0 when none was turned down so).
  double host_short_per_node = 0;
};

// Host memory a node offers an offloaded optimizer, bytes.
double HostCap(const Cluster& c) { return c.host_memory_gb * kGB * c.host_usable_fraction; }

// Why an offloaded trainer did not fit, when host memory was the limit, or "".
std::string HostShort(const TrainerFit& f, const Cluster& c) {
  if (f.ok || f.host_short_per_node <= 0) return "";
  return absl::StrFormat(
      " (with the optimizer partly in host memory it fits the GPUs, but needs at least %.0f GB of host "
      "memory per node; "
      "%.0f GB usable of %.0f GB)",
      f.host_short_per_node / kGB, HostCap(c) / kGB, c.host_memory_gb);
}

bool ValidTp(const ModelEntry& m, int tp) {
  const Attention& at = m.arch.attention;
  if (at.layers > 0 && at.heads % tp != 0) return false;
  if (at.layers == 0 && m.arch.linear_attention.layers > 0 && m.arch.linear_attention.v_heads % tp != 0)
    return false;
  return true;
}

// The smallest offload fraction (a multiple of 1/kOffloadFractionSteps) at which `s` fits `cap`
// per GPU, with its memory; nullopt when even a full offload does not fit.
std::optional<std::pair<double, MemoryBreakdown>> OffloadToFit(const Row& row, const ModelEntry& m,
                                                               TrainerShape s, double cap,
                                                               const Assumptions& a,
                                                               const TrainingPrecision& recipe) {
  s.offload_fraction = 1;
  MemoryBreakdown all = TrainerMemory(m, row, Mode::kFull, s, a, recipe);
  if (all.total() > cap || all.offloaded_params <= 0) return std::nullopt;
  // The GPU keeps (1 - f) of the hybrid optimizer: solve for f, then round up to a step.
  double per_param = kHybridOptimizerBytes * all.offloaded_params;
  double exact = 1 - (cap - all.total()) / per_param;
  int steps =
      std::clamp(static_cast<int>(std::ceil(exact * kOffloadFractionSteps - 1e-9)), 1, kOffloadFractionSteps);
  double f = static_cast<double>(steps) / kOffloadFractionSteps;
  s.offload_fraction = f;
  MemoryBreakdown mem = TrainerMemory(m, row, Mode::kFull, s, a, recipe);
  if (mem.total() > cap) return std::nullopt;  // rounding cannot make it worse; kept as a guard
  return std::make_pair(f, mem);
}

// Best trainer layout on `gpus` GPUs of nodes with `gpn` GPUs, under `cap` bytes per GPU. With
// `offload` (Megatron only, full fine-tuning), a layout that does not fit the GPUs may move
// part of its optimizer to the host, within `host_cap` bytes per node; layouts that fit
// without it are preferred to any that need it, and among those the smallest fraction (least
// host memory and PCIe traffic) before the usual order.
TrainerFit FitTrainer(const Row& row, const ModelEntry& m, Mode mode, const std::string& backend, int gpus,
                      int gpn, double cap, const Assumptions& a, const TrainingPrecision& recipe,
                      bool offload, double host_cap) {
  TrainerFit fit;
  std::tuple<int, int, int, int> best_key{kOffloadFractionSteps, 1 << 30, 1 << 30, 0};
  auto consider = [&](const TrainerShape& s) {
    MemoryBreakdown mem = TrainerMemory(m, row, mode, s, a, recipe);
    double total = mem.total();
    if (!fit.ok && total < fit.best_total) fit.plan = {s, mem};
    fit.best_total = std::min(fit.best_total, total);
    TrainerShape chosen = s;
    if (total > cap) {
      if (!offload || mode != Mode::kFull) return;
      auto off = OffloadToFit(row, m, s, cap, a, recipe);
      if (!off) return;
      // Every trainer GPU of a node draws on the node's host memory.
      double node = off->second.host * std::min(gpn, gpus);
      if (node > host_cap) {
        if (fit.host_short_per_node == 0 || node < fit.host_short_per_node) fit.host_short_per_node = node;
        return;
      }
      chosen.offload_fraction = off->first;
      mem = off->second;
    }
    std::tuple<int, int, int, int> key{
        static_cast<int>(std::lround(chosen.offload_fraction * kOffloadFractionSteps)), s.pp, s.tp, -s.ep};
    if (!fit.ok || key < best_key) {
      fit.ok = true;
      best_key = key;
      fit.plan = {chosen, mem};
    }
  };
  if (backend == "fsdp") {
    consider({backend, gpus, 1, 1, 1, gpus});
    return fit;
  }
  int layers = std::max(1, MixerLayers(m.arch));
  for (int tp = 1; tp <= std::min(gpn, gpus); tp *= 2) {
    if (gpn % tp != 0 || gpus % tp != 0 || !ValidTp(m, tp)) continue;
    for (int pp = 1; pp <= layers && tp * pp <= gpus; pp *= 2) {
      if (gpus % (tp * pp) != 0) continue;
      int dp = gpus / (tp * pp);
      if (m.arch.moe.layers == 0) {
        consider({backend, gpus, tp, pp, 1, dp});
        continue;
      }
      for (int ep = 1; ep <= tp * dp; ++ep)
        if ((tp * dp) % ep == 0 && m.arch.moe.experts % ep == 0) consider({backend, gpus, tp, pp, ep, dp});
    }
  }
  return fit;
}

struct GeneratorFit {
  bool ok = false;
  GeneratorPlan plan;
  double best_total = 1e300;
};

// Engines of the smallest TP that fits on `gpus` GPUs starting at GPU index `offset`; an
// engine never straddles nodes.
GeneratorFit FitGenerator(const ModelEntry& m, const RolloutPrecision& p, int gpus, int offset, int gpn,
                          double cap, const Assumptions& a) {
  GeneratorFit fit;
  for (int tp = 1; tp <= std::min(gpn, gpus); tp *= 2) {
    if (gpn % tp != 0 || gpus % tp != 0 || offset % tp != 0 || !ValidTp(m, tp)) continue;
    MemoryBreakdown mem = GeneratorMemory(m, tp, p, a);
    if (!fit.ok && mem.total() < fit.best_total) fit.plan = {gpus, tp, gpus / tp, p, mem};
    fit.best_total = std::min(fit.best_total, mem.total());
    if (mem.total() <= cap) {
      fit.ok = true;
      fit.plan = {gpus, tp, gpus / tp, p, mem};
      return fit;
    }
  }
  return fit;
}

struct Attempt {
  bool ok = false;
  std::string why;  // when not ok
  TrainerPlan trainer;
  GeneratorPlan generator;
};

Attempt TrySeparate(const Row& row, const ModelEntry& m, Mode mode, const std::string& backend,
                    const RolloutPrecision& prec, const Cluster& c, double cap, const Assumptions& a,
                    const TrainingPrecision& recipe, bool offload) {
  Attempt at;
  const int n = c.shape.total_gpus(), gpn = c.shape.gpus_per_node;
  if (n < 2) {
    at.why = "separate pools need at least 2 GPUs";
    return at;
  }
  // The fewest GPUs each side needs on its own (alignment ignored), to say why when no split
  // works; either may need the whole cluster or more.
  int t_min = 0, best_t = 0;
  double best_total = 1e300;
  std::string host_short;
  for (int t = 1; t <= n && t_min == 0; ++t) {
    TrainerFit tf = FitTrainer(row, m, mode, backend, t, gpn, cap, a, recipe, offload, HostCap(c));
    if (tf.ok) t_min = t;
    if (tf.best_total < best_total) best_total = tf.best_total, best_t = t;
    if (t == n) host_short = HostShort(tf, c);
  }
  int g_min = 0;
  double g_best = 1e300;
  for (int g = 1; g <= n && g_min == 0; ++g) {
    GeneratorFit gf = FitGenerator(m, prec, g, 0, gpn, cap, a);
    if (gf.ok) g_min = g;
    g_best = std::min(g_best, gf.best_total);
  }
  if (t_min == 0 || g_min == 0 || t_min + g_min > n) {
    std::string trainer =
        t_min > 0 ? absl::StrCat("the trainer needs at least ", t_min, " GPUs")
                  : absl::StrCat("the trainer does not fit on up to ", n, " GPUs (at best ", Gb(best_total),
                                 " per GPU on ", best_t, ", limit ", Gb(cap), ")", host_short);
    std::string generator = g_min > 0 ? absl::StrCat("the generator at least ", g_min)
                                      : absl::StrCat("one generator engine does not fit in a node (at best ",
                                                     Gb(g_best), " per GPU, limit ", Gb(cap), ")");
    at.why = absl::StrCat(trainer, " and ", generator, "; the cluster has ", n);
    return at;
  }
  // Feasible splits, closest to even first; ties give the trainer more.
  std::vector<int> order;
  for (int t = t_min; t <= n - g_min; ++t) order.push_back(t);
  std::stable_sort(order.begin(), order.end(), [n](int x, int y) {
    int dx = std::abs(2 * x - n), dy = std::abs(2 * y - n);
    return dx != dy ? dx < dy : x > y;
  });
  for (int t : order) {
    TrainerFit tf = FitTrainer(row, m, mode, backend, t, gpn, cap, a, recipe, offload, HostCap(c));
    if (!tf.ok) continue;
    GeneratorFit gf = FitGenerator(m, prec, n - t, t, gpn, cap, a);
    if (!gf.ok) continue;
    at.ok = true;
    at.trainer = tf.plan;
    at.generator = gf.plan;
    return at;
  }
  at.why = absl::StrCat("the trainer needs at least ", t_min, " GPUs and the generator ", g_min,
                        ", but no split of ", n, " GPUs aligns both with the nodes");
  return at;
}

Attempt TryColocated(const Row& row, const ModelEntry& m, Mode mode, const std::string& backend,
                     const RolloutPrecision& prec, const Cluster& c, double cap, const Assumptions& a,
                     const TrainingPrecision& recipe, bool offload) {
  Attempt at;
  const int n = c.shape.total_gpus(), gpn = c.shape.gpus_per_node;
  // The sleeping side keeps its CUDA context on the GPU.
  double limit = cap - a.context_gb * kGB;
  TrainerFit tf = FitTrainer(row, m, mode, backend, n, gpn, limit, a, recipe, offload, HostCap(c));
  GeneratorFit gf = FitGenerator(m, prec, n, 0, gpn, limit, a);
  if (!tf.ok) {
    at.why = absl::StrCat("colocated, the trainer needs ", Gb(tf.best_total), " per GPU on all ", n,
                          " GPUs (limit ", Gb(limit), ")", HostShort(tf, c));
    return at;
  }
  if (!gf.ok) {
    at.why = absl::StrCat("colocated, one generator engine needs ", Gb(gf.best_total), " per GPU (limit ",
                          Gb(limit), ")");
    return at;
  }
  at.ok = true;
  at.trainer = tf.plan;
  at.generator = gf.plan;
  return at;
}

// The groups the job creates. Bundles are one whole GPU each, so the ranks of a group follow
// the scheduler's canonical order (node by node, devices ascending), which is the order the
// weight-sync cost model assumes: the trainer on GPUs 0..T-1, engines from GPU T on.
std::vector<PlacementGroupSpec> MakeGroups(const Plan& p) {
  const int gpn = p.cluster.shape.gpus_per_node;
  const std::string domain(kNvlinkDomainLabel);
  // A node's CPUs shared out over its GPUs: whole CPUs where there are enough, else a fraction
  // rounded down to the scheduler's 1/10000 units, so the bundles of a full node never ask
  // more than it has (a node with 4 CPUs and 8 GPUs gives 0.5 each).
  double cpu_per_gpu = 1;
  if (p.cluster.cpus_per_node >= gpn)
    cpu_per_gpu = std::floor(static_cast<double>(p.cluster.cpus_per_node) / gpn);
  else if (p.cluster.cpus_per_node > 0)
    cpu_per_gpu = std::floor(static_cast<double>(p.cluster.cpus_per_node) * 10000 / gpn) / 10000;
  auto bundle = [&](int gpu_index) {
    BundleSpec b;
    b.gpu = 1;
    b.cpu = cpu_per_gpu;
    b.selector = {{std::string(kAcceleratorLabel), p.cluster.gpu.name}};
    b.node = gpu_index / gpn;
    b.gpu_id = gpu_index % gpn;
    return b;
  };
  std::vector<PlacementGroupSpec> groups;
  if (p.placement == Placement::kColocated) {
    const bool one_node = p.cluster.shape.nodes == 1;
    PlacementGroupSpec g{"colocated", one_node ? "STRICT_PACK" : "PACK", one_node ? domain : "", "", {}};
    for (int i = 0; i < p.cluster.shape.total_gpus(); ++i) g.bundles.push_back(bundle(i));
    groups.push_back(std::move(g));
    return groups;
  }
  const int t = p.trainer.shape.gpus;
  PlacementGroupSpec tr{"trainer", t <= gpn ? "STRICT_PACK" : "PACK", t <= gpn ? domain : "", "", {}};
  for (int i = 0; i < t; ++i) tr.bundles.push_back(bundle(i));
  groups.push_back(std::move(tr));
  // One group per engine: STRICT_PACK keeps its TP ranks on one node, which is one NVLink
  // domain here. No domain label on top: the scheduler orders domains by free GPUs before it
  // looks at affinity, so with one domain per node an engine would skip the trainer's last,
  // partly free node for an empty one, and weight sync would leave NVLink.
  for (int e = 0; e < p.generator.engines; ++e) {
    PlacementGroupSpec g{absl::StrCat("generator-", e), "STRICT_PACK", "", "trainer", {}};
    for (int k = 0; k < p.generator.tp; ++k) g.bundles.push_back(bundle(t + e * p.generator.tp + k));
    groups.push_back(std::move(g));
  }
  return groups;
}

WeightSyncBound MakeWeightSync(const Plan& p) {
  WeightSyncBound w;
  ParamCounts c = CountParams(p.model->arch);
  // Trainers send bf16 weights; engines quantize on arrival when they roll out in FP8/INT4.
  w.bytes = 2 * (c.total() + (p.assumptions.enable_mtp ? c.mtp : 0));
  // The trained weights are spread over every trainer GPU, so with more than one node some of
  // them reach every engine over the network, colocated or not.
  const bool cross_node = p.cluster.shape.nodes > 1;
  w.link = cross_node ? "NIC" : "NVLink";
  // Per direction: NVLink figures are quoted for both directions together.
  w.link_gb_s = cross_node ? p.cluster.gpu.nic_gb_s : p.cluster.gpu.nvlink_gb_s / 2;
  // Each engine receives the whole model over its TP ranks' links; the trainer side sends one
  // copy per engine over its own GPUs' links. The slower side bounds the time.
  double receive = w.bytes / (p.generator.tp * w.link_gb_s * kGB);
  double send = w.bytes * p.generator.engines / (p.trainer.shape.gpus * w.link_gb_s * kGB);
  w.bandwidth_estimate_s = std::max(receive, send);
  w.lower_bound_s = w.bandwidth_estimate_s;
  w.note = "bandwidth-only estimate (bytes / link bandwidth); the weight_sync planner was not run";
  if (p.mode == Mode::kLora)
    w.note += "; assumes the merged model is sent (adapters alone would be far smaller)";
  return w;
}

bool Has(const std::vector<std::string>& v, absl::string_view x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string OffloadNote(const Plan& p, const TrainingPrecision& recipe) {
  OffloadFacts f = OffloadFactsOf(p);
  std::string out = absl::StrFormat(
      "optimizer state in host memory: %.0f GB per node of %.0f GB usable (%.0f%% of %.0f GB), offload "
      "fraction %.2f "
      "(Megatron-Core: --optimizer-cpu-offload --optimizer-offload-fraction %.2f "
      "--overlap-cpu-optimizer-d2h-h2d); "
      "its fp32 master, Adam moments and pinned fp32 gradient copy take %.0f B per parameter on the host, "
      "the rest of "
      "the optimizer %.1f GB per GPU; step slower by the D2H/H2D traffic: %.1f GB per GPU each way per step, "
      "at least "
      "%.2f s per direction over %.0f GB/s PCIe (overlapped with the CPU Adam step, whose time is not "
      "modelled)",
      f.host_per_node / kGB, f.host_usable_per_node / kGB, p.cluster.host_usable_fraction * 100,
      p.cluster.host_memory_gb, f.fraction, f.fraction, kHybridOptimizerBytes,
      p.trainer.memory.optimizer / kGB, f.transfer_per_gpu / kGB, f.transfer_s, p.cluster.gpu.host_link_gb_s);
  if (recipe.optimizer_state != "fp32")
    absl::StrAppend(&out, "; ", recipe.name,
                    " weights as the recipe, but the CPU optimizer keeps fp32 moments, not the ",
                    recipe.optimizer_state, " ones of the GPU-only recipe");
  return out;
}

// What the full fine-tuning recipe stores per parameter, with its Megatron-Core flags, for a
// recipe other than plain bf16 with fp32 moments.
std::string RecipeNote(const TrainingPrecision& r, double grad_bytes) {
  const std::string moments = absl::StrCat("--use-precision-aware-optimizer --exp-avg-dtype ",
                                           r.optimizer_state, " --exp-avg-sq-dtype ", r.optimizer_state);
  if (r.name == "bf16")
    return absl::StrFormat(
        "bf16 training with %s Adam moments over an fp32 master: %.4g B per parameter with bf16 gradients "
        "(Megatron-Core: %s)",
        r.optimizer_state, r.BytesPerParam(grad_bytes), moments);
  return absl::StrFormat(
      "%s training: %s parameters without a bf16 copy (rowwise and columnwise), %s Adam moments over an fp32 "
      "master: "
      "%.4g B per parameter with bf16 gradients (Megatron-Core: --fp8-recipe %s --fp8-param-gather %s)",
      r.name, r.name == "mxfp8" ? "MXFP8" : "FP8", r.optimizer_state, r.BytesPerParam(grad_bytes),
      r.name == "mxfp8" ? "mxfp8" : "delayed", moments);
}

}  // namespace

OffloadFacts OffloadFactsOf(const Plan& p) {
  OffloadFacts f;
  f.fraction = p.trainer.shape.offload_fraction;
  if (f.fraction <= 0) return f;
  const int on_node = std::min(p.cluster.shape.gpus_per_node, p.trainer.shape.gpus);
  f.host_per_gpu = p.trainer.memory.host;
  f.host_per_node = p.trainer.memory.host * on_node;
  f.host_usable_per_node = p.cluster.host_memory_gb * kGB * p.cluster.host_usable_fraction;
  // Each step: the fp32 gradients of the offloaded parameters down, their fp32 parameters back.
  f.transfer_per_gpu = 4 * p.trainer.memory.offloaded_params;
  f.transfer_s =
      p.cluster.gpu.host_link_gb_s > 0 ? f.transfer_per_gpu / (p.cluster.gpu.host_link_gb_s * kGB) : 0;
  return f;
}

void UseReferenceRecipe(const Row& row, Assumptions* a) {
  if (a->training_precision.empty()) a->training_precision = row.reference.training_precision;
  if (a->optimizer_state.empty() && a->training_precision == row.reference.training_precision)
    a->optimizer_state = row.reference.optimizer_state;
}

Cluster StatedMinimum(const Catalog& catalog, const Row& row) {
  absl::StatusOr<GpuType> g = row.min_hardware.gpu == "any"
                                  ? absl::StatusOr<GpuType>(catalog.hardware().Smallest())
                                  : catalog.hardware().Find(row.min_hardware.gpu);
  Cluster defaults;
  defaults.host_usable_fraction = catalog.hardware().host_usable_fraction();
  return OnShape(defaults, row.min_hardware, g.ok() ? *g : catalog.hardware().Smallest());
}

std::vector<Cluster> BelowMinimum(const Catalog& catalog, const Cluster& minimum) {
  std::vector<Cluster> out;
  if (minimum.shape.nodes > 1) {
    HardwareSpec fewer = minimum.shape;
    fewer.nodes -= 1;
    out.push_back(OnShape(minimum, fewer, minimum.gpu));
  }
  if (minimum.shape.gpus_per_node > 1) {
    HardwareSpec half = minimum.shape;
    half.gpus_per_node /= 2;
    out.push_back(OnShape(minimum, half, minimum.gpu));
  }
  if (const GpuType* smaller = catalog.hardware().Smaller(minimum.gpu.name))
    out.push_back(OnShape(minimum, minimum.shape, *smaller));
  return out;
}

namespace {

// What fitting decided for one cluster: the training recipe, resolved once, and the layouts that
// fit (backend and rollout precision are in them). A plan is built from it (BuildPlan); a probe
// stops here.
struct Fitted {
  TrainingPrecision recipe;
  double cap = 0;  // usable bytes per GPU
  Attempt attempt;
};

// Validates the request against the row and the cluster and fits the trainer and the generator:
// InvalidArgument / FailedPrecondition for bad or impossible input, ResourceExhausted with the
// reason when nothing fits. No placement, no weight sync: what a minimum search's probes need.
absl::StatusOr<Fitted> Fit(const Row& row, const ModelEntry& model, Mode mode, const Cluster& cluster,
                           Placement placement, const PlanRequest& options) {
  const Assumptions& a = options.assumptions;
  std::string backend = options.backend.empty() ? DefaultBackend(row, model) : options.backend;
  if (!Has(row.backends, backend))
    return absl::InvalidArgumentError(absl::StrCat("--backend: ", row.family, " runs on ",
                                                   absl::StrJoin(row.backends, ", "), ", not ", backend));
  absl::StatusOr<RolloutPrecision> prec = ChooseRolloutPrecision(row, options.rollout_precision);
  if (!prec.ok()) return prec.status();
  if (a.optimizer_offload && cluster.host_memory_gb <= 0)
    return absl::InvalidArgumentError(
        absl::StrCat("--optimizer-offload: the host memory of a ", cluster.gpu.name,
                     " node is unknown (give host_memory_gb in a cluster file)"));
  if (a.optimizer_offload && mode == Mode::kFull && backend != "megatron")
    return absl::InvalidArgumentError(absl::StrCat("--optimizer-offload: Megatron-Core's CPU optimizer; ",
                                                   model.name, " is planned on ", backend,
                                                   " (use --backend megatron where the row "
                                                   "offers it)"));
  absl::StatusOr<TrainingPrecision> train_prec = ChooseTrainingRecipe(row, a);
  if (!train_prec.ok()) return train_prec.status();
  // Moments in another dtype than the recipe's own need Megatron-Core's precision-aware
  // optimizer, which asserts Adam and the distributed optimizer; it does not tie the dtype to
  // the training precision (fp8 moments with bf16 training are allowed).
  if (mode == Mode::kFull && backend != "megatron" &&
      train_prec->optimizer_state != ChooseTrainingPrecision(row, a.training_precision)->optimizer_state)
    return absl::InvalidArgumentError(
        absl::StrCat("--optimizer-state: ", train_prec->optimizer_state,
                     " moments need Megatron-Core's precision-aware optimizer; ", model.name,
                     " is planned on ", backend, " (use --backend megatron where the row offers it)"));
  if (mode == Mode::kFull && train_prec->name != "bf16" &&
      !Has(cluster.gpu.training_formats, train_prec->name))
    return absl::FailedPreconditionError(
        absl::StrCat("--training-precision: ", cluster.gpu.name, " does not train in ", train_prec->name,
                     " (its formats: ",
                     cluster.gpu.training_formats.empty() ? std::string("none")
                                                          : absl::StrJoin(cluster.gpu.training_formats, ", "),
                     ")"));
  double cap = cluster.gpu.memory_gb * kGB * a.usable_fraction;
  // Everything on the GPUs first; the CPU optimizer only when that fails and it is allowed.
  auto attempt = [&](bool offload) {
    // The recipe is resolved once, here, for every layout's TrainerMemory.
    return placement == Placement::kSeparate
               ? TrySeparate(row, model, mode, backend, *prec, cluster, cap, a, *train_prec, offload)
               : TryColocated(row, model, mode, backend, *prec, cluster, cap, a, *train_prec, offload);
  };
  Attempt at = attempt(false);
  if (!at.ok && a.optimizer_offload && mode == Mode::kFull) at = attempt(true);
  if (!at.ok) return absl::ResourceExhaustedError(at.why);
  return Fitted{*train_prec, cap, std::move(at)};
}

// The plan for what Fit chose: its placement groups placed by the scheduler (Internal when the
// scheduler refuses one: a planner bug), the weight sync and the notes.
absl::StatusOr<Plan> BuildPlan(const Row& row, const ModelEntry& model, Mode mode, const Cluster& cluster,
                               Placement placement, const PlanRequest& options, const Fitted& fit) {
  const Assumptions& a = options.assumptions;
  const TrainingPrecision& recipe = fit.recipe;
  Plan p;
  p.row = &row;
  p.model = &model;
  p.mode = mode;
  p.placement = placement;
  p.cluster = cluster;
  p.assumptions = a;
  p.recipe = fit.recipe;
  p.usable_bytes_per_gpu = fit.cap;
  p.trainer = fit.attempt.trainer;
  p.generator = fit.attempt.generator;
  std::vector<PlacementGroupSpec> specs = MakeGroups(p);
  // The scheduler places every group, or the plan is a bug (Internal): never print a plan the
  // head would refuse.
  absl::StatusOr<std::vector<GroupPlacement>> placed = PlaceGroups(p.cluster, specs);
  if (!placed.ok()) return placed.status();
  for (const std::string& m : PlacementMismatches(specs, *placed))
    p.notes.push_back(absl::StrCat("placement: the scheduler places ", m,
                                   " (the weight-sync estimate assumes the expected devices)"));
  for (size_t i = 0; i < specs.size(); ++i)
    p.groups.push_back({std::move(specs[i]), std::move((*placed)[i])});
  p.weight_sync = MakeWeightSync(p);
  if (options.plan_weight_sync) {
    absl::StatusOr<SyncPlanSummary> s = PlanWeightSync(p);
    if (s.ok()) {
      WeightSyncBound& w = p.weight_sync;
      w.planned = *s;
      w.bytes = static_cast<double>(s->bytes);
      w.lower_bound_s = s->lower_bound_s;
      w.predicted_s = s->predicted_s;
      w.note = absl::StrCat("cost model: NVLink ", p.cluster.gpu.nvlink_gb_s / 2,
                            " GB/s per GPU and direction, NIC ", p.cluster.gpu.nic_gb_s, " GB/s per GPU, ",
                            p.cluster.shape.gpus_per_node, " GPUs per node; engines ",
                            p.placement == Placement::kColocated
                                ? "on the trainer's GPUs"
                                : absl::StrCat("from GPU ", p.trainer.shape.gpus));
      if (s->replicated_for_tp > 0)
        absl::StrAppend(&w.note, "; ", s->replicated_for_tp,
                        " parameters replicated (TP does not divide them)");
    } else {
      p.notes.push_back(absl::StrCat("weight-sync plan failed: ", s.status().message()));
    }
  }
  if (options.weight_sync_predictor) {
    absl::StatusOr<double> predicted = options.weight_sync_predictor(p);
    if (!predicted.ok()) {
      p.notes.push_back(absl::StrCat("weight-sync prediction failed: ", predicted.status().message()));
    } else if (*predicted < p.weight_sync.lower_bound_s) {
      p.notes.push_back(
          absl::StrFormat("weight-sync prediction %.3f s is below the lower bound %.3f s: ignored",
                          *predicted, p.weight_sync.lower_bound_s));
    } else {
      p.weight_sync.predicted_s = *predicted;
    }
  }
  const bool offloaded = p.trainer.shape.offload_fraction > 0;
  if (mode == Mode::kFull && !offloaded && (recipe.name != "bf16" || recipe.optimizer_state != "fp32"))
    p.notes.push_back(RecipeNote(recipe, a.grad_bytes));
  if (mode == Mode::kLora && !a.optimizer_state.empty())
    p.notes.push_back("--optimizer-state: not used for LoRA (the adapters keep fp32 Adam state)");
  if (offloaded)
    p.notes.push_back(OffloadNote(p, recipe));
  else if (mode == Mode::kFull && a.optimizer_offload)
    p.notes.push_back("--optimizer-offload: not needed, the optimizer fits the GPUs");
  else if (a.optimizer_offload)
    p.notes.push_back("--optimizer-offload: not used for LoRA (its optimizer holds the adapters only)");
  for (const std::string& l : row.limitations) p.notes.push_back(l);
  if (row.SupportFor(mode) == Support::kUntested)
    p.notes.push_back(
        absl::StrCat(ModeTitle(mode), " of ", row.family, " has not been tested (blank in the table)"));
  if (row.status == "expected")
    p.notes.push_back("status: expected to work, not tested (" + row.family + ")");
  if (!row.conflict.empty() && model.name == row.reference.model)
    p.notes.push_back(absl::StrCat("calibration conflict with the table: ", row.conflict));
  if (row.reference.conservative_minimum && model.name == row.reference.model && mode == row.reference.mode)
    p.notes.push_back(
        absl::StrCat("the table's minimum for ", row.family, " (", row.min_hardware.Describe(),
                     ") is conservative: the memory model fits this model on less (skyrl plan --list "
                     "shows its own minimum)"));
  if (model.estimated) p.notes.push_back(absl::StrCat(model.name, ": architecture estimated; ", model.note));
  if (model.arch.mtp_layers > 0 && !a.enable_mtp)
    p.notes.push_back("MTP layers are dropped (enable with trainer.mtp.enabled=true / --mtp)");
  return p;
}

absl::StatusOr<Plan> FitAndBuild(const Row& row, const ModelEntry& model, Mode mode, const Cluster& cluster,
                                 Placement placement, const PlanRequest& options) {
  absl::StatusOr<Fitted> fit = Fit(row, model, mode, cluster, placement, options);
  if (!fit.ok()) return fit.status();
  return BuildPlan(row, model, mode, cluster, placement, options, *fit);
}

std::string RequestedTrainingPrecision(const PlanRequest& o) {
  return o.assumptions.training_precision.empty() ? "bf16" : o.assumptions.training_precision;
}

// "fp8 Adam moments" when the reading names the moments' dtype, else "".
std::string ReferenceMoments(const Row& row) {
  return row.reference.optimizer_state.empty() ? "" : row.reference.optimizer_state + " Adam moments";
}

// The smallest cluster of base's nodes (1x1, 1x2, 1x4, 1x8, 2x8, ... 64x8 of its GPU type) on
// which the model fits, each shape with its own host memory (OnShape); nullopt when none does.
std::optional<HardwareSpec> SearchMinimum(const Row& row, const ModelEntry& model, Mode mode,
                                          const Cluster& base, Placement placement,
                                          const PlanRequest& options) {
  const GpuType& gpu = base.gpu;
  std::vector<std::pair<int, int>> shapes = {{1, 1}, {1, 2}, {1, 4}, {1, 8}};
  for (int n = 2; n <= 64; ++n) shapes.push_back({n, 8});
  // Quick lower bound first: the bf16 weights alone must fit in the cluster's memory.
  double weights = 2 * CountParams(model.arch).total();
  for (auto [nodes, gpn] : shapes) {
    if (nodes * gpn * gpu.memory_gb * 1e9 * options.assumptions.usable_fraction < weights * 0.5) continue;
    Cluster c = OnShape(base, HardwareSpec{nodes, gpn, gpu.name}, gpu);
    if (Fit(row, model, mode, c, placement, options).ok()) return c.shape;
  }
  return std::nullopt;
}

// PlanOn; on a ResourceExhausted refusal `*minimum` is what its minimum search found (nullopt:
// no cluster of that GPU type fits), so that a caller does not search again.
absl::StatusOr<Plan> PlanOrRefuse(const Catalog& catalog, const Row& row, const ModelEntry& model, Mode mode,
                                  const Cluster& cluster, Placement placement, const PlanRequest& options,
                                  std::optional<HardwareSpec>* minimum) {
  absl::StatusOr<Plan> p = FitAndBuild(row, model, mode, cluster, placement, options);
  if (p.ok() || !absl::IsResourceExhausted(p.status())) return p;
  std::string msg = absl::StrCat(model.name, " (", ModeTitle(mode), ") does not fit ",
                                 cluster.shape.Describe(), ": ", p.status().message());
  std::optional<HardwareSpec>& min = *minimum;
  min = SearchMinimum(row, model, mode, cluster, placement, options);
  if (min)
    absl::StrAppend(&msg, "; needs at least ", min->Describe(), " (", PlacementName(placement), " pools)");
  else
    absl::StrAppend(&msg, "; no cluster of ", cluster.gpu.name, " up to 64 nodes x 8 fits (",
                    PlacementName(placement), " pools)");
  if (placement == Placement::kSeparate &&
      Fit(row, model, mode, cluster, Placement::kColocated, options).ok())
    absl::StrAppend(&msg, "; it fits here with --colocate");
  if (model.name == row.reference.model && mode == row.reference.mode) {
    std::vector<std::string> how;
    if (row.reference.placement == Placement::kColocated) how.push_back("colocated");
    if (mode == Mode::kFull && row.reference.training_precision != "bf16")
      how.push_back(row.reference.training_precision + " training");
    if (mode == Mode::kFull && !row.reference.optimizer_state.empty()) how.push_back(ReferenceMoments(row));
    absl::StrAppend(&msg, "; the table's minimum for ", row.family, " is ", row.min_hardware.Describe(),
                    how.empty() ? "" : absl::StrCat(" (", absl::StrJoin(how, ", "), ")"));
    // The flags that give the reading's recipe, when the request differs from it (with
    // --colocate when the reading is colocated too).
    std::vector<std::string> flags;
    if (mode == Mode::kFull && row.reference.training_precision != "bf16" &&
        RequestedTrainingPrecision(options) != row.reference.training_precision)
      flags.push_back("--training-precision " + row.reference.training_precision);
    if (mode == Mode::kFull && !row.reference.optimizer_state.empty() &&
        options.assumptions.optimizer_state != row.reference.optimizer_state)
      flags.push_back("--optimizer-state " + row.reference.optimizer_state);
    if (!flags.empty() && row.reference.placement == Placement::kColocated &&
        placement != Placement::kColocated)
      flags.insert(flags.begin(), "--colocate");
    if (!flags.empty()) absl::StrAppend(&msg, "; try ", absl::StrJoin(flags, " "));
  }
  if (!row.conflict.empty() && model.name == row.reference.model && mode == row.reference.mode)
    absl::StrAppend(&msg, " (calibration conflict: ", row.conflict, ")");
  return absl::ResourceExhaustedError(msg);
}

}  // namespace

absl::StatusOr<Plan> PlanOn(const Catalog& catalog, const Row& row, const ModelEntry& model, Mode mode,
                            const Cluster& cluster, Placement placement, const PlanRequest& options) {
  std::optional<HardwareSpec> unused;
  return PlanOrRefuse(catalog, row, model, mode, cluster, placement, options, &unused);
}

std::optional<HardwareSpec> MinimumHardware(const Catalog& catalog, const Row& row, const ModelEntry& model,
                                            Mode mode, const GpuType& gpu, Placement placement,
                                            const PlanRequest& options, double host_gb_per_gpu) {
  // One GPU with its host memory; the search scales it to each shape.
  Cluster one;
  one.host_usable_fraction = catalog.hardware().host_usable_fraction();
  one = OnShape(one, HardwareSpec{1, 1, gpu.name}, gpu);
  if (host_gb_per_gpu >= 0) one.host_memory_gb = host_gb_per_gpu;
  return SearchMinimum(row, model, mode, one, placement, options);
}

absl::StatusOr<Plan> MakePlan(const Catalog& catalog, const PlanRequest& request) {
  absl::StatusOr<Catalog::Match> match = catalog.Find(request.model);
  if (!match.ok()) return match.status();
  const Row& row = *match->row;
  const ModelEntry& model = *match->model;
  Cluster cluster = request.cluster ? *request.cluster : StatedMinimum(catalog, row);
  Placement placement = request.colocate ? Placement::kColocated : Placement::kSeparate;
  if (!request.cluster && !request.colocate) placement = row.reference.placement;
  PlanRequest req = request;

  Mode mode =
      request.mode ? *request.mode : (row.full_ft == Support::kNotWorking ? Mode::kLora : Mode::kFull);
  if (!request.mode && row.full_ft != Support::kSupported && row.lora == Support::kSupported)
    mode = Mode::kLora;
  // On the row's stated minimum (no cluster given), the recipe the minimum was read for.
  if (!request.cluster && model.name == row.reference.model && mode == row.reference.mode)
    UseReferenceRecipe(row, &req.assumptions);
  if (row.SupportFor(mode) == Support::kNotWorking) {
    std::string msg = absl::StrCat(model.name, ": ", ModeTitle(mode), " is known not to work");
    Mode other = mode == Mode::kFull ? Mode::kLora : Mode::kFull;
    if (row.SupportFor(other) != Support::kNotWorking) {
      std::optional<HardwareSpec> min = SearchMinimum(row, model, other, cluster, placement, req);
      if (min)
        absl::StrAppend(&msg, "; ", ModeTitle(other), " needs at least ", min->Describe());
      else
        absl::StrAppend(&msg, "; ", ModeTitle(other), " does not fit any cluster of ", cluster.gpu.name,
                        " up to 64 nodes");
    }
    return absl::FailedPreconditionError(msg);
  }
  if (!request.cluster) {
    // No cluster given: the stated minimum when it fits, else the smallest that does.
    std::optional<HardwareSpec> min;  // the refusal's own minimum search: not run twice
    absl::StatusOr<Plan> p = PlanOrRefuse(catalog, row, model, mode, cluster, placement, req, &min);
    if (p.ok() || !absl::IsResourceExhausted(p.status())) return p;
    if (!min) return p.status();
    // The minimum's nodes have their own host memory (what the search probed with), not the
    // stated node's.
    cluster = OnShape(cluster, *min, cluster.gpu);
    absl::StatusOr<Plan> q = PlanOn(catalog, row, model, mode, cluster, placement, req);
    if (q.ok())
      q->notes.insert(q->notes.begin(), absl::StrCat("no --cluster: planned on the smallest ",
                                                     cluster.gpu.name, " cluster that fits"));
    return q;
  }
  return PlanOn(catalog, row, model, mode, cluster, placement, req);
}

}  // namespace skyrl::catalog
