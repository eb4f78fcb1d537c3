// A pool of resources that demands are carved from: a whole node, or a placement-group
// bundle reserved on a node. It keeps, besides the resource totals, how much of each GPU
// device is taken, so whole-GPU requests get free devices and fractions share devices.
// A value type; not synchronized.
#pragma once

#include <map>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "runtime/common/resources.h"

namespace skyrl::scheduler {

class Pool {
 public:
  Pool() = default;
  // `gpu_capacity`: device id -> units of it this pool may hand out (kUnitsPerWhole for a
  // node's own device; a bundle's share otherwise). The GPU amount in `total` must equal
  // the sum of the capacities.
  Pool(ResourceSet total, std::map<int, int64_t> gpu_capacity);
  // A node: `gpu_ids.size()` whole devices.
  static Pool ForNode(const ResourceSet& total, const std::vector<int>& gpu_ids);

  // The devices a request would get, or nullopt when it does not fit (resources or device
  // shape). Whole devices: the lowest free ids. A fraction: the device it fits most tightly
  // (most already taken), then the lowest id, so fractions share devices (colocation).
  std::optional<std::vector<int>> Fit(const ResourceSet& need) const;
  // Takes `need` on exactly `gpu_ids`. FailedPrecondition (nothing changed) when it does not
  // fit there.
  absl::Status Take(const ResourceSet& need, const std::vector<int>& gpu_ids);
  // Returns what Take took. REQUIRES: the same arguments as a successful Take.
  void Give(const ResourceSet& need, const std::vector<int>& gpu_ids);

  const ResourceSet& total() const { return total_; }
  const ResourceSet& free() const { return free_; }
  ResourceSet used() const;
  const std::map<int, int64_t>& gpu_capacity() const { return gpu_cap_; }
  const std::map<int, int64_t>& gpu_used() const { return gpu_used_; }
  // How many devices are entirely free: what whole-GPU requests can still get.
  int FreeWholeDevices() const { return free_whole_; }
  // True when nothing is taken.
  bool idle() const;

 private:
  ResourceSet total_, free_;
  std::map<int, int64_t> gpu_cap_;
  std::map<int, int64_t> gpu_used_;  // every id of gpu_cap_, 0 when untouched
  int free_whole_ = 0;               // whole-capacity devices with nothing taken
};

}  // namespace skyrl::scheduler
