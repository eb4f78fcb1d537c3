// Reads the last lines of a log file, for death reports ("actor died: exit code 1; last lines:").
#pragma once

#include <string>
#include <vector>

namespace skyrl {

// Up to `max_lines` final lines of the file at `path`, oldest first, reading at most
// `max_bytes` from its end (a line longer than that is cut). Empty when the file is missing.
std::vector<std::string> TailLines(const std::string& path, size_t max_lines, size_t max_bytes = 64 << 10);

}  // namespace skyrl
