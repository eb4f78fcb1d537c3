#include "runtime/common/resources.h"

#include <cctype>
#include <cmath>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace skyrl {
namespace {

// Largest amount we accept, well inside int64 once scaled.
constexpr double kMaxWhole = 1e12;

std::string FormatWhole(int64_t units) {
  int64_t whole = units / ResourceSet::kUnitsPerWhole;
  int64_t frac = units % ResourceSet::kUnitsPerWhole;
  if (frac == 0) return absl::StrCat(whole);
  std::string f = absl::StrCat(frac + ResourceSet::kUnitsPerWhole).substr(1);  // zero-padded
  while (!f.empty() && f.back() == '0') f.pop_back();
  return absl::StrCat(whole, ".", f);
}

std::string FormatBytes(int64_t bytes) {
  static constexpr std::pair<const char*, int64_t> kUnits[] = {
      {"Ti", int64_t(1) << 40}, {"Gi", int64_t(1) << 30}, {"Mi", int64_t(1) << 20}, {"Ki", int64_t(1) << 10}};
  if (bytes == 0) return "0";
  for (auto [suffix, size] : kUnits)
    if (bytes % size == 0) return absl::StrCat(bytes / size, suffix);
  return absl::StrCat(bytes);
}

std::string FormatBytesHuman(int64_t bytes) {
  static constexpr std::pair<const char*, double> kUnits[] = {
      {"Ti", 1099511627776.0}, {"Gi", 1073741824.0}, {"Mi", 1048576.0}, {"Ki", 1024.0}};
  std::string exact = FormatBytes(bytes);
  if (exact.size() <= 6) return exact;
  for (auto [suffix, size] : kUnits)
    if (double(bytes) >= size) return absl::StrFormat("%.2f%s", double(bytes) / size, suffix);
  return exact;
}

absl::StatusOr<int64_t> ToUnits(absl::string_view name, double value) {
  if (std::isnan(value)) return absl::InvalidArgumentError(absl::StrCat("resource ", name, ": value is NaN"));
  if (std::isinf(value))
    return absl::InvalidArgumentError(absl::StrCat("resource ", name, ": value is infinite"));
  if (value < 0)
    return absl::InvalidArgumentError(absl::StrCat("resource ", name, ": value ", value, " is negative"));
  bool memory = name == kMemory;
  double scaled = memory ? value : value * ResourceSet::kUnitsPerWhole;
  double limit = memory ? kMaxWhole * 1e4 : kMaxWhole * ResourceSet::kUnitsPerWhole;
  if (scaled > limit)
    return absl::InvalidArgumentError(absl::StrCat("resource ", name, ": value ", value, " is too large"));
  int64_t units = std::llround(scaled);
  if (units == 0 && value > 0)
    return absl::InvalidArgumentError(absl::StrCat("resource ", name, ": value ", value, " is finer than ",
                                                   memory ? "one byte" : "the granularity 0.0001"));
  return units;
}

absl::StatusOr<double> ParseMemory(absl::string_view text) {
  static constexpr std::pair<absl::string_view, double> kSuffixes[] = {
      {"Ki", 1024.0}, {"Mi", 1048576.0}, {"Gi", 1073741824.0}, {"Ti", 1099511627776.0},
      {"K", 1e3},     {"M", 1e6},        {"G", 1e9},           {"T", 1e12}};
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.' ||
                             text[i] == '-' || text[i] == '+' || text[i] == 'e' || text[i] == 'E'))
    ++i;
  absl::string_view number = text.substr(0, i), suffix = text.substr(i);
  double value;
  if (number.empty() || !absl::SimpleAtod(number, &value))
    return absl::InvalidArgumentError(absl::StrCat("resource memory: \"", text, "\" is not a number"));
  if (suffix.empty()) return value;
  for (auto [s, mult] : kSuffixes)
    if (suffix == s) return value * mult;
  return absl::InvalidArgumentError(
      absl::StrCat("resource memory: unknown unit \"", suffix, "\" (use K, M, G, T, Ki, Mi, Gi or Ti)"));
}

}  // namespace

absl::Status ValidateResourceName(absl::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("resource name must not be empty");
  if (name.size() > 64)
    return absl::InvalidArgumentError(
        absl::StrCat("resource name \"", name.substr(0, 64), "...\" is longer than 64 characters"));
  if (!(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_'))
    return absl::InvalidArgumentError(
        absl::StrCat("resource name \"", name, "\" must start with a letter or '_'"));
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '/' || c == '-'))
      return absl::InvalidArgumentError(
          absl::StrCat("resource name \"", name, "\" has a character outside [A-Za-z0-9_./-]"));
  }
  for (absl::string_view standard : {kCPU, kGPU, kMemory}) {
    if (name != standard && absl::EqualsIgnoreCase(name, standard))
      return absl::InvalidArgumentError(
          absl::StrCat("resource name \"", name, "\": did you mean \"", standard, "\"?"));
  }
  return absl::OkStatus();
}

