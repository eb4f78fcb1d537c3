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
  // Host (CPU) memory of the reference system, GB, shared by its `system_gpus` GPUs; 0 when
  // unknown. A node with fewer GPUs is assumed to get a proportional share (HostMemoryGb).
  double host_memory_gb = 0;
  int system_gpus = 8;
  // Host-to-GPU link per GPU and direction, GB/s (the PCIe generation of the reference
  // system's CPUs); 0 when unknown. Prices the traffic of an offloaded optimizer.
  double host_link_gb_s = 0;

  // Host memory of a node with `gpus_per_node` of these GPUs (the reference system's share).
  double HostMemoryGb(int gpus_per_node) const { return host_memory_gb * gpus_per_node / system_gpus; }
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
  // Of a node's host memory, the fraction an offloaded optimizer may use (the rest: OS, the
  // processes themselves, data loading, the object store). One figure for every type
  // (hardware.yaml `host_usable_percent`).
  double host_usable_fraction() const { return host_usable_fraction_; }

 private:
  std::vector<GpuType> gpus_;
  double host_usable_fraction_ = 0.8;
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
  // Host memory per node, GB: the cluster file's host_memory_gb, else the GPU type's reference
  // system's share (GpuType::HostMemoryGb); 0: unknown (then --optimizer-offload is refused).
  double host_memory_gb = 0;
  double host_usable_fraction = 0.8;  // from the hardware catalog
};

// `base` on `shape` nodes of `gpu` (shape.gpu is set to gpu.name), with the host memory per
// node rescaled: for the same GPU type, the same per GPU as `base` (a cluster file's figure
// scales with the node; unknown stays unknown); for another type (or a default-constructed
// `base`), `gpu`'s reference system's share (GpuType::HostMemoryGb). cpus_per_node and
// host_usable_fraction are kept. The one place host memory follows a change of node shape.
// REQUIRES: shape.gpus_per_node > 0, and base.shape.gpus_per_node > 0 when the type is the same.
Cluster OnShape(const Cluster& base, HardwareSpec shape, const GpuType& gpu);

// `spec` is either the text form ("2x8xB200") or a path to a YAML file:
//   nodes: 2
//   gpus_per_node: 8
//   gpu: B200
//   cpus_per_node: 96     # optional
//   host_memory_gb: 2048  # optional, per node (default: the GPU type's reference system's)
// Errors name the field and the file.
absl::StatusOr<Cluster> ParseCluster(absl::string_view spec, const HardwareCatalog& hw);
absl::StatusOr<Cluster> ParseClusterYaml(const std::string& yaml_text, const std::string& file,
                                         const HardwareCatalog& hw);

}  // namespace skyrl::catalog
