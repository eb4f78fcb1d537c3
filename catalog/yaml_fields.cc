#include "catalog/yaml_fields.h"

#include <cmath>
#include <cstdlib>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace skyrl::catalog::internal {

Fields::Fields(YAML::Node node, std::string where, std::string prefix)
    : node_(std::move(node)),
      where_(std::move(where)),
      prefix_(std::move(prefix)),
      error_(std::make_shared<absl::Status>()) {
  if (node_.IsDefined() && !node_.IsNull() && !node_.IsMap()) {
    std::string field = prefix_.empty() ? "(top level)" : prefix_.substr(0, prefix_.size() - 1);
    Fail(field, "must be a map of fields");
  }
}

void Fields::Fail(const std::string& field, const std::string& what) {
  if (error_->ok()) *error_ = absl::InvalidArgumentError(absl::StrCat(where_, ": ", field, ": ", what));
}

absl::Status Fields::status() const { return *error_; }

bool Fields::present(const char* key) const {
  if (!node_.IsMap()) return false;
  YAML::Node v = node_[key];
  return v.IsDefined() && !v.IsNull();
}

YAML::Node Fields::Get(const char* key, bool required) {
  YAML::Node v;
  if (node_.IsMap()) v = node_[key];
  if ((!v.IsDefined() || v.IsNull()) && required) Fail(Path(key), "missing");
  return v;
}

int64_t Fields::Int(const char* key, bool required, int64_t def, int64_t min) {
  YAML::Node v = Get(key, required);
  if (!v.IsDefined() || v.IsNull()) return def;
  if (!v.IsScalar()) {
    Fail(Path(key), "must be an integer");
    return def;
  }
  const std::string& s = v.Scalar();
  char* end = nullptr;
  long long x = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0') {
    Fail(Path(key), absl::StrCat("must be an integer, got \"", s, "\""));
    return def;
  }
  if (x < min) {
    Fail(Path(key), absl::StrCat("must be at least ", min, ", got ", x));
    return def;
  }
  return x;
}

bool ParseCount(const std::string& text, double* out) {
  std::string s = text;
  while (!s.empty() && s.back() == ' ') s.pop_back();
  if (s.empty()) return false;
  double mul = 1;
  switch (s.back()) {
    case 'K':
    case 'k':
      mul = 1e3;
      break;
    case 'M':
    case 'm':
      mul = 1e6;
      break;
    case 'B':
    case 'b':
      mul = 1e9;
      break;
    case 'T':
    case 't':
      mul = 1e12;
      break;
    default:
      break;
  }
  if (mul != 1) s.pop_back();
  char* end = nullptr;
  double x = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !std::isfinite(x) || x <= 0) return false;
  *out = x * mul;
  return true;
}

double Fields::Count(const char* key, bool required) {
  YAML::Node v = Get(key, required);
  if (!v.IsDefined() || v.IsNull()) return 0;
  double x = 0;
  if (!v.IsScalar() || !ParseCount(v.Scalar(), &x)) {
    Fail(Path(key), absl::StrCat("must be a positive parameter count such as 7.6B or 1T, got \"",
                                 v.IsScalar() ? v.Scalar() : "(not a scalar)", "\""));
    return 0;
  }
  return x;
}

std::string Fields::Str(const char* key, bool required, const std::string& def) {
  YAML::Node v = Get(key, required);
  if (!v.IsDefined() || v.IsNull()) return def;
  if (!v.IsScalar()) {
    Fail(Path(key), "must be a string");
    return def;
  }
  if (required && v.Scalar().empty()) Fail(Path(key), "must not be empty");
  return v.Scalar();
}

std::string Fields::Enum(const char* key, bool required, std::initializer_list<const char*> allowed,
                         const std::string& def) {
  std::string s = Str(key, required, def);
  if (!present(key)) return s;
  for (const char* a : allowed)
    if (s == a) return s;
  Fail(Path(key), absl::StrCat("must be one of ", absl::StrJoin(allowed, ", "), "; got \"", s, "\""));
  return def;
}

bool Fields::Bool(const char* key, bool def) {
  YAML::Node v = Get(key, false);
  if (!v.IsDefined() || v.IsNull()) return def;
  if (v.IsScalar()) {
    const std::string& s = v.Scalar();
    if (s == "true" || s == "True" || s == "yes") return true;
    if (s == "false" || s == "False" || s == "no") return false;
  }
  Fail(Path(key), "must be true or false");
  return def;
}

std::vector<std::string> Fields::StrList(const char* key, bool required) {
  std::vector<std::string> out;
  YAML::Node v = Get(key, required);
  if (!v.IsDefined() || v.IsNull()) return out;
  if (!v.IsSequence()) {
    Fail(Path(key), "must be a list of strings");
    return out;
  }
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].IsScalar()) {
      Fail(absl::StrCat(Path(key), "[", i, "]"), "must be a string");
      return out;
    }
    out.push_back(v[i].Scalar());
  }
  return out;
}

Fields Fields::Sub(const char* key, bool required) {
  YAML::Node v = Get(key, required);
  Fields sub(v, where_, absl::StrCat(prefix_, key, "."));
  sub.error_ = error_;  // share the first error
  if (v.IsDefined() && !v.IsNull() && !v.IsMap()) Fail(Path(key), "must be a map of fields");
  return sub;
}

void Fields::OnlyKeys(std::initializer_list<const char*> known) {
  if (!node_.IsMap()) return;
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    std::string k = it->first.IsScalar() ? it->first.Scalar() : "?";
    bool ok = false;
    for (const char* n : known) ok = ok || k == n;
    if (!ok) {
      Fail(Path(k.c_str()), absl::StrCat("unknown field (known: ", absl::StrJoin(known, ", "), ")"));
      return;
    }
  }
}

}  // namespace skyrl::catalog::internal
