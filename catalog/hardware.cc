#include "catalog/hardware.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "catalog/yaml_fields.h"

namespace skyrl::catalog {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path, absl::string_view what) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", what, " ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<YAML::Node> ParseYaml(const std::string& text, const std::string& file) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": not valid YAML: line ", e.mark.line + 1,
                                                   ", column ", e.mark.column + 1, ": ", e.msg));
  }
}

}  // namespace

absl::StatusOr<HardwareCatalog> HardwareCatalog::Load(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path, "hardware catalog");
  if (!text.ok()) return text.status();
  return Parse(*text, path);
}

absl::StatusOr<HardwareCatalog> HardwareCatalog::Parse(const std::string& yaml_text,
                                                       const std::string& file) {
  absl::StatusOr<YAML::Node> root = ParseYaml(yaml_text, file);
  if (!root.ok()) return root.status();
  internal::Fields top(*root, file, "");
  top.OnlyKeys({"gpus", "host_usable_percent"});
  HardwareCatalog hw;
  if (root->IsMap()) {
    int64_t pct = top.Int("host_usable_percent", false, 80, 1);
    if (top.status().ok() && pct > 100) top.Fail("host_usable_percent", "must be 1..100");
    if (!top.status().ok()) return top.status();
    hw.host_usable_fraction_ = static_cast<double>(pct) / 100;
  }
  YAML::Node list = root->IsMap() ? (*root)["gpus"] : YAML::Node();
  if (!list.IsDefined() || !list.IsSequence() || list.size() == 0) {
    top.Fail("gpus", "must be a non-empty list of GPU types");
    return top.status();
  }
  for (std::size_t i = 0; i < list.size(); ++i) {
    internal::Fields f(list[i], absl::StrCat(file, ": gpus[", i, "]"), "");
    f.OnlyKeys({"name", "memory_gb", "nvlink_gb_s", "nic_gb_s", "nvlink_domain", "training_formats",
                "host_memory_gb", "system_gpus", "host_link_gb_s"});
    GpuType g;
    g.name = f.Str("name", true);
    g.memory_gb = static_cast<double>(f.Int("memory_gb", true));
    g.nvlink_gb_s = static_cast<double>(f.Int("nvlink_gb_s", true));
    g.nic_gb_s = static_cast<double>(f.Int("nic_gb_s", true));
    g.nvlink_domain = static_cast<int>(f.Int("nvlink_domain", false, 8));
    g.training_formats = f.StrList("training_formats", false);
    g.host_memory_gb = static_cast<double>(f.Int("host_memory_gb", false, 0, 1));
    g.system_gpus = static_cast<int>(f.Int("system_gpus", false, 8, 1));
    g.host_link_gb_s = static_cast<double>(f.Int("host_link_gb_s", false, 0, 1));
    if (!f.status().ok()) return f.status();
    for (const std::string& t : g.training_formats)
      if (t != "fp8" && t != "mxfp8")
        return absl::InvalidArgumentError(absl::StrCat(file, ": gpus[", i, "] (", g.name,
                                                       "): training_formats: unknown \"", t,
                                                       "\" (known: fp8, mxfp8)"));
    if (!hw.gpus_.empty() && g.memory_gb < hw.gpus_.back().memory_gb)
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": gpus[", i, "] (", g.name,
                       "): memory_gb: the list must be ordered by memory, smallest first"));
    for (const GpuType& o : hw.gpus_)
      if (absl::AsciiStrToLower(o.name) == absl::AsciiStrToLower(g.name))
        return absl::InvalidArgumentError(
            absl::StrCat(file, ": gpus[", i, "]: name: ", g.name, " appears twice"));
    hw.gpus_.push_back(std::move(g));
  }
  return hw;
}

absl::StatusOr<GpuType> HardwareCatalog::Find(absl::string_view name) const {
  std::vector<std::string> names;
  for (const GpuType& g : gpus_) {
    if (absl::AsciiStrToLower(g.name) == absl::AsciiStrToLower(name)) return g;
    names.push_back(g.name);
  }
  return absl::NotFoundError(
      absl::StrCat("unknown GPU type \"", name, "\" (known: ", absl::StrJoin(names, ", "), ")"));
}

const GpuType* HardwareCatalog::Smaller(absl::string_view name) const {
  for (std::size_t i = 1; i < gpus_.size(); ++i)
    if (absl::AsciiStrToLower(gpus_[i].name) == absl::AsciiStrToLower(name)) return &gpus_[i - 1];
  return nullptr;
}

std::string HardwareSpec::ToString() const { return absl::StrCat(nodes, "x", gpus_per_node, "x", gpu); }

