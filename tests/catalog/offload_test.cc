// Optimizer CPU offload (--optimizer-offload): host memory per node from hardware.yaml, the
// HybridDeviceOptimizer's bytes, "GPUs first", the host-memory refusal, and why the rule is a
// flag rather than automatic.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "catalog/capacity_planner.h"
#include "catalog/render.h"
#include "tests/catalog/test_catalog.h"

namespace skyrl::catalog {
namespace {

using testing::RealCatalog;

bool HasNote(const Plan& p, absl::string_view text) {
  return std::any_of(p.notes.begin(), p.notes.end(),
                     [&](const std::string& n) { return absl::StrContains(n, text); });
}

TEST(HostMemoryTest, EveryGpuTypeHasItsSystemsHostMemory) {
  const HardwareCatalog& hw = RealCatalog().hardware();
  EXPECT_DOUBLE_EQ(hw.host_usable_fraction(), 0.8);
  for (const GpuType& g : hw.gpus()) {
    EXPECT_GT(g.host_memory_gb, 0) << g.name;
    EXPECT_GT(g.host_link_gb_s, 0) << g.name;
    EXPECT_EQ(g.system_gpus, 8) << g.name;
  }
  // A text cluster gets the reference system's memory per node, a half node half of it; a
  // cluster file may say otherwise.
  absl::StatusOr<Cluster> full = ParseCluster("4x8xB300", hw), half = ParseCluster("4x4xB300", hw);
  ASSERT_TRUE(full.ok() && half.ok());
  EXPECT_DOUBLE_EQ(full->host_memory_gb, 2048);
  EXPECT_DOUBLE_EQ(half->host_memory_gb, 1024);
  EXPECT_DOUBLE_EQ(full->host_usable_fraction, 0.8);
  absl::StatusOr<Cluster> file =
      ParseClusterYaml("nodes: 4\ngpus_per_node: 8\ngpu: B300\nhost_memory_gb: 4096\n", "c.yaml", hw);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_DOUBLE_EQ(file->host_memory_gb, 4096);
  absl::StatusOr<Cluster> dflt = ParseClusterYaml("nodes: 1\ngpus_per_node: 8\ngpu: H100\n", "c.yaml", hw);
  ASSERT_TRUE(dflt.ok());
  EXPECT_DOUBLE_EQ(dflt->host_memory_gb, 2048);
  // Steps below a minimum carry their own host memory.
  std::vector<Cluster> below = BelowMinimum(RealCatalog(), *full);
  ASSERT_EQ(below.size(), 3u);
  EXPECT_DOUBLE_EQ(below[0].host_memory_gb, 2048);  // 3x8
  EXPECT_DOUBLE_EQ(below[1].host_memory_gb, 1024);  // 4x4
  EXPECT_DOUBLE_EQ(below[2].host_memory_gb, 2048);  // 4x8 B200

  absl::StatusOr<HardwareCatalog> bad = HardwareCatalog::Parse(
      "host_usable_percent: 120\ngpus:\n  - {name: X1, memory_gb: 80, nvlink_gb_s: 900, nic_gb_s: 50}\n",
      "hw.yaml");
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status()));
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "hw.yaml: host_usable_percent: must be 1..100"))
      << bad.status();
}

TEST(HostMemoryTest, OnShapeKeepsHostMemoryPerGpuOrTakesTheNewTypesShare) {
  const HardwareCatalog& hw = RealCatalog().hardware();
  // A cluster file's 3000 GB over 6 GPUs: 500 GB per GPU on any node of that type.
  absl::StatusOr<Cluster> file = ParseClusterYaml(
      "nodes: 2\ngpus_per_node: 6\ngpu: H200\ncpus_per_node: 48\nhost_memory_gb: 3000\n", "c.yaml", hw);
  ASSERT_TRUE(file.ok()) << file.status();
  Cluster four = OnShape(*file, HardwareSpec{3, 4, ""}, file->gpu);
  EXPECT_EQ(four.shape.ToString(), "3x4xH200");
  EXPECT_DOUBLE_EQ(four.host_memory_gb, 2000);
  EXPECT_EQ(four.cpus_per_node, 48);
  EXPECT_DOUBLE_EQ(four.host_usable_fraction, 0.8);
  EXPECT_DOUBLE_EQ(OnShape(*file, HardwareSpec{5, 6, "H200"}, file->gpu).host_memory_gb, 3000);
  // Another GPU type: its reference system's share, whatever the file said.
  absl::StatusOr<GpuType> b200 = hw.Find("B200");
  ASSERT_TRUE(b200.ok());
  Cluster other = OnShape(*file, HardwareSpec{2, 4, ""}, *b200);
  EXPECT_EQ(other.shape.ToString(), "2x4xB200");
  EXPECT_DOUBLE_EQ(other.host_memory_gb, b200->HostMemoryGb(4));
  // Unknown stays unknown on the same type.
  Cluster unknown = *file;
  unknown.host_memory_gb = 0;
  EXPECT_DOUBLE_EQ(OnShape(unknown, HardwareSpec{1, 8, ""}, unknown.gpu).host_memory_gb, 0);
}

