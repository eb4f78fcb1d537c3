// Paths for tests and benchmarks: where the built daemons are, and fresh scratch folders.
#pragma once

#include <string>

namespace skyrl::testing {

// build/bin: $SKYRL_BIN_DIR when set (ctest sets it), else found from this executable.
std::string BinDir();
// The whole file; empty when it cannot be read (not there yet, say).
std::string ReadFileOrEmpty(const std::string& path);
// A new empty directory under $TMPDIR (or /tmp) named after `tag`; the caller removes it.
std::string MakeTempDir(const std::string& tag);

}  // namespace skyrl::testing
