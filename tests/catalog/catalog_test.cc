// Loading models/ and hardware.yaml, parameter counts against the stated figures, and the
// errors a broken catalog or cluster file gets.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <set>

#include "absl/strings/str_replace.h"
#include "catalog/catalog.h"
#include "catalog/params.h"
#include "tests/catalog/test_catalog.h"

namespace skyrl::catalog {
namespace {

using testing::RealCatalog;

TEST(CatalogTest, EveryRowOfBothTablesLoads) {
  const Catalog& c = RealCatalog();
  std::set<std::string> main_rows, other_rows;
  for (const Row& r : c.rows()) (r.table == "main" ? main_rows : other_rows).insert(r.family);
  // The main table has 11 rows, "Other models with example scripts" 10.
  EXPECT_EQ(main_rows, (std::set<std::string>{"Beam", "GLM-5.3", "GLM-5.3-Flash", "Kimi K2.7",
                                              "Kimi K2.5/K2.6", "Nemotron-3.5", "Nemotron-3",
                                              "Qwen3.8-Flash-Next", "Qwen3.6", "Qwen-3.5", "Qwen3"}));
  EXPECT_EQ(other_rows,
            (std::set<std::string>{"GLM-4.7-Flash", "GLM-4.5-Air", "Moonlight-16B-A3B", "MiMo-7B-RL",
                                   "Nemotron-Mini-4B-Instruct", "gpt-oss-20b", "Qwen3-VL",
                                   "Qwen3-Coder-30B-A3B", "Qwen2.5", "Qwen1.5-MoE-A2.7B"}));
  for (const Row& r : c.rows()) {
    EXPECT_FALSE(r.reading.empty()) << r.family;
    EXPECT_FALSE(r.models.empty()) << r.family;
  }
}

TEST(CatalogTest, HardwareHasTheFourTypesSmallestFirst) {
  const HardwareCatalog& hw = RealCatalog().hardware();
  ASSERT_EQ(hw.gpus().size(), 4u);
  EXPECT_EQ(hw.gpus()[0].name, "H100");
  EXPECT_EQ(hw.gpus()[3].name, "B300");
  for (std::size_t i = 1; i < hw.gpus().size(); ++i)
    EXPECT_GE(hw.gpus()[i].memory_gb, hw.gpus()[i - 1].memory_gb);
  ASSERT_NE(hw.Smaller("B300"), nullptr);
  EXPECT_EQ(hw.Smaller("B300")->name, "B200");
  EXPECT_EQ(hw.Smaller("H100"), nullptr);
  EXPECT_TRUE(absl::IsNotFound(hw.Find("A100").status()));
}

TEST(CatalogTest, ParameterCountsWithinFivePercentOfStated) {
  int checked = 0;
  for (const Row& r : RealCatalog().rows())
    for (const ModelEntry& m : r.models) {
      ParamCounts c = CountParams(m.arch);
      double total = ComparableTotal(m, c);
      EXPECT_NEAR(total / m.stated_total, 1.0, 0.05)
          << m.name << ": counted " << total / 1e9 << "B, stated " << m.stated_total / 1e9 << "B";
      if (m.stated_active > 0) {
        double active = ComparableActive(m, c);
        EXPECT_NEAR(active / m.stated_active, 1.0, 0.05)
            << m.name << ": counted active " << active / 1e9 << "B, stated " << m.stated_active / 1e9 << "B";
      }
      ++checked;
    }
  EXPECT_GE(checked, 40);
}

TEST(CatalogTest, PublicConfigsCountTheirKnownSizes) {
  // Independent figures from the model cards (not the YAML's stated fields).
  auto total = [](absl::string_view name) {
    absl::StatusOr<Catalog::Match> m = RealCatalog().Find(name);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? CountParams(m->model->arch).total() : 0.0;
  };
  EXPECT_NEAR(total("Qwen3-8B") / 8.19e9, 1.0, 0.01);
  EXPECT_NEAR(total("Qwen3-235B-A22B") / 235.1e9, 1.0, 0.01);
  EXPECT_NEAR(total("Moonlight-16B-A3B") / 15.96e9, 1.0, 0.02);
}

TEST(CatalogTest, FindIgnoresCaseAndPunctuation) {
  const Catalog& c = RealCatalog();
  absl::StatusOr<Catalog::Match> m = c.Find("kimi k2.7");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->model->name, "Kimi-K2.7");
  absl::StatusOr<Catalog::Match> none = c.Find("Llama-9-Zillion");
  EXPECT_TRUE(absl::IsNotFound(none.status()));
  EXPECT_NE(none.status().message().find("--model"), std::string::npos) << none.status();
}

TEST(CatalogTest, ReadingsOfShiftedRowsAreRecorded) {
  const Catalog& c = RealCatalog();
  absl::StatusOr<Catalog::Match> flash = c.Find("GLM-5.3-Flash-313B-A17B");
  ASSERT_TRUE(flash.ok());
  // "1x8 B300" was printed under Low precision: read as the minimum hardware.
  EXPECT_EQ(flash->row->min_hardware.ToString(), "1x8xB300");
  EXPECT_TRUE(flash->row->low_precision.empty());
  absl::StatusOr<Catalog::Match> kimi = c.Find("Kimi-K2.5");
  ASSERT_TRUE(kimi.ok());
  EXPECT_EQ(kimi->row->status, "expected");  // "Same arch as K2.7, should work"
  EXPECT_EQ(kimi->row->full_ft, Support::kNotWorking);
}

// ---- errors name the file, the entry and the field ----

const char* kGoodRow = R"(
family: Toy
table: main
printed: "| Toy | 1B | ✅ | ✅ | | 1x1 H100 | ✅ |"
reading: "complete"
support: {full_ft: supported, lora: supported, low_precision: []}
status: supported
backends: [fsdp]
min_hardware: 1x1xH100
reference: {model: Toy-1B, mode: full}
models:
  - name: Toy-1B
    source: public
    stated_total: 1B
    arch:
      hidden: 2048
      vocab: 32000
      attention: {kind: gqa, layers: 16, heads: 16, kv_heads: 4, head_dim: 128}
      ffn: {dense_layers: 16, size: 5632}
)";

