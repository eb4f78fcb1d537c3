#include "runtime/worker/node_resources.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "runtime/common/ids.h"

#if SKYRL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace skyrl::worker {

GpuDetection DetectGpus() {
  GpuDetection d;
#if SKYRL_HAVE_CUDA
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    d.note = absl::StrCat("no CUDA device: cudaGetDeviceCount says ", cudaGetErrorName(err), " (", int(err),
                          "): ", cudaGetErrorString(err));
    return d;
  }
  for (int i = 0; i < count; ++i) d.ids.push_back(i);
  if (count == 0) d.note = "no CUDA device: cudaGetDeviceCount found 0";
#else
  d.note = "no CUDA device: this build has no CUDA runtime";
#endif
  return d;
}

absl::StatusOr<NodeOffer> BuildOffer(absl::string_view overrides_text, absl::string_view gpu_ids_text) {
  absl::StatusOr<ResourceSet> overrides = ResourceSet::Parse(overrides_text);
  if (!overrides.ok())
    return absl::InvalidArgumentError(absl::StrCat("--resources: ", overrides.status().message()));
  NodeOffer offer;
  cpu_set_t set;
  int cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
  double memory = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  GpuDetection gpus;
  if (absl::StripAsciiWhitespace(gpu_ids_text).empty()) {
    gpus = DetectGpus();
  } else {
    for (absl::string_view part : absl::StrSplit(gpu_ids_text, ',')) {
      int id = -1;
      if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &id) || id < 0 || id > 4095)
        return absl::InvalidArgumentError(
            absl::StrCat("--gpu-ids: \"", part, "\" is not a device id (0-4095)"));
      for (int seen : gpus.ids)
        if (seen == id) return absl::InvalidArgumentError(absl::StrCat("--gpu-ids: ", id, " given twice"));
      gpus.ids.push_back(id);
    }
    std::sort(gpus.ids.begin(), gpus.ids.end());
    gpus.note = "declared by --gpu-ids";
  }
  (void)offer.resources.Set(kCPU, cpus);
  (void)offer.resources.Set(kMemory, memory);
  offer.gpu_ids = gpus.ids;
  if (overrides->Has(kGPU)) {
    double want = overrides->Get(kGPU);
    if (want != std::floor(want))
      return absl::InvalidArgumentError("--resources: GPU must be a whole number of devices");
    if (want > double(gpus.ids.size()))
      return absl::InvalidArgumentError(
          absl::StrCat("--resources: GPU=", want, " but only ", gpus.ids.size(), " detected",
                       gpus.note.empty() ? "" : absl::StrCat(" (", gpus.note, ")")));
    offer.gpu_ids.resize(size_t(want));
  }
  for (const auto& [name, units] : overrides->units()) (void)offer.resources.Set(name, overrides->Get(name));
  (void)offer.resources.Set(kGPU, double(offer.gpu_ids.size()));
  return offer;
}

absl::StatusOr<std::map<std::string, std::string>> ParseLabels(absl::string_view text) {
  std::map<std::string, std::string> labels;
  text = absl::StripAsciiWhitespace(text);
  if (text.empty()) return labels;
  for (absl::string_view entry : absl::StrSplit(text, ',')) {
    std::vector<absl::string_view> kv = absl::StrSplit(entry, absl::MaxSplits('=', 1));
    if (kv.size() != 2)
      return absl::InvalidArgumentError(absl::StrCat("--labels: \"", entry, "\" is not KEY=VALUE"));
    if (absl::Status s = ValidateName("--labels key", kv[0]); !s.ok()) return s;
    if (absl::StartsWith(kv[0], kReservedLabelPrefix))
      return absl::InvalidArgumentError(
          absl::StrCat("--labels: keys starting \"", kReservedLabelPrefix, "\" are set by the head"));
    if (!kv[1].empty())
      if (absl::Status s = ValidateName(absl::StrCat("--labels value of ", kv[0]), kv[1]); !s.ok()) return s;
    if (!labels.emplace(std::string(kv[0]), std::string(kv[1])).second)
      return absl::InvalidArgumentError(absl::StrCat("--labels: ", kv[0], " given twice"));
  }
  return labels;
}

}  // namespace skyrl::worker
