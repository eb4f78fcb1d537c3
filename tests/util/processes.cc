#include "tests/util/processes.h"

#include <dirent.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/util/paths.h"

namespace skyrl::testing {

std::map<std::string, std::vector<int>> ActorProcessesWithHome(const std::string& home) {
  std::map<std::string, std::vector<int>> out;
  const std::string home_var = "HOME=" + home;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  while (dirent* e = readdir(proc)) {
    int pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
    std::string stat = ReadFileOrEmpty(absl::StrCat("/proc/", pid, "/stat"));
    size_t paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] == 'Z') continue;
    std::string actor;
    bool ours = false;
    for (absl::string_view var :
         absl::StrSplit(ReadFileOrEmpty(absl::StrCat("/proc/", pid, "/environ")), '\0')) {
      if (var == home_var) ours = true;
      if (absl::ConsumePrefix(&var, "SKYRL_ACTOR_ID=")) actor = std::string(var);
    }
    if (ours && !actor.empty()) out[actor].push_back(pid);
  }
  closedir(proc);
  return out;
}

}  // namespace skyrl::testing