absl::Status ParseToy(const std::string& text) {
  return Catalog::ParseRow(text, "models/toy.yaml", RealCatalog().hardware()).status();
}

TEST(CatalogErrorsTest, GoodRowParses) { EXPECT_TRUE(ParseToy(kGoodRow).ok()) << ParseToy(kGoodRow); }

TEST(CatalogErrorsTest, MalformedYamlNamesFileAndLine) {
  absl::Status s = ParseToy("family: [unclosed\n");
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("models/toy.yaml"), std::string::npos) << s;
  EXPECT_NE(s.message().find("line"), std::string::npos) << s;
}

TEST(CatalogErrorsTest, WrongShapesAreNamed) {
  absl::Status list = ParseToy("- a\n- b\n");
  EXPECT_TRUE(absl::IsInvalidArgument(list)) << list;
  EXPECT_NE(list.message().find("must be a map"), std::string::npos) << list;
  absl::Status empty = ParseToy("");
  EXPECT_TRUE(absl::IsInvalidArgument(empty)) << empty;
  EXPECT_NE(empty.message().find("models/toy.yaml: family: missing"), std::string::npos) << empty;
  absl::Status models =
      ParseToy(absl::StrReplaceAll(kGoodRow, {{"models:\n  - name", "models: 3\nx:\n  - name"}}));
  EXPECT_TRUE(absl::IsInvalidArgument(models)) << models;
}

TEST(CatalogErrorsTest, BadFieldsAreNamed) {
  struct Case {
    std::string from, to, expect;
  };
  std::vector<Case> cases = {
      {"      hidden: 2048\n", "", "model Toy-1B: arch.hidden: missing"},
      {"kv_heads: 4", "kv_heads: 5", "model Toy-1B: arch.attention.kv_heads: must divide heads"},
      {"layers: 16, heads", "layers: -3, heads", "arch.attention.layers: must be at least 1"},
      {"size: 5632", "size: big", "arch.ffn.size: must be an integer"},
      {"stated_total: 1B", "stated_total: lots",
       "model Toy-1B: stated_total: must be a positive parameter count"},
      {"kind: gqa", "kind: sparse", "arch.attention.kind: must be one of gqa, mla"},
      {"min_hardware: 1x1xH100", "min_hardware: 1x1xA100", "min_hardware: unknown GPU type \"A100\""},
      {"min_hardware: 1x1xH100", "min_hardware: eight", "min_hardware: \"eight\" is not NODESxGPUSxTYPE"},
      {"full_ft: supported", "full_ft: maybe",
       "support.full_ft: must be one of supported, untested, not_working"},
      {"reference: {model: Toy-1B", "reference: {model: Toy-2B", "reference.model: \"Toy-2B\" is not one of"},
      {"      vocab: 32000\n", "      vocab: 32000\n      vocabulary: 5\n", "arch.vocabulary: unknown field"},
      {"backends: [fsdp]", "backends: [jax]", "backends: unknown backend \"jax\""},
      {"mode: full}", "mode: full, training_precision: mxfp8}",
       "reference.training_precision: mxfp8 is not in support.low_precision"},
      {"mode: full}", "mode: full, training_precision: fp4}", "reference.training_precision: must be one of"},
      {"mode: full}", "mode: full, minimum: roomy}", "reference.minimum: must be one of exact, conservative"},
      {"mode: full}", "mode: full, optimizer_state: fp4}",
       "reference.optimizer_state: must be one of fp32, bf16, fp8"},
      {"mode: full}", "mode: full, optimizer_state: fp8}",
       "reference.optimizer_state: needs the megatron backend"},
      {"mode: full}", "mode: lora, optimizer_state: fp8}",
       "reference.optimizer_state: only for full fine-tuning"},
      {"mode: full}", "mode: full, minimum: conservative}\nconflict: x",
       "reference.minimum: a conservative minimum and a conflict exclude each other"},
  };
  for (const Case& c : cases) {
    std::string text = absl::StrReplaceAll(kGoodRow, {{c.from, c.to}});
    ASSERT_NE(text, kGoodRow) << "case did not apply: " << c.from;
    absl::Status s = ParseToy(text);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << c.expect << " -> " << s;
    EXPECT_NE(s.message().find("models/toy.yaml"), std::string::npos) << s;
    EXPECT_NE(s.message().find(c.expect), std::string::npos) << "want \"" << c.expect << "\" in: " << s;
  }
}

