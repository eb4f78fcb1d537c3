// What a worker offers: detected CPUs, memory and GPUs, overridden by --resources, and the
// labels from --labels.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/common/resources.h"

namespace skyrl::worker {

struct GpuDetection {
  std::vector<int> ids;  // physical CUDA device indices, ascending
  std::string note;      // why there are none, when there are none
};

// Asks the CUDA runtime (when built with it) how many devices this process can see.
GpuDetection DetectGpus();

struct NodeOffer {
  ResourceSet resources;
  std::vector<int> gpu_ids;
};

// Detected CPU, memory and GPUs, with `overrides` (parsed --resources) replacing any
// detected value. A GPU override must be a whole number no larger than the device count (it
// takes the first N devices). `gpu_ids_text` (--gpu-ids, e.g. "0,1,2,3") declares the device
// ids instead of detecting them: for containers whose devices the CUDA runtime cannot list,
// and for CPU-only development clusters that exercise GPU placement.
absl::StatusOr<NodeOffer> BuildOffer(absl::string_view overrides_text, absl::string_view gpu_ids_text = "");

// Parses "k=v,k2=v2"; errors name the flag.
absl::StatusOr<std::map<std::string, std::string>> ParseLabels(absl::string_view text);

}  // namespace skyrl::worker