absl::Status ResourceSet::Set(absl::string_view name, double value) {
  if (absl::Status s = ValidateResourceName(name); !s.ok()) return s;
  absl::StatusOr<int64_t> units = ToUnits(name, value);
  if (!units.ok()) return units.status();
  units_[std::string(name)] = *units;
  return absl::OkStatus();
}

absl::StatusOr<ResourceSet> ResourceSet::Parse(absl::string_view text) {
  ResourceSet set;
  text = absl::StripAsciiWhitespace(text);
  if (text.empty()) return set;
  for (absl::string_view entry : absl::StrSplit(text, ',')) {
    entry = absl::StripAsciiWhitespace(entry);
    std::vector<absl::string_view> kv = absl::StrSplit(entry, absl::MaxSplits('=', 1));
    if (kv.size() != 2 || kv[0].empty())
      return absl::InvalidArgumentError(absl::StrCat("resources: entry \"", entry, "\" is not NAME=VALUE"));
    absl::string_view name = absl::StripAsciiWhitespace(kv[0]);
    absl::string_view raw = absl::StripAsciiWhitespace(kv[1]);
    if (set.Has(name)) return absl::InvalidArgumentError(absl::StrCat("resource ", name, ": given twice"));
    double value;
    if (name == kMemory) {
      absl::StatusOr<double> bytes = ParseMemory(raw);
      if (!bytes.ok()) return bytes.status();
      value = *bytes;
    } else if (raw.empty() || !absl::SimpleAtod(raw, &value)) {
      if (absl::Status s = ValidateResourceName(name); !s.ok()) return s;
      return absl::InvalidArgumentError(absl::StrCat("resource ", name, ": \"", raw, "\" is not a number"));
    }
    if (absl::Status s = set.Set(name, value); !s.ok()) return s;
  }
  return set;
}

absl::StatusOr<ResourceSet> ResourceSet::FromMap(const std::map<std::string, double>& values) {
  ResourceSet set;
  for (const auto& [name, value] : values)
    if (absl::Status s = set.Set(name, value); !s.ok()) return s;
  return set;
}

double ResourceSet::Get(absl::string_view name) const {
  int64_t u = GetUnits(name);
  return name == kMemory ? double(u) : double(u) / kUnitsPerWhole;
}

int64_t ResourceSet::GetUnits(absl::string_view name) const {
  auto it = units_.find(name);
  return it == units_.end() ? 0 : it->second;
}

bool ResourceSet::Contains(const ResourceSet& other) const {
  for (const auto& [name, amount] : other.units_)
    if (GetUnits(name) < amount) return false;
  return true;
}

ResourceSet& ResourceSet::operator+=(const ResourceSet& other) {
  for (const auto& [name, amount] : other.units_) units_[name] += amount;
  return *this;
}

ResourceSet& ResourceSet::operator-=(const ResourceSet& other) {
  for (const auto& [name, amount] : other.units_) {
    int64_t& mine = units_[name];
    mine -= amount;
    if (mine < 0) std::abort();  // broken invariant: the caller must check Contains first
  }
  return *this;
}

std::map<std::string, double> ResourceSet::ToMap() const {
  std::map<std::string, double> out;
  for (const auto& [name, amount] : units_) out[name] = Get(name);
  return out;
}

std::string ResourceSet::ToString() const { return Format(false); }
std::string ResourceSet::ToHumanString() const { return Format(true); }

std::string ResourceSet::Format(bool human) const {
  std::vector<std::string> parts;
  auto add = [&](const std::string& name, int64_t amount) {
    std::string value = name != kMemory ? FormatWhole(amount)
                        : human         ? FormatBytesHuman(amount)
                                        : FormatBytes(amount);
    parts.push_back(absl::StrCat(name, "=", value));
  };
  for (absl::string_view standard : {kCPU, kGPU, kMemory}) {
    auto it = units_.find(standard);
    if (it != units_.end()) add(it->first, it->second);
  }
  for (const auto& [name, amount] : units_)
    if (name != kCPU && name != kGPU && name != kMemory) add(name, amount);
  return absl::StrJoin(parts, ",");
}

absl::Status ValidateResourceRequest(const ResourceSet& request) {
  int64_t gpu = request.GetUnits(kGPU);
  if (gpu > ResourceSet::kUnitsPerWhole && gpu % ResourceSet::kUnitsPerWhole != 0)
    return absl::InvalidArgumentError(
        absl::StrCat("resource GPU: a request above 1 must be whole, got ", request.Get(kGPU)));
  return absl::OkStatus();
}

}  // namespace skyrl