TEST(OffloadMemoryTest, HybridOptimizerSplitsSixteenBytesBetweenGpuAndHost) {
  absl::StatusOr<Catalog::Match> glm = RealCatalog().Find("GLM-5.3-753B");
  ASSERT_TRUE(glm.ok());
  Assumptions a;
  a.training_precision = "mxfp8";
  TrainerShape s{"megatron", 32, 2, 1, 16, 16};
  MemoryBreakdown none = TrainerMemory(*glm->model, *glm->row, Mode::kFull, s, a);
  double shard = none.gradients / a.grad_bytes;  // trainable parameters per GPU
  for (double f : {0.25, 1.0}) {
    s.offload_fraction = f;
    MemoryBreakdown m = TrainerMemory(*glm->model, *glm->row, Mode::kFull, s, a);
    // fp32 master, fp32 moments and an fp32 gradient copy wherever the parameter is stepped;
    // weights, gradients and activations do not move.
    EXPECT_NEAR(m.host, 16 * f * shard, 1e-6 * m.host) << f;
    EXPECT_NEAR(m.optimizer, 16 * (1 - f) * shard, 1e-3) << f;
    EXPECT_NEAR(m.offloaded_params, f * shard, 1) << f;
    EXPECT_DOUBLE_EQ(m.weights, none.weights);
    EXPECT_DOUBLE_EQ(m.gradients, none.gradients);
    EXPECT_DOUBLE_EQ(m.activations, none.activations);
  }
  // LoRA has no CPU optimizer.
  s.offload_fraction = 1;
  EXPECT_EQ(TrainerMemory(*glm->model, *glm->row, Mode::kLora, s, a).host, 0);
}

TEST(OffloadPlanTest, GpusFirstThenTheSmallestFractionThatFits) {
  const Catalog& cat = RealCatalog();
  // Fits the GPUs: the flag changes nothing but a note.
  PlanRequest easy;
  easy.model = "Qwen3-32B";
  easy.backend = "megatron";
  easy.cluster = *ParseCluster("2x8xH100", cat.hardware());
  easy.assumptions.optimizer_offload = true;
  absl::StatusOr<Plan> p = MakePlan(cat, easy);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->trainer.shape.offload_fraction, 0);
  EXPECT_EQ(p->trainer.memory.host, 0);
  EXPECT_TRUE(HasNote(*p, "not needed")) << p->notes.front();

  // GLM-5.3 on 4x8 B300 with 4 TB hosts: needs the CPU optimizer, gets the smallest fraction.
  PlanRequest req;
  req.model = "GLM-5.3-753B";
  req.mode = Mode::kFull;
  req.colocate = true;
  req.assumptions.training_precision = "mxfp8";
  req.assumptions.optimizer_offload = true;
  req.cluster = *ParseClusterYaml("nodes: 4\ngpus_per_node: 8\ngpu: B300\nhost_memory_gb: 4096\n", "c.yaml",
                                  cat.hardware());
  absl::StatusOr<Plan> off = MakePlan(cat, req);
  ASSERT_TRUE(off.ok()) << off.status().message();
  const double f = off->trainer.shape.offload_fraction;
  EXPECT_GT(f, 0);
  EXPECT_LE(f, 1);
  EXPECT_LE(off->trainer.memory.total(),
            off->usable_bytes_per_gpu - 3e9);  // colocated: the sleeping side's context
  OffloadFacts facts = OffloadFactsOf(*off);
  EXPECT_NEAR(facts.host_per_node, 8 * off->trainer.memory.host, 1);
  EXPECT_LE(facts.host_per_node, 4096e9 * 0.8);
  EXPECT_GT(facts.transfer_s, 0);
  EXPECT_TRUE(HasNote(*off, "optimizer state in host memory")) << off->notes.front();
  EXPECT_TRUE(HasNote(*off, "step slower by the D2H/H2D traffic"));
  // The same layout one step less offloaded no longer fits the GPUs.
  TrainerShape less = off->trainer.shape;
  less.offload_fraction = f - 1.0 / kOffloadFractionSteps;
  EXPECT_GT(TrainerMemory(*off->model, *off->row, Mode::kFull, less, off->assumptions).total(),
            off->usable_bytes_per_gpu - 3e9);
  // Such hosts fit it on 3x8 too: 4 TB hosts would make the table's 4x8 conservative, not exact
  // (why the row's reading uses fp8 moments on the GPUs instead).
  Cluster three = *req.cluster;
  three.shape.nodes = 3;
  PlanRequest r3 = req;
  r3.cluster = three;
  absl::StatusOr<Plan> p3 = MakePlan(cat, r3);
  ASSERT_TRUE(p3.ok()) << p3.status().message();
  EXPECT_GT(p3->trainer.shape.offload_fraction, f);
  // --json carries it.
  nlohmann::json j = nlohmann::json::parse(RenderPlanJson(*off));
  EXPECT_DOUBLE_EQ(j.at("trainer").at("optimizer_offload").at("fraction").get<double>(), f);
  EXPECT_DOUBLE_EQ(j.at("cluster").at("host_memory_gb").get<double>(), 4096);
  EXPECT_TRUE(j.at("trainer").at("optimizer_offload").at("host_gb_per_node").get<double>() <=
              j.at("trainer").at("optimizer_offload").at("host_usable_gb_per_node").get<double>());
}

