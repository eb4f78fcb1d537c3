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
// detected value. A GPU override must be a whole number no larger than the detected count
// (it takes the first N devices), unless no CUDA runtime is present at all.
absl::StatusOr<NodeOffer> BuildOffer(absl::string_view overrides_text);

// Parses "k=v,k2=v2"; errors name the flag.
absl::StatusOr<std::map<std::string, std::string>> ParseLabels(absl::string_view text);

}  // namespace skyrl::worker
