#include "runtime/common/logging.h"

#include "absl/strings/str_cat.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace skyrl {

absl::Status InitLogging(absl::string_view process, absl::string_view level) {
  spdlog::level::level_enum lvl = spdlog::level::from_str(std::string(level));
  // from_str maps anything unknown to "off"; only "off" itself may mean off.
  if (lvl == spdlog::level::off && level != "off")
    return absl::InvalidArgumentError(absl::StrCat(
        "--log-level: \"", level, "\" is not one of trace, debug, info, warn, error, critical, off"));
  auto logger = spdlog::stderr_color_mt(std::string(process));
  spdlog::set_default_logger(logger);
  spdlog::set_level(lvl);
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%n] [%^%l%$] %v");
  spdlog::flush_on(spdlog::level::info);
  return absl::OkStatus();
}

}  // namespace skyrl