TEST(OffloadPlanTest, HostMemoryIsWhatRefusesGlm53OnFourStandardB300Nodes) {
  // DGX B300 hosts (2 TB, 1,638 GB usable) cannot hold what the GPUs give up: the refusal says
  // the trainer fits the GPUs only with more host memory than a node has.
  const Catalog& cat = RealCatalog();
  PlanRequest req;
  req.model = "GLM-5.3-753B";
  req.mode = Mode::kFull;
  req.colocate = true;
  req.assumptions.training_precision = "mxfp8";
  req.assumptions.optimizer_offload = true;
  req.cluster = *ParseCluster("4x8xB300", cat.hardware());
  absl::StatusOr<Plan> p = MakePlan(cat, req);
  ASSERT_TRUE(absl::IsResourceExhausted(p.status())) << p.status();
  std::string msg(p.status().message());
  EXPECT_TRUE(absl::StrContains(msg, "GB of host memory per node; 1638 GB usable of 2048 GB")) << msg;
  // Offload does not lower GLM-5.3's own minimum on standard hosts (the host is smaller than
  // the HBM it would relieve): 5x8 colocated with or without it.
  PlanRequest without = req;
  without.assumptions.optimizer_offload = false;
  Cluster b300 = StatedMinimum(cat, *cat.Find("GLM-5.3-753B")->row);
  auto own = [&](const PlanRequest& r) {
    return MinimumHardware(cat, *cat.Find("GLM-5.3-753B")->row, *cat.Find("GLM-5.3-753B")->model, Mode::kFull,
                           b300.gpu, Placement::kColocated, r);
  };
  std::optional<HardwareSpec> with_off = own(req), no_off = own(without);
  ASSERT_TRUE(with_off && no_off);
  EXPECT_EQ(with_off->ToString(), no_off->ToString());
  EXPECT_EQ(no_off->ToString(), "5x8xB300");

  // Unknown host memory and a non-Megatron trainer are bad input naming the flag.
  Cluster unknown = *ParseCluster("4x8xB300", cat.hardware());
  unknown.host_memory_gb = 0;
  req.cluster = unknown;
  absl::StatusOr<Plan> u = MakePlan(cat, req);
  EXPECT_TRUE(absl::IsInvalidArgument(u.status())) << u.status();
  EXPECT_TRUE(absl::StrContains(u.status().message(), "--optimizer-offload")) << u.status();
  PlanRequest fsdp;
  fsdp.model = "Qwen3-8B";
  fsdp.cluster = *ParseCluster("1x8xH100", cat.hardware());
  fsdp.backend = "fsdp";
  fsdp.assumptions.optimizer_offload = true;
  absl::StatusOr<Plan> v = MakePlan(cat, fsdp);
  EXPECT_TRUE(absl::IsInvalidArgument(v.status())) << v.status();
  EXPECT_TRUE(absl::StrContains(v.status().message(), "--optimizer-offload: Megatron-Core's CPU optimizer"))
      << v.status();
}