TEST(CatalogErrorsTest, ClusterTextAndYamlErrorsNameTheField) {
  const HardwareCatalog& hw = RealCatalog().hardware();
  absl::StatusOr<Cluster> ok = ParseCluster("2x8xB200", hw);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->shape.total_gpus(), 16);
  EXPECT_EQ(ok->gpu.memory_gb, 180);

  for (const char* bad : {"2x8", "0x8xB200", "2x8xA100", "2xeightxB200", "1x4xGPUs"}) {
    absl::StatusOr<Cluster> c = ParseCluster(bad, hw);
    EXPECT_TRUE(absl::IsInvalidArgument(c.status())) << bad << " -> " << c.status();
    EXPECT_NE(c.status().message().find("--cluster"), std::string::npos) << c.status();
  }
  absl::StatusOr<Cluster> y =
      ParseClusterYaml("nodes: 2\ngpus_per_node: 8\ngpu: B300\ncpus_per_node: 128\n", "c.yaml", hw);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(y->cpus_per_node, 128);
  struct Case {
    const char* text;
    const char* expect;
  };
  for (Case c : {Case{"nodes: 2\ngpus_per_node: 8\n", "c.yaml: gpu: missing"},
                 Case{"nodes: two\ngpus_per_node: 8\ngpu: B300\n", "c.yaml: nodes: must be an integer"},
                 Case{"nodes: 2\ngpus_per_node: 8\ngpu: V100\n", "c.yaml: gpu: unknown GPU type"},
                 Case{"nodes: 2\ngpus_per_node: 8\ngpu: B300\nzone: x\n", "c.yaml: zone: unknown field"},
                 Case{"nodes: 2\n  gpus: [\n", "c.yaml: not valid YAML"}}) {
    absl::StatusOr<Cluster> r = ParseClusterYaml(c.text, "c.yaml", hw);
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << c.text;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos)
        << "want \"" << c.expect << "\" in " << r.status();
  }
}

TEST(CatalogErrorsTest, ClusterFileIsReadByPath) {
  const HardwareCatalog& hw = RealCatalog().hardware();
  std::string path = ::testing::TempDir() + "/catalog_test_cluster.yaml";
  {
    std::ofstream f(path);
    f << "nodes: 4\ngpus_per_node: 8\ngpu: h200\n";
  }
  absl::StatusOr<Cluster> c = ParseCluster(path, hw);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->shape.ToString(), "4x8xH200");
  absl::StatusOr<Cluster> missing = ParseCluster("/nonexistent/cluster.yaml", hw);
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_NE(missing.status().message().find("--cluster"), std::string::npos);
}

TEST(CatalogErrorsTest, MissingDirectoryIsNotFound) {
  EXPECT_TRUE(absl::IsNotFound(Catalog::LoadDir("/nonexistent/models").status()));
}

}  // namespace
}  // namespace skyrl::catalog

namespace skyrl::catalog {
namespace {

TEST(HardwareCatalogTest, TrainingFormatsAreReadAndChecked) {
  const HardwareCatalog& hw = RealCatalog().hardware();
  absl::StatusOr<GpuType> h100 = hw.Find("H100"), b300 = hw.Find("B300");
  ASSERT_TRUE(h100.ok() && b300.ok());
  EXPECT_EQ(h100->training_formats, (std::vector<std::string>{"fp8"}));
  EXPECT_EQ(b300->training_formats, (std::vector<std::string>{"fp8", "mxfp8"}));
  absl::StatusOr<HardwareCatalog> bad = HardwareCatalog::Parse(
      "gpus:\n  - {name: X1, memory_gb: 80, nvlink_gb_s: 900, nic_gb_s: 50, training_formats: [fp4]}\n",
      "hw.yaml");
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status()));
  EXPECT_NE(bad.status().message().find("hw.yaml: gpus[0] (X1): training_formats: unknown \"fp4\""),
            std::string::npos)
      << bad.status();
}

}  // namespace
}  // namespace skyrl::catalog
