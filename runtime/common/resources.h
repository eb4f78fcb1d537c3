// Resource sets: how much of each resource a node offers or a request needs.
//
// Standard resources are "CPU", "GPU" and "memory"; any other well-formed name is a custom
// resource. Quantities are fixed point so that sums and differences are exact: CPU, GPU and
// custom resources count in units of 1/10000, memory counts in bytes. Text form:
//   CPU=8,GPU=0.5,memory=64Gi,custom=2
// Memory takes the suffixes K, M, G, T (powers of 1000) and Ki, Mi, Gi, Ti (powers of 1024).
// A value type; not synchronized.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace skyrl {

inline constexpr absl::string_view kCPU = "CPU";
inline constexpr absl::string_view kGPU = "GPU";
inline constexpr absl::string_view kMemory = "memory";

class ResourceSet {
 public:
  // Units per whole CPU, GPU or custom resource.
  static constexpr int64_t kUnitsPerWhole = 10000;

  ResourceSet() = default;

  // Parses the text form. Empty text is the empty set. Errors are InvalidArgument and name
  // the field: negative, NaN or infinite values, an unknown memory unit, a duplicate name,
  // a malformed entry, or a name like "cpu" that is a miscased standard name.
  static absl::StatusOr<ResourceSet> Parse(absl::string_view text);
  // Builds a set from name -> value (memory in bytes), e.g. from an RPC; same validation.
  static absl::StatusOr<ResourceSet> FromMap(const std::map<std::string, double>& values);

  // Sets `name` to `value` (memory: bytes), with the same validation as Parse.
  absl::Status Set(absl::string_view name, double value);
  // The value in whole units (memory: bytes); 0 when absent.
  double Get(absl::string_view name) const;
  // The raw fixed-point amount; 0 when absent.
  int64_t GetUnits(absl::string_view name) const;
  bool Has(absl::string_view name) const { return units_.contains(name); }

  // True when every resource here is at least `other`'s amount of it.
  bool Contains(const ResourceSet& other) const;
  ResourceSet& operator+=(const ResourceSet& other);
  // REQUIRES: Contains(other); amounts never go negative.
  ResourceSet& operator-=(const ResourceSet& other);
  friend bool operator==(const ResourceSet&, const ResourceSet&) = default;

  bool empty() const { return units_.empty(); }
  // A transparent comparator: look-ups by name allocate nothing (placement reads the GPU
  // units of every node for every group).
  using Units = std::map<std::string, int64_t, std::less<>>;
  const Units& units() const { return units_; }
  std::map<std::string, double> ToMap() const;
  // Canonical text: CPU, GPU, memory first, then custom names in order.
  std::string ToString() const;
  // For people: like ToString, but memory that is not a whole number of its unit is shown
  // rounded to two decimals ("23.54Gi"). Not for parsing back.
  std::string ToHumanString() const;

 private:
  std::string Format(bool human) const;
  Units units_;
};

// Checks what an actor or bundle may ask for: a GPU request above 1 must be whole
// (a fraction shares one device; several devices are never split).
absl::Status ValidateResourceRequest(const ResourceSet& request);

// Checks a resource name: 1-64 characters of [A-Za-z0-9_./-], starting with a letter or '_'.
absl::Status ValidateResourceName(absl::string_view name);

}  // namespace skyrl