// Without --cluster, when the stated minimum does not fit, the plan goes to the smallest
// cluster that does; its nodes must carry their own host memory (the GPU type's share for
// their GPU count), which is what the offloaded optimizer is checked against and reported with.
TEST(OffloadPlanTest, APlanOnTheSearchedMinimumGetsItsOwnNodesHostMemory) {
  // A node with fewer GPUs than the reference system: Moonlight's row with its stated minimum
  // lowered to 1x2 H100 (512 GB of host memory); with offload it plans on 1x4 (1024 GB).
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "offload_test_models";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(std::filesystem::path(SKYRL_TEST_MODELS_DIR) / "hardware.yaml",
                             dir / "hardware.yaml", std::filesystem::copy_options::overwrite_existing);
  std::ifstream in(std::filesystem::path(SKYRL_TEST_MODELS_DIR) / "moonlight.yaml");
  std::stringstream text;
  text << in.rdbuf();
  ASSERT_TRUE(absl::StrContains(text.str(), "min_hardware: 1x8xH100"));
  std::ofstream(dir / "moonlight.yaml")
      << absl::StrReplaceAll(text.str(), {{"min_hardware: 1x8xH100", "min_hardware: 1x2xH100"}});
  absl::StatusOr<Catalog> toy = Catalog::LoadDir(dir.string());
  ASSERT_TRUE(toy.ok()) << toy.status();
  PlanRequest req;
  req.model = "Moonlight-16B-A3B";
  req.assumptions.optimizer_offload = true;
  absl::StatusOr<Plan> p = MakePlan(*toy, req);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->cluster.shape.ToString(), "1x4xH100");
  ASSERT_GT(p->trainer.shape.offload_fraction, 0);  // the host memory is in use
  const double share = p->cluster.gpu.HostMemoryGb(4);
  EXPECT_DOUBLE_EQ(share, 1024);
  EXPECT_DOUBLE_EQ(p->cluster.host_memory_gb, share);
  EXPECT_DOUBLE_EQ(OffloadFactsOf(*p).host_usable_per_node, share * 1e9 * 0.8);
  nlohmann::json j = nlohmann::json::parse(RenderPlanJson(*p));
  EXPECT_DOUBLE_EQ(j.at("cluster").at("host_memory_gb").get<double>(), share);
  EXPECT_DOUBLE_EQ(j.at("trainer").at("optimizer_offload").at("host_usable_gb_per_node").get<double>(),
                   share * 0.8);
  EXPECT_TRUE(absl::StrContains(RenderPlanText(*p), "of 819.2 GB usable (1024 GB per node)"))
      << RenderPlanText(*p);

  // The real table the other way round: Qwen3-30B-A3B does not fit its row's 1x4 H100 (1024 GB
  // hosts) and plans on a full 8-GPU node, whose host has the reference system's 2048 GB.
  const Catalog& cat = RealCatalog();
  PlanRequest qwen;
  qwen.model = "Qwen3-30B-A3B";
  qwen.assumptions.optimizer_offload = true;
  absl::StatusOr<Plan> q = MakePlan(cat, qwen);
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_EQ(q->cluster.shape.gpus_per_node, 8);
  ASSERT_GT(q->trainer.shape.offload_fraction, 0);
  EXPECT_DOUBLE_EQ(q->cluster.host_memory_gb, q->cluster.gpu.HostMemoryGb(8));
  EXPECT_DOUBLE_EQ(OffloadFactsOf(*q).host_usable_per_node, 2048e9 * 0.8);
}

TEST(OffloadPlanTest, AnAutomaticRuleWouldPlanRowsBelowTheirStatedMinimum) {
  // Why --optimizer-offload is a flag: allowed for every row (GPUs first, host memory checked),
  // some rows plan one step below the minimum the table states for them.
  const Catalog& cat = RealCatalog();
  std::vector<std::string> broken;
  for (const Row& r : cat.rows()) {
    if (!r.conflict.empty() || r.reference.conservative_minimum || r.reference.mode != Mode::kFull) continue;
    const ModelEntry* m = nullptr;
    for (const ModelEntry& e : r.models)
      if (e.name == r.reference.model) m = &e;
    ASSERT_NE(m, nullptr);
    if (DefaultBackend(r, *m) != "megatron") continue;
    PlanRequest opts;
    UseReferenceRecipe(r, &opts.assumptions);
    opts.assumptions.optimizer_offload = true;
    for (const Cluster& b : BelowMinimum(cat, StatedMinimum(cat, r))) {
      absl::StatusOr<Plan> p = PlanOn(cat, r, *m, r.reference.mode, b, r.reference.placement, opts);
      if (p.ok()) {
        EXPECT_GT(p->trainer.shape.offload_fraction, 0) << r.family;  // only offload made it fit
        broken.push_back(r.family + " on " + b.shape.ToString());
        break;
      }
    }
  }
  EXPECT_FALSE(broken.empty());
  for (const std::string& b : broken)
    std::printf("with offload allowed: %s plans below its stated minimum\n", b.c_str());
}

}  // namespace
}  // namespace skyrl::catalog
