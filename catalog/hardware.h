// GPU types (models/hardware.yaml) and cluster shapes ("2x8xB200" or a cluster YAML).
// Plain values; thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace skyrl::catalog {

struct GpuType {
  std::string name;
  double memory_gb = 0;    // HBM, 10^9 bytes
  double nvlink_gb_s = 0;  // per GPU, both directions (vendor figure)
  double nic_gb_s = 0;     // per GPU, one direction
  int nvlink_domain = 8;   // GPUs sharing one NVLink domain
  // Low-precision training formats its tensor cores run: fp8 (Hopper and later), mxfp8
  // (Blackwell's block-scaled formats).
  std::vector<std::string> training_formats;
};

// Ordered from the smallest memory to the largest.
class HardwareCatalog {
 public:
  static absl::StatusOr<HardwareCatalog> Load(const std::string& path);
  static absl::StatusOr<HardwareCatalog> Parse(const std::string& yaml_text, const std::string& file);

  const std::vector<GpuType>& gpus() const { return gpus_; }
  // Case-insensitive; NotFound lists the known types.
  absl::StatusOr<GpuType> Find(absl::string_view name) const;
  // The next smaller type, or nullptr for the smallest.
  const GpuType* Smaller(absl::string_view name) const;
  const GpuType& Smallest() const { return gpus_.front(); }

 private:
  std::vector<GpuType> gpus_;
};

// nodes x gpus_per_node x gpu. `gpu` may be "any" in a table minimum ("1x4 GPUs").
struct HardwareSpec {
  int nodes = 0;
  int gpus_per_node = 0;
  std::string gpu;

  int total_gpus() const { return nodes * gpus_per_node; }
  std::string ToString() const;  // "2x8xB200"
  std::string Describe() const;  // "2 nodes x 8 B200" / "1 node x 4 GPUs (any type)"
};

// "2x8xB200", "2x8 B200", "1x4 GPUs"/"1x4xany". InvalidArgument names `field`.
absl::StatusOr<HardwareSpec> ParseHardwareSpec(absl::string_view text, absl::string_view field);

// A cluster to plan for: every node alike.
struct Cluster {
  HardwareSpec shape;  // gpu is a concrete type
  GpuType gpu;
  int cpus_per_node = 0;  // 0: unknown (bundles then ask 1 CPU per GPU)
  int host_memory_gb = 0;  // per node; 0: unknown (then --optimizer-offload is refused)
};

// `spec` is either the text form ("2x8xB200") or a path to a YAML file:
//   nodes: 2
//   gpus_per_node: 8
//   gpu: B200
//   cpus_per_node: 96     # optional
//   host_memory_gb: 2048  # optional, per node: needed by --optimizer-offload
// Errors name the field and the file.
absl::StatusOr<Cluster> ParseCluster(absl::string_view spec, const HardwareCatalog& hw);
absl::StatusOr<Cluster> ParseClusterYaml(const std::string& yaml_text, const std::string& file,
                                         const HardwareCatalog& hw);

}  // namespace skyrl::catalog
