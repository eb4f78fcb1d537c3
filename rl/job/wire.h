// Framing for the RL actors' byte methods: several byte strings in one argument (a JSON header
// plus tensor archives), each prefixed by its length as 8 little-endian bytes.
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace skyrl::rl {

std::string PackParts(const std::vector<std::string>& parts);
// DataLoss when the bytes are not `expected` parts (or are truncated); names `what`.
absl::StatusOr<std::vector<std::string>> UnpackParts(absl::string_view bytes, size_t expected,
                                                     absl::string_view what);

}  // namespace skyrl::rl
