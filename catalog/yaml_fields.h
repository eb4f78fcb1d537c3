// Internal to catalog/: typed, validated reads from a yaml-cpp map that keep the first error.
// yaml-cpp throws; these functions catch at this edge and turn every problem into an
// InvalidArgument naming "<where>: <prefix><field>: <what>". Not thread-safe (one reader per
// node).
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace skyrl::catalog::internal {

class Fields {
 public:
  // `where` names the file and entry ("models/a.yaml: model X"); `prefix` the path of this
  // map inside it ("arch.moe.").
  Fields(YAML::Node node, std::string where, std::string prefix);

  bool present(const char* key) const;
  // Integers must be whole numbers >= min.
  int64_t Int(const char* key, bool required, int64_t def = 0, int64_t min = 1);
  // A parameter count: a number, or a number with K, M, B or T ("1T", "7.61B").
  double Count(const char* key, bool required);
  std::string Str(const char* key, bool required, const std::string& def = "");
  // One of `allowed`.
  std::string Enum(const char* key, bool required, std::initializer_list<const char*> allowed,
                   const std::string& def = "");
  bool Bool(const char* key, bool def);
  std::vector<std::string> StrList(const char* key, bool required);
  // A nested map; an absent optional one reads as empty (every field at its default).
  Fields Sub(const char* key, bool required);
  // Every key must be one of `known`: catches misspelt fields.
  void OnlyKeys(std::initializer_list<const char*> known);

  YAML::Node node() const { return node_; }
  const std::string& where() const { return where_; }
  std::string Path(const char* key) const { return prefix_ + key; }
  void Fail(const std::string& field, const std::string& what);
  // The first error of this reader and of every Sub() taken from it.
  absl::Status status() const;

 private:
  YAML::Node Get(const char* key, bool required);

  YAML::Node node_;
  std::string where_;
  std::string prefix_;
  std::shared_ptr<absl::Status> error_;
};

// Parses "1T", "0.6B", "235B", "900M", "12e9" into a count. False when malformed.
bool ParseCount(const std::string& text, double* out);

}  // namespace skyrl::catalog::internal
