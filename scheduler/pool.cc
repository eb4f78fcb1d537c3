#include "scheduler/pool.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "scheduler/demand.h"

namespace skyrl::scheduler {

Pool::Pool(ResourceSet total, std::map<int, int64_t> gpu_capacity)
    : total_(std::move(total)), free_(total_), gpu_cap_(std::move(gpu_capacity)) {
  for (const auto& [id, cap] : gpu_cap_) {
    gpu_used_[id] = 0;
    if (cap == ResourceSet::kUnitsPerWhole) ++free_whole_;
  }
}

Pool Pool::ForNode(const ResourceSet& total, const std::vector<int>& gpu_ids) {
  std::map<int, int64_t> cap;
  for (int id : gpu_ids) cap[id] = ResourceSet::kUnitsPerWhole;
  return Pool(total, std::move(cap));
}

std::optional<std::vector<int>> Pool::Fit(const ResourceSet& need) const {
  if (!free_.Contains(need)) return std::nullopt;
  GpuShape shape = ShapeOf(need);
  std::vector<int> ids;
  if (shape.devices == 0) return ids;
  if (shape.units_each == ResourceSet::kUnitsPerWhole) {
    // Whole devices: the lowest ids that are entirely free.
    for (const auto& [id, cap] : gpu_cap_) {
      if (gpu_used_.at(id) == 0 && cap == ResourceSet::kUnitsPerWhole) ids.push_back(id);
      if (int(ids.size()) == shape.devices) return ids;
    }
    return std::nullopt;
  }
  // A fraction: the tightest device that still holds it, so fractions share devices.
  int best = -1;
  int64_t best_left = 0;
  for (const auto& [id, cap] : gpu_cap_) {
    int64_t left = cap - gpu_used_.at(id);
    if (left < shape.units_each) continue;
    if (best < 0 || left < best_left) best = id, best_left = left;
  }
  if (best < 0) return std::nullopt;
  ids.push_back(best);
  return ids;
}

absl::Status Pool::Take(const ResourceSet& need, const std::vector<int>& gpu_ids) {
  if (!free_.Contains(need))
    return absl::FailedPreconditionError(
        absl::StrCat("needs ", need.ToHumanString(), ", has ", free_.ToHumanString(), " free"));
  GpuShape shape = ShapeOf(need);
  if (int(gpu_ids.size()) != shape.devices)
    return absl::FailedPreconditionError(
        absl::StrCat("needs ", shape.devices, " GPU id(s), was given ", gpu_ids.size()));
  for (size_t i = 0; i < gpu_ids.size(); ++i) {
    auto it = gpu_cap_.find(gpu_ids[i]);
    if (it == gpu_cap_.end())
      return absl::FailedPreconditionError(absl::StrCat("GPU ", gpu_ids[i], " is not in this pool"));
    for (size_t j = 0; j < i; ++j)
      if (gpu_ids[j] == gpu_ids[i])
        return absl::FailedPreconditionError(absl::StrCat("GPU ", gpu_ids[i], " given twice"));
    if (it->second - gpu_used_.at(gpu_ids[i]) < shape.units_each)
      return absl::FailedPreconditionError(
          absl::StrCat("GPU ", gpu_ids[i], " has ",
                       double(it->second - gpu_used_.at(gpu_ids[i])) / ResourceSet::kUnitsPerWhole,
                       " free, needs ", double(shape.units_each) / ResourceSet::kUnitsPerWhole));
  }
  free_ -= need;
  for (int id : gpu_ids) {
    int64_t& used = gpu_used_[id];
    if (used == 0 && gpu_cap_.at(id) == ResourceSet::kUnitsPerWhole) --free_whole_;
    used += shape.units_each;
  }
  return absl::OkStatus();
}

void Pool::Give(const ResourceSet& need, const std::vector<int>& gpu_ids) {
  free_ += need;
  GpuShape shape = ShapeOf(need);
  for (int id : gpu_ids) {
    int64_t& used = gpu_used_[id];
    used -= shape.units_each;
    if (used < 0) std::abort();  // broken invariant: gave back what was never taken
    if (used == 0 && gpu_cap_.at(id) == ResourceSet::kUnitsPerWhole) ++free_whole_;
  }
  if (!total_.Contains(free_)) std::abort();
}

ResourceSet Pool::used() const {
  ResourceSet u = total_;
  u -= free_;
  return u;
}

bool Pool::idle() const {
  for (const auto& [id, used] : gpu_used_)
    if (used != 0) return false;
  return free_.Contains(total_);
}

}  // namespace skyrl::scheduler
