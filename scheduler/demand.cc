#include "scheduler/demand.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/common/ids.h"

namespace skyrl::scheduler {

std::string Demand::Describe() const {
  std::string out = resources.empty() ? std::string("nothing") : resources.ToHumanString();
  for (const auto& [k, v] : selector) absl::StrAppend(&out, " ", k, "=", v);
  return out;
}

GpuShape ShapeOf(const ResourceSet& request) {
  int64_t units = request.GetUnits(kGPU);
  if (units <= 0) return {};
  if (units < ResourceSet::kUnitsPerWhole) return {1, units};
  return {int(units / ResourceSet::kUnitsPerWhole), ResourceSet::kUnitsPerWhole};
}

bool Matches(const Labels& labels, const Labels& selector) {
  for (const auto& [k, v] : selector) {
    auto it = labels.find(k);
    if (it == labels.end() || it->second != v) return false;
  }
  return true;
}

absl::Status ValidateDemand(absl::string_view field, const Demand& demand) {
  if (absl::Status s = ValidateResourceRequest(demand.resources); !s.ok())
    return absl::InvalidArgumentError(absl::StrCat(field, ".resources: ", s.message()));
  for (const auto& [k, v] : demand.selector) {
    if (absl::Status s = ValidateName(absl::StrCat(field, ".label_selector key"), k); !s.ok()) return s;
    if (v.empty() || v.size() > 256)
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".label_selector[", k, "]: value must be 1-256 characters"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Strategy> ParseStrategy(absl::string_view name) {
  std::string n = absl::AsciiStrToUpper(name);
  if (n == "PACK" || n.empty()) return Strategy::kPack;
  if (n == "SPREAD") return Strategy::kSpread;
  if (n == "STRICT_PACK") return Strategy::kStrictPack;
  if (n == "STRICT_SPREAD") return Strategy::kStrictSpread;
  return absl::InvalidArgumentError(
      absl::StrCat("strategy: '", name, "' is not one of PACK, SPREAD, STRICT_PACK, STRICT_SPREAD"));
}

absl::string_view StrategyName(Strategy s) {
  switch (s) {
    case Strategy::kPack:
      return "PACK";
    case Strategy::kSpread:
      return "SPREAD";
    case Strategy::kStrictPack:
      return "STRICT_PACK";
    case Strategy::kStrictSpread:
      return "STRICT_SPREAD";
  }
  return "?";
}

}  // namespace skyrl::scheduler
