#include "rl/job/wire.h"

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace skyrl::rl {

std::string PackParts(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) {
    uint64_t n = p.size();
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
    out += p;
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> UnpackParts(absl::string_view bytes, size_t expected,
                                                     absl::string_view what) {
  std::vector<std::string> parts;
  size_t pos = 0;
  while (pos < bytes.size()) {
    if (bytes.size() - pos < 8)
      return absl::DataLossError(absl::StrCat(what, ": truncated length at byte ", pos));
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i)
      n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[pos + i])) << (8 * i);
    pos += 8;
    if (n > bytes.size() - pos)
      return absl::DataLossError(absl::StrCat(what, ": part ", parts.size(), " truncated"));
    parts.emplace_back(bytes.substr(pos, n));
    pos += n;
  }
  if (parts.size() != expected) {
    return absl::DataLossError(absl::StrCat(what, ": expected ", expected, " parts, got ", parts.size()));
  }
  return parts;
}

}  // namespace skyrl::rl
