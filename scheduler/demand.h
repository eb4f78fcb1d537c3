// What an actor or a placement-group bundle asks of a node, and where it landed.
//
// A demand is a resource set plus a label selector (node labels that must match exactly).
// GPUs have a shape: a request of g GPUs with g >= 1 (whole, see ValidateResourceRequest)
// takes g devices whole; 0 < g < 1 takes that fraction of one device, which it may share
// with other fractions (colocation). Value types; not synchronized.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/common/resources.h"

namespace skyrl::scheduler {

using Labels = std::map<std::string, std::string>;

struct Demand {
  ResourceSet resources;
  Labels selector;  // every key must be a node label with exactly this value

  // "GPU=8,CPU=4 accelerator=B200", for messages.
  std::string Describe() const;
  friend bool operator==(const Demand&, const Demand&) = default;
};

// How a GPU request maps to devices.
struct GpuShape {
  int devices = 0;         // how many device ids it takes
  int64_t units_each = 0;  // units (1/10000 of a device) taken on each
};
GpuShape ShapeOf(const ResourceSet& request);

// True when `labels` satisfy `selector`.
bool Matches(const Labels& labels, const Labels& selector);

// Checks a demand from outside: resources (GPU above 1 must be whole) and selector keys and
// values. `field` names it in the error ("bundles[3]").
absl::Status ValidateDemand(absl::string_view field, const Demand& demand);

// Where an actor or a bundle landed: a node and the device ids it was given, ascending.
struct Slot {
  std::string node_id;
  std::vector<int> gpu_ids;
  int bundle = -1;  // for an actor placed in a group: the bundle it went into
  friend bool operator==(const Slot&, const Slot&) = default;
};

// Placement group strategies, with Ray's meaning: PACK puts bundles on as few nodes as it
// can; SPREAD on as many; the STRICT forms fail instead of bending (one node; distinct nodes).
enum class Strategy { kPack, kSpread, kStrictPack, kStrictSpread };
absl::StatusOr<Strategy> ParseStrategy(absl::string_view name);
absl::string_view StrategyName(Strategy s);

}  // namespace skyrl::scheduler