std::string HardwareSpec::Describe() const {
  std::string g = gpu == "any" ? "GPUs (any type)" : gpu;
  return absl::StrCat(nodes, nodes == 1 ? " node x " : " nodes x ", gpus_per_node, " ", g);
}

absl::StatusOr<HardwareSpec> ParseHardwareSpec(absl::string_view text, absl::string_view field) {
  std::string s(absl::StripAsciiWhitespace(text));
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": \"", text, "\" is not NODESxGPUSxTYPE (e.g. 2x8xB200): ", why));
  };
  // Accept "2x8 B200" and "1x4 GPUs" as the table prints them.
  std::replace(s.begin(), s.end(), ' ', 'x');
  std::vector<std::string> parts = absl::StrSplit(s, 'x', absl::SkipEmpty());
  if (parts.size() != 3) return bad("expected three parts");
  HardwareSpec h;
  if (!absl::SimpleAtoi(parts[0], &h.nodes) || h.nodes < 1 || h.nodes > 4096)
    return bad("nodes must be 1..4096");
  if (!absl::SimpleAtoi(parts[1], &h.gpus_per_node) || h.gpus_per_node < 1 || h.gpus_per_node > 64)
    return bad("GPUs per node must be 1..64");
  h.gpu = parts[2];
  if (absl::AsciiStrToLower(h.gpu) == "gpus" || absl::AsciiStrToLower(h.gpu) == "any") h.gpu = "any";
  return h;
}

Cluster OnShape(const Cluster& base, HardwareSpec shape, const GpuType& gpu) {
  Cluster c = base;
  shape.gpu = gpu.name;
  if (base.gpu.name != gpu.name)
    c.host_memory_gb = gpu.HostMemoryGb(shape.gpus_per_node);
  else if (shape.gpus_per_node != base.shape.gpus_per_node)
    c.host_memory_gb = base.host_memory_gb * shape.gpus_per_node / base.shape.gpus_per_node;
  c.gpu = gpu;
  c.shape = shape;
  return c;
}

absl::StatusOr<Cluster> ParseCluster(absl::string_view spec, const HardwareCatalog& hw) {
  std::string s(absl::StripAsciiWhitespace(spec));
  if (absl::EndsWith(s, ".yaml") || absl::EndsWith(s, ".yml") || s.find('/') != std::string::npos) {
    absl::StatusOr<std::string> text = ReadFile(s, "cluster file");
    if (!text.ok())
      return absl::Status(text.status().code(), absl::StrCat("--cluster: ", text.status().message()));
    return ParseClusterYaml(*text, s, hw);
  }
  absl::StatusOr<HardwareSpec> h = ParseHardwareSpec(s, "--cluster");
  if (!h.ok()) return h.status();
  if (h->gpu == "any")
    return absl::InvalidArgumentError("--cluster: name a GPU type (e.g. 2x8xB200), not \"GPUs\"");
  absl::StatusOr<GpuType> g = hw.Find(h->gpu);
  if (!g.ok()) return absl::InvalidArgumentError(absl::StrCat("--cluster: ", g.status().message()));
  Cluster defaults;
  defaults.host_usable_fraction = hw.host_usable_fraction();
  return OnShape(defaults, *h, *g);
}

absl::StatusOr<Cluster> ParseClusterYaml(const std::string& yaml_text, const std::string& file,
                                         const HardwareCatalog& hw) {
  absl::StatusOr<YAML::Node> root = ParseYaml(yaml_text, file);
  if (!root.ok()) return root.status();
  internal::Fields f(*root, file, "");
  f.OnlyKeys({"nodes", "gpus_per_node", "gpu", "cpus_per_node", "host_memory_gb"});
  HardwareSpec shape;
  shape.nodes = static_cast<int>(f.Int("nodes", true));
  shape.gpus_per_node = static_cast<int>(f.Int("gpus_per_node", true));
  std::string gpu = f.Str("gpu", true);
  Cluster defaults;
  defaults.cpus_per_node = static_cast<int>(f.Int("cpus_per_node", false, 0, 1));
  defaults.host_usable_fraction = hw.host_usable_fraction();
  const bool host_given = f.present("host_memory_gb");
  const double host_gb = static_cast<double>(f.Int("host_memory_gb", false, 0, 1));
  if (!f.status().ok()) return f.status();
  if (shape.gpus_per_node > 64)
    return absl::InvalidArgumentError(absl::StrCat(file, ": gpus_per_node: must be 1..64"));
  absl::StatusOr<GpuType> g = hw.Find(gpu);
  if (!g.ok()) return absl::InvalidArgumentError(absl::StrCat(file, ": gpu: ", g.status().message()));
  Cluster c = OnShape(defaults, shape, *g);  // the GPU type's host memory, unless the file says
  if (host_given) c.host_memory_gb = host_gb;
  return c;
}

}  // namespace skyrl::catalog
