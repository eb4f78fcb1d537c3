#include "runtime/common/process_identity.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace skyrl {

std::string ProcessSpace() {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  if (!std::getline(boot, boot_id)) return "";
  boot_id = std::string(absl::StripAsciiWhitespace(boot_id));
  struct stat ns;
  if (boot_id.empty() || stat("/proc/self/ns/pid", &ns) != 0) return "";
  // A /proc mounted for another pid namespace (a container started without its own) names
  // other processes by these pids: then nothing here can be checked.
  std::ifstream self("/proc/self/stat");
  long proc_pid = 0;
  if (!(self >> proc_pid) || proc_pid != long(getpid())) return "";
  return absl::StrCat(boot_id, "/", ns.st_dev, ":", ns.st_ino);
}

absl::StatusOr<int64_t> ProcessStartTicks(int pid) {
  if (pid <= 0) return absl::InvalidArgumentError(absl::StrCat("pid ", pid, ": not a process id"));
  const std::string path = absl::StrCat("/proc/", pid, "/stat");
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    // Gone only when /proc has no such entry and the kernel, asked directly, knows no such
    // process: a /proc that hides other users' processes (hidepid), a denial or a lack of
    // file descriptors says nothing.
    if ((e == ENOENT || e == ESRCH) && kill(pid, 0) != 0 && errno == ESRCH)
      return absl::NotFoundError(absl::StrCat("no process ", pid));
    return absl::UnavailableError(absl::StrCat(path, ": cannot read it: ", std::strerror(e)));
  }
  std::string stat;
  char buf[1024];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) stat.append(buf, size_t(n));
  close(fd);
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so fields are counted
  // from the last ')'. After it come field 3 (state) onwards; field 22 is the start time.
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos)
    return absl::DataLossError(absl::StrCat(path, ": no ')' after the command name"));
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(stat).substr(paren + 1), ' ', absl::SkipEmpty());
  int64_t start = 0;
  if (fields.size() < 20 || !absl::SimpleAtoi(fields[19], &start))
    return absl::DataLossError(absl::StrCat(path, ": no start time in field 22"));
  if (fields[0] == "Z" || fields[0] == "X")
    return absl::NotFoundError(absl::StrCat("process ", pid, " has exited"));
  return start;
}

bool ProcessGone(int pid, int64_t start_ticks) {
  if (pid <= 0 || start_ticks <= 0) return false;
  absl::StatusOr<int64_t> start = ProcessStartTicks(pid);
  if (absl::IsNotFound(start.status())) return true;
  return start.ok() && *start != start_ticks;
}

}  // namespace skyrl
