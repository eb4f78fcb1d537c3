#include "tests/util/paths.h"

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace skyrl::testing {

std::string BinDir() {
  if (const char* env = std::getenv("SKYRL_BIN_DIR")) return env;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe").parent_path();
  if (exe.filename() == "tests") exe = exe.parent_path();
  return exe.string();
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string MakeTempDir(const std::string& tag) {
  const char* base = std::getenv("TMPDIR");
  std::string templ = std::string(base ? base : "/tmp") + "/skyrl-" + tag + "-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + templ);
  return templ;
}

}  // namespace skyrl::testing
