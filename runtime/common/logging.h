// Logging goes through spdlog. Daemons call InitLogging once from main with their
// --log-level flag; libraries just call spdlog::info(...) and friends.
#pragma once

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "spdlog/spdlog.h"

// Debian's abseil has its own string_view type: teach fmt to print it (status messages).
template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<fmt::string_view> {
  auto format(absl::string_view s, fmt::format_context& ctx) const {
    return fmt::formatter<fmt::string_view>::format(fmt::string_view(s.data(), s.size()), ctx);
  }
};

namespace skyrl {

// Sets the process-wide level: trace, debug, info, warn, error, critical or off.
// InvalidArgument names the flag for anything else. `process` tags every line.
absl::Status InitLogging(absl::string_view process, absl::string_view level);

}  // namespace skyrl
